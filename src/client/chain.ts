/**
 * The history chain of a profile (docs/crypto.md §3a). A server can hide, delete or roll back whole backups
 * even though it cannot read them; to make that visible, the sealed metadata of every backup a profile makes
 * carries a link: the profile's chain id, a sequence number, and the previous backup's id, ciphertext SHA-256
 * and creation time. The host knows these from its own state (`$XDG_STATE_HOME/coffer/chains/<profile>.json`),
 * never from the server, so a write-only host can keep a chain too.
 *
 * `checkChains` reads the links of the backups a reader can decrypt and reports, per chain, what the server's
 * list does not explain: gaps that expiry does not explain, rollbacks (the newest backups gone) and reordering.
 *
 * The link itself and the host's record of its head are ./chain-link.ts.
 */
import { openMetadata, unwrapDek, wipe } from './envelope.js';
import { linkOf, type ChainHead, type ChainLink } from './chain-link.js';
import type { CofferClient } from './sdk.js';

/** One backup as a reader sees it: the server's record and, from its opened metadata, its link. */
export interface ChainEntry {
  backupId: string;
  /** The server's createdAt and expiresAt (ISO). */
  createdAt: string;
  expiresAt: string;
  /** The opened metadata (its `chain` field is read). */
  metadata: { chain?: unknown; createdAt?: string };
  /** The SHA-256 of the backup's ciphertext, when the caller downloaded it (coffer verify); checks the next link. */
  ciphertextSha256?: string;
}

export type ChainFinding =
  | { kind: 'gap'; chainId: string; missing: { from: number; to: number }; after: string | null; before: string; message: string }
  | { kind: 'rollback'; chainId: string; newestListed: number; expected: number; message: string }
  | { kind: 'reorder'; chainId: string; backupIds: string[]; message: string }
  | { kind: 'fork'; chainId: string; seq: number; backupIds: string[]; message: string }
  | { kind: 'broken-link'; chainId: string; backupId: string; message: string }
  | { kind: 'malformed'; chainId: null; backupId: string; message: string };

export interface ChainSummary {
  chainId: string;
  /** Backups of this chain in the list, and the lowest and highest sequence numbers among them. */
  backups: number;
  firstSeq: number;
  lastSeq: number;
  /** The newest backup of the chain in the list. */
  headBackupId: string;
  /** The head this host remembers, when it is one of the hosts that writes this chain. */
  localSeq: number | null;
  ok: boolean;
}

export interface ChainReport {
  chains: ChainSummary[];
  findings: ChainFinding[];
  /** Backups whose metadata carries no link (made without a profile, or by an older client). */
  unchained: string[];
}

export interface CheckOptions {
  /** The check's time (ms); expiry explains a missing backup only once its retention would have run out by then. */
  now: number;
  /** The heads this host remembers (readChainHeads): a chain whose newest listed backup is older is a rollback. */
  localHeads?: readonly ChainHead[];
  /** The selected profile's head: its chain must be listed at all (else everything of it is gone). */
  ownHead?: ChainHead | null;
}

const ms = (iso: string) => Date.parse(iso);

/** A listed backup of a chain, with its link. */
interface Member {
  entry: ChainEntry;
  link: ChainLink;
}

/** One chain as listed: its members by sequence number, the distinct places, and the head this host remembers. */
interface ListedChain {
  id: string;
  /** The id's first 8 characters, as messages name the chain. */
  short: string;
  bySeq: Member[];
  /** The distinct sequence numbers, ascending. */
  seqs: number[];
  first: Member;
  last: Member;
  local: ChainHead | null;
}

/** Two successive listed places of a chain (the first member listed at each). */
interface Neighbours {
  prev: Member;
  next: Member;
}

