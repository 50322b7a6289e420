/* global process, console */
// Lists the largest functions of the TypeScript sources (lines from the AST: a function's first to last line),
// for the architecture notes: `node scripts/largest-functions.mjs [--most 15] [dir …]` (default src console/src).
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const args = process.argv.slice(2);
const mostAt = args.indexOf('--most');
const most = mostAt >= 0 ? Number(args.splice(mostAt, 2)[1]) : 15;
const roots = args.length ? args : ['src', 'console/src'];

function* sourceFiles(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* sourceFiles(full);
    else if (/\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts')) yield full;
  }
}

function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name) return node.name.getText();
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent)) return parent.name.getText();
  if (parent && ts.isPropertyAssignment(parent)) return parent.name.getText();
  if (parent && ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText().slice(0, 40)})`;
  return '(anonymous)';
}

const found = [];
for (const root of roots) {
  for (const file of sourceFiles(root)) {
    const text = fs.readFileSync(file, 'utf8');
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith('x') ? ts.ScriptKind.TSX : ts.ScriptKind.TS);
    const visit = (node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        found.push({ lines: last - first + 1, name: nameOf(node), where: `${file}:${first + 1}` });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
}
found.sort((a, b) => b.lines - a.lines);
for (const f of found.slice(0, most)) console.log(`${String(f.lines).padStart(5)}  ${f.name}  ${f.where}`);
