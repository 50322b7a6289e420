/** What the `coffer admin` groups share: their arguments' parsing, the operator as actor, and the services they run on. */
import os from 'node:os';
import { loadConfig, parseDuration } from '../../config.js';
import { PLANS, isPlan, type Plan } from '../../domain/plans.js';
import { SCOPES, isScope, type Scope } from '../../domain/scopes.js';
import type { AuditActor } from '../../domain/audit.js';
import { operatorActor } from '../../services/audit.js';
import type { ChangedBy } from '../../services/keys.js';
import type { OperatorParts } from '../../server/compose.js';
import { usageError } from '../output.js';

export function plan(value: string): Plan {
  if (!isPlan(value)) throw usageError(`unknown plan "${value}" (expected ${PLANS.join(', ')})`);
  return value;
}

export function scopes(value: string): Scope[] {
  const list = value
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = list.filter((s) => !isScope(s));
  if (list.length === 0 || unknown.length > 0) {
    throw usageError(`unknown scope "${unknown[0] ?? value}" (expected a comma list of ${SCOPES.join(', ')})`);
  }
  return [...new Set(list)] as Scope[];
}

export function expiresIn(value: string): number {
  const ms = parseDuration(value);
  if (ms === null || ms <= 0) throw usageError(`--expires-in expects a duration like 30d or 12h, got "${value}"`);
  return ms;
}

/**
 * A label as every `coffer admin` command prints it: in straight double quotes (a label never holds one: the rules
 * of domain/keys.ts and HOST_LABEL).
 */
export const quoted = (label: string): string => `"${label}"`;

/** Rows under a header row, each column as wide as its widest cell; an empty cell prints "-". */
export function textTable(header: string[], rows: string[][]): string {
  const lines = [header, ...rows.map((row) => row.map((cell) => (cell === '' ? '-' : cell)))];
  const widths = header.map((_, i) => Math.max(...lines.map((line) => [...(line[i] ?? '')].length)));
  return lines
    .map((line) =>
      line
        .map((cell, i) => cell + ' '.repeat(widths[i]! - [...cell].length))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** Who did it, as `coffer admin audit` and the lists name them: "operator alice", "key <id> "laptop"", "session <id>". */
export function actorWords(actor: AuditActor, keyLabel: string | null = null): string {
  return [actor.kind, actor.id ?? (actor.kind === 'operator' ? '(user not recorded)' : ''), keyLabel === null ? '' : quoted(keyLabel)]
    .filter(Boolean)
    .join(' ');
}

/** The operator as the audit trail names them: the OS user running `coffer admin`, no address. */
export function operator(): ChangedBy {
  let user: string | undefined;
  try {
    user = os.userInfo().username;
  } catch {
    user = undefined;
  }
  return { actor: operatorActor(user), address: null };
}

/** Runs `work` on the operator's services of the configured database (the composition root builds them), then closes it. */
export async function withServices<T>(work: (parts: OperatorParts) => Promise<T>, config = loadConfig()): Promise<T> {
  // Loaded on demand so that `coffer --help` and the client commands do not pay for the server's modules.
  const { composeOperatorParts } = await import('../../server/compose.js');
  const parts = await composeOperatorParts(config);
  try {
    return await work(parts);
  } finally {
    await parts.close();
  }
}