/** fork: two listed backups claim the same place. */
function forks(chain: ListedChain): ChainFinding[] {
  const { bySeq } = chain;
  const findings: ChainFinding[] = [];
  for (let i = 0; i < bySeq.length;) {
    let j = i;
    while (j + 1 < bySeq.length && bySeq[j + 1]!.link.seq === bySeq[i]!.link.seq) j++;
    if (j > i) {
      const ids = bySeq.slice(i, j + 1).map((m) => m.entry.backupId);
      findings.push({
        kind: 'fork',
        chainId: chain.id,
        seq: bySeq[i]!.link.seq,
        backupIds: ids,
        message: `chain ${chain.short}: ${ids.length} backups claim #${bySeq[i]!.link.seq} (${ids.join(', ')}): the host's state was restored from an older copy, or it crashed between a backup and recording it`,
      });
    }
    i = j + 1;
  }
  return findings;
}

/** gap: places missing between two listed backups (a later one is still there, so expiry does not explain it). */
function gapBetween(chain: ListedChain, { prev, next }: Neighbours): ChainFinding {
  const from = prev.link.seq + 1;
  const to = next.link.seq - 1;
  return {
    kind: 'gap',
    chainId: chain.id,
    missing: { from, to },
    after: prev.entry.backupId,
    before: next.entry.backupId,
    message:
      `chain ${chain.short}: ${from === to ? `backup #${from} is` : `backups #${from}-#${to} are`} missing between ${prev.entry.backupId} (#${prev.link.seq}) ` +
      `and ${next.entry.backupId} (#${next.link.seq}); an older backup is still listed, so expiry does not explain it (deleted by you, or hidden by the server)`,
  };
}

/** broken-link: a backup's link does not name its listed predecessor (id, or the ciphertext SHA-256 when known). */
function brokenLink(chain: ListedChain, { prev, next }: Neighbours): ChainFinding | undefined {
  const { bySeq } = chain;
  const claimed = next.link.previous;
  const idMatches = claimed !== null && bySeq.some((m) => m.link.seq === prev.link.seq && m.entry.backupId === claimed.backupId);
  if (!idMatches) {
    return {
      kind: 'broken-link',
      chainId: chain.id,
      backupId: next.entry.backupId,
      message: `chain ${chain.short}: backup ${next.entry.backupId} (#${next.link.seq}) follows ${claimed?.backupId ?? 'nothing'}, which is not the listed #${prev.link.seq}`,
    };
  }
  const shaKnown = bySeq.find((m) => m.entry.backupId === claimed.backupId)!.entry.ciphertextSha256;
  if (shaKnown === undefined || shaKnown === claimed.ciphertextSha256) return undefined;
  return {
    kind: 'broken-link',
    chainId: chain.id,
    backupId: claimed.backupId,
    message: `chain ${chain.short}: the ciphertext of ${claimed.backupId} (#${prev.link.seq}) is not the one its successor recorded (SHA-256 differs)`,
  };
}

/** Between each two successive listed places: a gap when they are apart, else a broken link, if any. */
function betweenNeighbours(chain: ListedChain): ChainFinding[] {
  const { bySeq, seqs } = chain;
  const findings: ChainFinding[] = [];
  for (let k = 1; k < seqs.length; k++) {
    const pair = { prev: bySeq.find((m) => m.link.seq === seqs[k - 1])!, next: bySeq.find((m) => m.link.seq === seqs[k])! };
    const finding = seqs[k]! - seqs[k - 1]! > 1 ? gapBetween(chain, pair) : brokenLink(chain, pair);
    if (finding) findings.push(finding);
  }
  return findings;
}

/** gap before the oldest listed backup, while its predecessor's retention would not have run out yet. */
function leadingGap({ id, short, first }: ListedChain, options: CheckOptions): ChainFinding[] {
  const lead = first.link.previous;
  if (first.link.seq <= 1) return [];
  const retentionMs = ms(first.entry.expiresAt) - ms(first.entry.createdAt);
  const expiredBy = lead ? ms(lead.createdAt) + retentionMs : Number.NEGATIVE_INFINITY;
  if (!(lead === null || expiredBy > options.now)) return [];
  return [
    {
      kind: 'gap',
      chainId: id,
      missing: { from: 1, to: first.link.seq - 1 },
      after: null,
      before: first.entry.backupId,
      message:
        `chain ${short}: backups #1-#${first.link.seq - 1} are missing before ${first.entry.backupId} (#${first.link.seq}); ` +
        `#${first.link.seq - 1} was made ${lead ? lead.createdAt : 'at an unknown time'} and would not have expired yet`,
    },
  ];
}

