/**
 * The link a backup of a profile carries in its sealed metadata (docs/crypto.md §3a), and the host's own record of
 * its chain's head (`$XDG_STATE_HOME/coffer/chains/<profile>.json`), from which the next link is made: the host knows
 * the previous backup from this state, never from the server. The check of a list of links is ./chain.ts.
 */
import { plural } from '../domain/words.js';
import { randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';

const Sha256 = z.string().regex(/^[0-9a-f]{64}$/);
const Uuid = z.string().regex(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const Iso = z.string().refine((s) => !Number.isNaN(Date.parse(s)));

/** The `chain` field of the sealed metadata. */
export const ChainLinkSchema = z.strictObject({
  id: Uuid,
  seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  previous: z
    .strictObject({
      backupId: Uuid,
      ciphertextSha256: Sha256,
      createdAt: Iso,
    })
    .nullable(),
});
export type ChainLink = z.output<typeof ChainLinkSchema>;

/** What the host remembers of its chain: the head, i.e. the last backup it made that reached READY. */
const ChainStateSchema = z.strictObject({
  version: z.literal(1),
  id: Uuid,
  seq: z.number().int().min(1),
  backupId: Uuid,
  ciphertextSha256: Sha256,
  createdAt: Iso,
});
export type ChainHead = z.output<typeof ChainStateSchema>;

export class ChainStateError extends Error {
  override readonly name = 'ChainStateError';
}

export const chainStateFile = (stateDir: string, profile: string): string => path.join(stateDir, 'chains', `${profile}.json`);

/** The head of a profile's chain as this host remembers it; null when it has made no backup yet. */
export async function readChainHead(stateDir: string, profile: string): Promise<ChainHead | null> {
  const file = chainStateFile(stateDir, profile);
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new ChainStateError(`cannot read the chain state ${file}: ${(error as Error).message}`);
  }
  let parsed;
  try {
    parsed = ChainStateSchema.safeParse(JSON.parse(text));
  } catch {
    parsed = undefined;
  }
  if (!parsed?.success) {
    // Never start a new chain silently over a damaged one: that would hide exactly what the chain is for.
    throw new ChainStateError(
      `the chain state ${file} is damaged: move it away to start a new chain (coffer list --chain shows the old one)`,
    );
  }
  return parsed.data;
}

/** Every chain head this host remembers (all profiles), for `coffer list --chain`. */
export async function readChainHeads(stateDir: string): Promise<ChainHead[]> {
  const dir = path.join(stateDir, 'chains');
  const names = await fsp.readdir(dir).catch(() => [] as string[]);
  const heads: ChainHead[] = [];
  for (const name of names) {
    if (!name.endsWith('.json')) continue;
    const head = await readChainHead(stateDir, name.slice(0, -'.json'.length)).catch(() => null);
    if (head) heads.push(head);
  }
  return heads;
}

/** The link the next backup of a profile seals: after the remembered head, or the first of a new chain. */
export function nextLink(head: ChainHead | null): ChainLink {
  if (head === null) return { id: randomUUID(), seq: 1, previous: null };
  return {
    id: head.id,
    seq: head.seq + 1,
    previous: { backupId: head.backupId, ciphertextSha256: head.ciphertextSha256, createdAt: head.createdAt },
  };
}

/** Records a backup that reached READY as the new head (atomic write, mode 0600). */
export async function recordChainHead(
  stateDir: string,
  profile: string,
  link: ChainLink,
  backup: { backupId: string; ciphertextSha256: string; createdAt: string },
): Promise<void> {
  const file = chainStateFile(stateDir, profile);
  const head: ChainHead = { version: 1, id: link.id, seq: link.seq, ...backup };
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(head, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
}

/**
 * The link in a backup's opened metadata: undefined when it has none (made without a profile, or by an older
 * client); a link that does not match the schema is reported (it was sealed by a key holder, so it is not the
 * server's doing, but it is not to be trusted either).
 */
export function linkOf(metadata: { chain?: unknown }): ChainLink | undefined | 'malformed' {
  if (metadata.chain === undefined) return undefined;
  const parsed = ChainLinkSchema.safeParse(metadata.chain);
  return parsed.success ? parsed.data : 'malformed';
}

// ---- the check ----

/** How far the server's createdAt for a new backup may be from the host's own clock before it is flagged. */
export const MAX_CLOCK_SKEW_MS = 10 * 60_000;

/**
 * The one call the backup path makes: the link for the next backup of `profile`, and `record` to make the backup
 * the new head once it is READY (a failed backup records nothing, so the next one takes the same place).
 *
 * The head records the host's own clock at the moment the backup became READY, never the server's answer: the
 * next link's `previous.createdAt` is what the expiry rule trusts, and a server that back-dated its finalize answer
 * could otherwise make a later gap look expired. `record` returns a warning when the server's createdAt is more
 * than MAX_CLOCK_SKEW_MS from the host's clock (null otherwise).
 */
export async function chainForProfile(
  stateDir: string,
  profile: string,
  hostNow: () => number = Date.now,
): Promise<{
  link: ChainLink;
  record(result: { detail: { id: string; createdAt: string }; ciphertextSha256?: string }): Promise<string | null>;
}> {
  const link = nextLink(await readChainHead(stateDir, profile));
  return {
    link,
    record: async ({ detail, ciphertextSha256 }) => {
      // runBackup hashes the ciphertext whenever it is given a chain link.
      if (ciphertextSha256 === undefined) throw new Error('a chained backup was made without its ciphertext hash');
      const now = hostNow();
      const createdAt = new Date(now).toISOString();
      await recordChainHead(stateDir, profile, link, { backupId: detail.id, ciphertextSha256, createdAt });
      const skew = Date.parse(detail.createdAt) - now;
      if (!(Math.abs(skew) <= MAX_CLOCK_SKEW_MS)) {
        return (
          `warning: the server says backup ${detail.id} was created at ${detail.createdAt}, ` +
          `${plural(Math.round(Math.abs(skew) / 60_000), 'minute')} ${skew < 0 ? 'before' : 'after'} this host's clock (${createdAt}); ` +
          "the history chain records this host's time (a server clock that is wrong, or a server back-dating its answers)"
        );
      }
      return null;
    },
  };
}
