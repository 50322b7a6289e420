/**
 * What mutation testing mutates (stryker.config.mjs), named so it cannot drift: a whole module, or a span of
 * declarations named by their first and last name, whose lines are found in the source each time Stryker starts.
 * A name that is no longer in the file stops the run (and test/mutation/targets.test.ts) with that name.
 *
 * `floor` is the break threshold of each target (test/mutation/check-scores.mjs): a score below it fails CI. Keep it
 * a few points under the published score (test/helpers/README.md "Mutation testing").
 */
import fs from 'node:fs';
import ts from 'typescript';

/** @typedef {{ name: string, file: string, from?: string, through?: string, floor: number }} Target */

/** @type {Target[]} */
export const TARGETS = [
  { name: 'append-only rule', file: 'src/domain/append-only.ts', floor: 90 },
  { name: 'grant rules', file: 'src/domain/grants.ts', floor: 78 },
  { name: 'recovery kit reader', file: 'src/client/kit-core.ts', floor: 85 },
  { name: 'metadata cache invalidation', file: 'src/store/cached-store.ts', floor: 90 },
  { name: "extractor's tar entry policy", file: 'src/client/extract-policy.ts', floor: 96 },
  // The `ms` helper, the detectors and checkChains itself.
  { name: 'chain check', file: 'src/client/chain.ts', from: 'ms', through: 'checkChains', floor: 96 },
  { name: 'recipient reader', file: 'src/client/envelope-recipient.ts', from: 'parseRecipient', floor: 80 },
];

/** Every declaration (function, variable, class, interface, type) of a file by name, nested ones included: first wins. */
function declarations(file) {
  const source = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  const found = new Map();
  const visit = (node) => {
    const named =
      ts.isFunctionDeclaration(node) ||
      ts.isVariableStatement(node) ||
      ts.isClassDeclaration(node) ||
      ts.isInterfaceDeclaration(node) ||
      ts.isTypeAliasDeclaration(node);
    const names = ts.isVariableStatement(node)
      ? node.declarationList.declarations.map((d) => d.name.getText(source))
      : named && node.name
        ? [node.name.getText(source)]
        : [];
    for (const name of names) {
      if (found.has(name)) continue;
      const line = (pos) => source.getLineAndCharacterOfPosition(pos).line + 1;
      found.set(name, { start: line(node.getStart(source)), end: line(node.getEnd()) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The lines a target covers, or null for a whole module. Throws when a named declaration is missing. */
export function targetLines(target, root = '.') {
  if (!target.from) return null;
  const found = declarations(`${root}/${target.file}`);
  const lookup = (name) => {
    const span = found.get(name);
    if (!span) throw new Error(`mutation target "${target.name}": ${target.file} declares no "${name}" (test/mutation/targets.mjs)`);
    return span;
  };
  const first = lookup(target.from);
  const last = lookup(target.through ?? target.from);
  if (last.end < first.start) throw new Error(`mutation target "${target.name}": "${target.through}" comes before "${target.from}"`);
  return { start: first.start, end: last.end };
}

/** Stryker's `mutate` list: `file` or `file:start-end`. */
export function mutatePatterns(root = '.') {
  return TARGETS.map((target) => {
    const lines = targetLines(target, root);
    return lines ? `${target.file}:${lines.start}-${lines.end}` : target.file;
  });
}