/** The backups at places where `time` goes backwards along the chain. */
function outOfOrder(bySeq: Member[], time: (m: Member) => number): string[] {
  const ids: string[] = [];
  for (let k = 1; k < bySeq.length; k++) {
    if (bySeq[k]!.link.seq !== bySeq[k - 1]!.link.seq && time(bySeq[k]!) < time(bySeq[k - 1]!)) {
      ids.push(bySeq[k - 1]!.entry.backupId, bySeq[k]!.entry.backupId);
    }
  }
  return [...new Set(ids)];
}

const serverTime = (m: Member) => ms(m.entry.createdAt);
const sealedTime = (m: Member) => (m.entry.metadata.createdAt ? ms(m.entry.metadata.createdAt) : 0);

/** reorder: the server's creation order disagrees with the sequence. */
function serverReorder({ id, short, bySeq }: ListedChain): ChainFinding[] {
  const ids = outOfOrder(bySeq, serverTime);
  if (ids.length === 0) return [];
  return [
    {
      kind: 'reorder',
      chainId: id,
      backupIds: ids,
      message: `chain ${short}: the server lists ${ids.join(', ')} in another order than they were made`,
    },
  ];
}

/** reorder: the sealed creation times go backwards along the chain (reported when the server's order holds). */
function sealedReorder({ id, short, bySeq }: ListedChain): ChainFinding[] {
  const ids = outOfOrder(bySeq, sealedTime);
  if (ids.length === 0 || outOfOrder(bySeq, serverTime).length > 0) return [];
  return [
    {
      kind: 'reorder',
      chainId: id,
      backupIds: ids,
      message: `chain ${short}: the sealed creation times of ${ids.join(', ')} go backwards along the chain (a clock set back, or a replayed backup)`,
    },
  ];
}

/** rollback: this host knows a newer head than the server lists. */
function rollback({ id, short, last, local }: ListedChain): ChainFinding[] {
  if (!local || local.seq <= last.link.seq) return [];
  return [
    {
      kind: 'rollback',
      chainId: id,
      newestListed: last.link.seq,
      expected: local.seq,
      message:
        `chain ${short}: this host made backup #${local.seq} (${local.backupId}) but the newest listed is #${last.link.seq}: ` +
        'the newest backups are hidden or were deleted',
    },
  ];
}

/** broken-link: the server lists another backup at the place of this host's head. */
function headMismatch({ id, short, last, local }: ListedChain): ChainFinding[] {
  if (!local || local.seq !== last.link.seq || local.backupId === last.entry.backupId) return [];
  return [
    {
      kind: 'broken-link',
      chainId: id,
      backupId: last.entry.backupId,
      message: `chain ${short}: this host's #${local.seq} is ${local.backupId}, but the server lists ${last.entry.backupId} there`,
    },
  ];
}

/** The detectors of one listed chain, in the order their findings are reported. */
const CHAIN_DETECTORS: ((chain: ListedChain, options: CheckOptions) => ChainFinding[])[] = [
  forks,
  betweenNeighbours,
  leadingGap,
  serverReorder,
  sealedReorder,
  rollback,
  headMismatch,
];

/** rollback: the profile's own chain has no listed backup at all, and it would not have expired yet. */
function ownChainMissing(entries: readonly ChainEntry[], listed: ReadonlySet<string>, options: CheckOptions): ChainFinding[] {
  const own = options.ownHead;
  if (!own || listed.has(own.id)) return [];
  const sample = entries[0];
  const retentionMs = sample ? ms(sample.expiresAt) - ms(sample.createdAt) : Number.POSITIVE_INFINITY;
  if (!(ms(own.createdAt) + retentionMs > options.now)) return [];
  return [
    {
      kind: 'rollback',
      chainId: own.id,
      newestListed: 0,
      expected: own.seq,
      message:
        `chain ${own.id.slice(0, 8)}: this host made backup #${own.seq} (${own.backupId}) at ${own.createdAt}, ` +
        'but no backup of its chain is listed (hidden or deleted, or expired if the retention is shorter than the listed backups suggest)',
    },
  ];
}

