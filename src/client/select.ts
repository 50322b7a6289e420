/**
 * Which paths a backup takes and a restore writes: gitignore-style rules (the `ignore` library, the matcher
 * eslint and many others use) from `--exclude`, `--exclude-file` and `.cofferignore` files inside the tree, and
 * the `--include` selection of a partial restore.
 *
 * Paths given to the rules are relative to the backed-up directory (or to the directory holding the
 * `.cofferignore` that declares them), '/'-separated, with a trailing '/' for directories so that `dir/`
 * patterns match directories only, exactly as in a .gitignore.
 */
import ignore, { type Ignore } from 'ignore';

/** The name of the rule files read inside a backed-up tree. */
export const IGNORE_FILE = '.cofferignore';

interface Layer {
  /** Directory the rules are relative to ('' for the root of the backed-up path). */
  base: string;
  rules: Ignore;
}

/** Splits a rule file (or --exclude-file) into gitignore lines; the `ignore` library skips blanks and comments. */
export const ruleLines = (text: string): string[] => text.split(/\r?\n/);

/**
 * Exclude rules as a stack of layers, outermost first: the command line's, then one per `.cofferignore` on the
 * way down. Like git, a deeper file's rules win over an outer one's (a `!pattern` there re-includes), and
 * nothing below an excluded directory can be re-included (the walk never enters it).
 */
export class ExcludeRules {
  private constructor(private readonly layers: readonly Layer[]) {}

  static of(patterns: readonly string[]): ExcludeRules {
    return new ExcludeRules(patterns.length > 0 ? [{ base: '', rules: ignore().add([...patterns]) }] : []);
  }

  /** These rules plus those of a rule file found in `base` (relative to the root). */
  with(base: string, text: string): ExcludeRules {
    return new ExcludeRules([...this.layers, { base, rules: ignore().add(ruleLines(text)) }]);
  }

  /** Whether the entry at `relative` (from the root, no leading './') is left out. */
  excludes(relative: string, isDirectory: boolean): boolean {
    let excluded = false;
    for (const { base, rules } of this.layers) {
      if (base !== '' && !relative.startsWith(`${base}/`)) continue;
      const local = base === '' ? relative : relative.slice(base.length + 1);
      const verdict = rules.test(isDirectory ? `${local}/` : local);
      if (verdict.ignored) excluded = true;
      else if (verdict.unignored) excluded = false;
    }
    return excluded;
  }
}

/**
 * The selection of a partial restore: an entry is restored when one of the patterns matches it or one of its
 * parent directories (so `docs` restores the whole docs directory, `*.txt` every text file, `a/b.txt` one file).
 * Returns undefined when no pattern was given (everything is restored).
 */
export function includeMatcher(patterns: readonly string[] | undefined): ((relative: string, isDirectory: boolean) => boolean) | undefined {
  if (!patterns || patterns.length === 0) return undefined;
  const rules = ignore().add([...patterns]);
  return (relative, isDirectory) => rules.ignores(isDirectory ? `${relative}/` : relative);
}