/** One chain's members in sequence order (ties by the server's creation time), with what the detectors read. */
function listedChain(id: string, members: Member[], options: CheckOptions): ListedChain {
  const bySeq = [...members].sort((a, b) => a.link.seq - b.link.seq || ms(a.entry.createdAt) - ms(b.entry.createdAt));
  const seqs = [...new Set(bySeq.map((m) => m.link.seq))];
  return {
    id,
    short: id.slice(0, 8),
    bySeq,
    seqs,
    first: bySeq.find((m) => m.link.seq === seqs[0])!,
    last: bySeq[bySeq.length - 1]!,
    local: options.localHeads?.find((h) => h.id === id) ?? null,
  };
}

/**
 * Checks the chains in `entries` (every backup the server lists that the reader could open). Pure: no I/O.
 *
 * - gap: sequence numbers missing between two listed backups of a chain (a later backup is still there, so
 *   expiry, which removes the oldest first, does not explain it), or before the oldest listed one when that one's
 *   predecessor would still be within the retention the server states for the listed backups.
 * - rollback: the host's own state knows a newer backup than the newest listed (the server hides the newest).
 * - reorder: the server's creation order, or the sealed creation times, disagree with the sequence.
 * - fork: two listed backups claim the same place (a restored copy of the host's state, a crash between the
 *   backup and the state write, or two hosts sharing one profile's state).
 * - broken-link: a backup's link does not name its listed predecessor (id, or the ciphertext SHA-256 when known).
 *
 * One detector per finding (CHAIN_DETECTORS, ownChainMissing), each reading the chain as listed.
 */
export function checkChains(entries: readonly ChainEntry[], options: CheckOptions): ChainReport {
  const findings: ChainFinding[] = [];
  const unchained: string[] = [];
  const byChain = new Map<string, Member[]>();
  for (const entry of entries) {
    const link = linkOf(entry.metadata);
    if (link === undefined) {
      unchained.push(entry.backupId);
      continue;
    }
    if (link === 'malformed') {
      findings.push({
        kind: 'malformed',
        chainId: null,
        backupId: entry.backupId,
        message: `backup ${entry.backupId}: its chain link is malformed`,
      });
      continue;
    }
    const list = byChain.get(link.id) ?? [];
    list.push({ entry, link });
    byChain.set(link.id, list);
  }

  const chains: ChainSummary[] = [];
  for (const [chainId, members] of byChain) {
    const chain = listedChain(chainId, members, options);
    const found = CHAIN_DETECTORS.flatMap((detect) => detect(chain, options));
    findings.push(...found);
    chains.push({
      chainId,
      backups: members.length,
      firstSeq: chain.first.link.seq,
      lastSeq: chain.last.link.seq,
      headBackupId: chain.last.entry.backupId,
      localSeq: chain.local?.seq ?? null,
      ok: found.length === 0,
    });
  }
  findings.push(...ownChainMissing(entries, new Set(byChain.keys()), options));
  return { chains, findings, unchained };
}

/**
 * The chain entries of an account's READY backups: each one's detail fetched, its DEK unwrapped with `material`
 * (master key, keyring or kit) and its metadata opened, always for the id asked for. An IntegrityError (a backup
 * this material cannot open, or altered) propagates: the caller says what it means.
 */
export async function openChainEntries(
  client: CofferClient,
  material: Uint8Array,
  records: readonly { id: string; status: string }[],
  signal?: AbortSignal,
): Promise<ChainEntry[]> {
  const entries: ChainEntry[] = [];
  for (const record of records) {
    if (record.status !== 'READY') continue;
    const detail = await client.getBackup(record.id, signal);
    const dek = unwrapDek(material, record.id, detail);
    try {
      const metadata = openMetadata(dek, record.id, detail);
      entries.push({ backupId: record.id, createdAt: detail.createdAt, expiresAt: detail.expiresAt, metadata });
    } finally {
      wipe(dek);
    }
  }
  return entries;
}
