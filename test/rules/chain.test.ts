/**
 * The chain check on its own (checkChains, src/client/chain.ts; docs/crypto.md §3a): hand-made entries, every
 * finding with its fields and words, the per-chain summary, and what expiry explains. Through the real CLI and a
 * server: test/client/chain.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { ChainHead } from '../../src/client/chain-link.js';
import { type ChainEntry, checkChains } from '../../src/client/chain.js';

const DAY = 86_400_000;

describe('checkChains', () => {
  const CHAIN = '11111111-2222-4333-8444-555555555555';
  const NOW = Date.parse('2030-01-13T00:00:00Z'); // day 12
  const id = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
  const sha = (n: number) => String(n % 10).repeat(64);
  const at = (day: number) => new Date(Date.parse('2030-01-01T00:00:00Z') + day * DAY).toISOString();
  /** Backup n of the chain, made on day n, kept 7 days. */
  const entry = (n: number, over: Partial<ChainEntry> = {}, link: object = {}): ChainEntry => ({
    backupId: id(n),
    createdAt: at(n),
    expiresAt: new Date(Date.parse(at(n)) + 7 * DAY).toISOString(),
    metadata: {
      createdAt: at(n),
      chain: {
        id: CHAIN,
        seq: n,
        previous: n === 1 ? null : { backupId: id(n - 1), ciphertextSha256: sha(n - 1), createdAt: at(n - 1) },
        ...link,
      },
    },
    ...over,
  });
  const kinds = (entries: ChainEntry[], heads: ChainHead[] = []) =>
    checkChains(entries, { now: NOW, localHeads: heads }).findings.map((f) => f.kind);

  it('an intact chain, in any listing order, has no finding', () => {
    expect(kinds([entry(5), entry(3), entry(4)])).toEqual([]);
  });

  it('a leading gap: explained once the predecessor would have expired, reported before', () => {
    // #3 first listed: #2 was made on day 2 and kept 7 days, so it expired on day 9, before NOW (day 12): explained
    expect(kinds([entry(3), entry(4)])).toEqual([]);
    // #8 first listed: #7, made on day 7, would be kept until day 14: not explained
    expect(kinds([entry(8), entry(9)])).toEqual(['gap']);
  });

  it('reordering: server times against the sequence, and sealed times going backwards', () => {
    expect(kinds([entry(5), entry(6, { createdAt: at(4) })])).toEqual(['reorder']);
    expect(kinds([entry(5), entry(6, { metadata: { ...entry(6).metadata, createdAt: at(3) } })])).toEqual(['reorder']);
  });

  it('forks, broken links (id or ciphertext hash), malformed links, and a rollback against the local head', () => {
    expect(kinds([entry(5), entry(6), entry(6, { backupId: id(66) })])).toContain('fork');
    expect(kinds([entry(5), entry(6, {}, { previous: { backupId: id(99), ciphertextSha256: sha(5), createdAt: at(5) } })])).toEqual([
      'broken-link',
    ]);
    expect(kinds([entry(5, { ciphertextSha256: sha(7) }), entry(6)])).toEqual(['broken-link']);
    expect(kinds([entry(5, { ciphertextSha256: sha(5) }), entry(6)])).toEqual([]);
    expect(kinds([entry(5), entry(6, { metadata: { chain: { id: CHAIN, seq: -1 } } })])).toEqual(['malformed']);
    const head: ChainHead = { version: 1, id: CHAIN, seq: 7, backupId: id(7), ciphertextSha256: sha(7), createdAt: at(7) };
    expect(kinds([entry(5), entry(6)], [head])).toEqual(['rollback']);
    expect(kinds([entry(6), entry(7)], [head])).toEqual([]);
    expect(kinds([entry(6), entry(7, { backupId: id(77) })], [head])).toEqual(['broken-link']);
  });
  const report = (entries: ChainEntry[], more: { localHeads?: ChainHead[]; ownHead?: ChainHead | null; now?: number } = {}) =>
    checkChains(entries, {
      now: more.now ?? NOW,
      ...(more.localHeads ? { localHeads: more.localHeads } : {}),
      ...(more.ownHead !== undefined ? { ownHead: more.ownHead } : {}),
    });
  const head = (n: number, over: Partial<ChainHead> = {}): ChainHead => ({
    version: 1,
    id: CHAIN,
    seq: n,
    backupId: id(n),
    ciphertextSha256: sha(n),
    createdAt: at(n),
    ...over,
  });
  const S = CHAIN.slice(0, 8);

  it('summarises each chain, and lists the unchained backups', () => {
    const other = '99999999-2222-4333-8444-555555555555';
    const r = report(
      [
        entry(6),
        { backupId: 'plain', createdAt: at(1), expiresAt: at(8), metadata: {} },
        entry(5),
        entry(7),
        entry(2, {}, { id: other, seq: 1, previous: null }),
      ],
      { localHeads: [head(7), head(1, { id: other, backupId: id(2) })] },
    );
    expect(r.findings).toEqual([]);
    expect(r.unchained).toEqual(['plain']);
    expect(r.chains).toEqual([
      { chainId: CHAIN, backups: 3, firstSeq: 5, lastSeq: 7, headBackupId: id(7), localSeq: 7, ok: true },
      { chainId: other, backups: 1, firstSeq: 1, lastSeq: 1, headBackupId: id(2), localSeq: 1, ok: true },
    ]);
    // A head of another chain says nothing about this one.
    expect(report([entry(5)], { localHeads: [head(9, { id: other })] }).chains[0]).toMatchObject({ localSeq: null, ok: true });
  });

  it('a chain with a finding is not ok, and the others still are', () => {
    const other = '99999999-2222-4333-8444-555555555555';
    const r = report([entry(5), entry(7), entry(1, {}, { id: other, seq: 1, previous: null })]);
    expect(r.chains.map((c) => [c.chainId, c.ok])).toEqual([
      [CHAIN, false],
      [other, true],
    ]);
    expect(r.chains[0]).toMatchObject({ backups: 2, firstSeq: 5, lastSeq: 7, headBackupId: id(7) });
  });

  it('a gap between listed backups: which are missing, between which, in words', () => {
    expect(report([entry(5), entry(7)]).findings).toEqual([
      {
        kind: 'gap',
        chainId: CHAIN,
        missing: { from: 6, to: 6 },
        after: id(5),
        before: id(7),
        message:
          `chain ${S}: backup #6 is missing between ${id(5)} (#5) and ${id(7)} (#7); ` +
          'an older backup is still listed, so expiry does not explain it (deleted by you, or hidden by the server)',
      },
    ]);
    expect(report([entry(4), entry(8)]).findings[0]).toMatchObject({
      missing: { from: 5, to: 7 },
      message: expect.stringContaining(`chain ${S}: backups #5-#7 are missing between ${id(4)} (#4) and ${id(8)} (#8);`),
    });
    // Two gaps, in sequence order.
    expect(report([entry(9), entry(5), entry(7)]).findings.map((f) => (f.kind === 'gap' ? f.missing : null))).toEqual([
      { from: 6, to: 6 },
      { from: 8, to: 8 },
    ]);
    // A gap further along: it lies after the listed backup just before it, not after the first one.
    expect(report([entry(5), entry(6), entry(8)]).findings).toEqual([
      expect.objectContaining({
        kind: 'gap',
        missing: { from: 7, to: 7 },
        after: id(6),
        before: id(8),
        message: expect.stringContaining(`between ${id(6)} (#6) and ${id(8)} (#8)`),
      }),
    ]);
  });

  it('a leading gap: its fields and words; a first backup with no predecessor is never a gap', () => {
    expect(report([entry(8), entry(9)]).findings).toEqual([
      {
        kind: 'gap',
        chainId: CHAIN,
        missing: { from: 1, to: 7 },
        after: null,
        before: id(8),
        message: `chain ${S}: backups #1-#7 are missing before ${id(8)} (#8); #7 was made ${at(7)} and would not have expired yet`,
      },
    ]);
    expect(report([entry(1), entry(2)]).findings).toEqual([]);
    // A link that claims no predecessor past #1: nothing explains the missing ones.
    expect(report([entry(3, {}, { previous: null })]).findings).toEqual([
      expect.objectContaining({
        kind: 'gap',
        missing: { from: 1, to: 2 },
        message: `chain ${S}: backups #1-#2 are missing before ${id(3)} (#3); #2 was made at an unknown time and would not have expired yet`,
      }),
    ]);
    // The boundary: explained only once the predecessor's retention has run out (strictly before now).
    const expiry = Date.parse(at(7)) + 7 * DAY;
    expect(report([entry(8)], { now: expiry }).findings).toEqual([]);
    expect(report([entry(8)], { now: expiry - 1 }).findings.map((f) => f.kind)).toEqual(['gap']);
    // The retention is the listed backup's own (expiresAt - createdAt).
    expect(report([entry(8, { expiresAt: new Date(Date.parse(at(8)) + 2 * DAY).toISOString() })]).findings).toEqual([]);
  });

  it('forks: the place, the backups, the words; a fork is not also a broken link or a gap', () => {
    expect(report([entry(5), entry(6), entry(6, { backupId: id(66), createdAt: at(6.5) })]).findings).toEqual([
      {
        kind: 'fork',
        chainId: CHAIN,
        seq: 6,
        backupIds: [id(6), id(66)],
        message: `chain ${S}: 2 backups claim #6 (${id(6)}, ${id(66)}): the host's state was restored from an older copy, or it crashed between a backup and recording it`,
      },
    ]);
    // Listed in any order: ordered by the server's creation time within one place; three at once.
    const three = report([
      entry(6, { backupId: id(67), createdAt: at(6.7) }),
      entry(6, { backupId: id(66), createdAt: at(6.5) }),
      entry(6),
      entry(5),
    ]);
    expect(three.findings).toEqual([expect.objectContaining({ kind: 'fork', seq: 6, backupIds: [id(6), id(66), id(67)] })]);
    expect(three.chains[0]).toMatchObject({ backups: 4, firstSeq: 5, lastSeq: 6, headBackupId: id(67) });
    // Two forks, and a fork at the first place.
    expect(
      report([
        entry(5),
        entry(5, { backupId: id(55), createdAt: at(5.5) }),
        entry(6),
        entry(6, { backupId: id(66), createdAt: at(6.5) }),
      ]).findings.map((f) => (f.kind === 'fork' ? f.seq : f.kind)),
    ).toEqual([5, 6]);
  });

  it('broken links: the successor names another predecessor, or none, or a ciphertext that differs', () => {
    expect(
      report([entry(5), entry(6, {}, { previous: { backupId: id(99), ciphertextSha256: sha(5), createdAt: at(5) } })]).findings,
    ).toEqual([
      {
        kind: 'broken-link',
        chainId: CHAIN,
        backupId: id(6),
        message: `chain ${S}: backup ${id(6)} (#6) follows ${id(99)}, which is not the listed #5`,
      },
    ]);
    expect(report([entry(5), entry(6, {}, { previous: null })]).findings).toEqual([
      {
        kind: 'broken-link',
        chainId: CHAIN,
        backupId: id(6),
        message: `chain ${S}: backup ${id(6)} (#6) follows nothing, which is not the listed #5`,
      },
    ]);
    expect(report([entry(5, { ciphertextSha256: sha(7) }), entry(6)]).findings).toEqual([
      {
        kind: 'broken-link',
        chainId: CHAIN,
        backupId: id(5),
        message: `chain ${S}: the ciphertext of ${id(5)} (#5) is not the one its successor recorded (SHA-256 differs)`,
      },
    ]);
    // A successor naming a listed backup that is not its predecessor (#4 instead of #5).
    expect(
      report([entry(4), entry(5), entry(6, {}, { previous: { backupId: id(4), ciphertextSha256: sha(4), createdAt: at(4) } })]).findings,
    ).toEqual([expect.objectContaining({ kind: 'broken-link', backupId: id(6) })]);
    // Further along the chain: the hash compared is the named predecessor's own, not the first listed one's.
    expect(report([entry(5), entry(6, { ciphertextSha256: sha(9) }), entry(7)]).findings).toEqual([
      expect.objectContaining({
        kind: 'broken-link',
        backupId: id(6),
        message: expect.stringContaining(`the ciphertext of ${id(6)} (#6)`),
      }),
    ]);
    expect(report([entry(5, { ciphertextSha256: sha(5) }), entry(6), entry(7)]).findings).toEqual([]);
    // The hash of the successor's own ciphertext says nothing about its link.
    expect(report([entry(5), entry(6, { ciphertextSha256: sha(1) })]).findings).toEqual([]);
  });

  it("reordering: which backups, and in which words; the server's order is reported first and alone", () => {
    expect(report([entry(5), entry(6, { createdAt: at(4) }), entry(7)]).findings).toEqual([
      {
        kind: 'reorder',
        chainId: CHAIN,
        backupIds: [id(5), id(6)],
        message: `chain ${S}: the server lists ${id(5)}, ${id(6)} in another order than they were made`,
      },
    ]);
    expect(report([entry(5), entry(6, { metadata: { ...entry(6).metadata, createdAt: at(3) } }), entry(7)]).findings).toEqual([
      {
        kind: 'reorder',
        chainId: CHAIN,
        backupIds: [id(5), id(6)],
        message: `chain ${S}: the sealed creation times of ${id(5)}, ${id(6)} go backwards along the chain (a clock set back, or a replayed backup)`,
      },
    ]);
    // Both disagree: one finding, the server's.
    expect(report([entry(5), entry(6, { createdAt: at(4), metadata: { ...entry(6).metadata, createdAt: at(3) } })]).findings).toEqual([
      expect.objectContaining({ kind: 'reorder', message: expect.stringContaining('the server lists') }),
    ]);
    // Each backup named once, in chain order, when several steps go backwards.
    expect(report([entry(5), entry(6, { createdAt: at(4) }), entry(7, { createdAt: at(3) })]).findings).toEqual([
      expect.objectContaining({ kind: 'reorder', backupIds: [id(5), id(6), id(7)] }),
    ]);
    // Equal times are not a reorder; a backup without a sealed time counts as the oldest.
    expect(report([entry(5), entry(6, { createdAt: at(5) })]).findings).toEqual([]);
    expect(report([entry(5, { metadata: { chain: entry(5).metadata.chain } }), entry(6)]).findings).toEqual([]);
    expect(report([entry(5), entry(6, { metadata: { chain: entry(6).metadata.chain } })]).findings.map((f) => f.kind)).toEqual(['reorder']);
    // Two backups at one place (a fork) are not compared with each other.
    expect(
      report([
        entry(5),
        entry(6, { createdAt: at(6.5) }),
        entry(6, { backupId: id(66), createdAt: at(6.4), metadata: { ...entry(6).metadata, createdAt: at(5.5) } }),
      ]).findings.map((f) => f.kind),
    ).toEqual(['fork']);
    // Not even when the one the server made later was sealed earlier.
    expect(
      report([
        entry(5),
        entry(6, { createdAt: at(6.5) }),
        entry(6, { backupId: id(66), createdAt: at(6.4), metadata: { ...entry(6).metadata, createdAt: at(6.8) } }),
      ]).findings.map((f) => f.kind),
    ).toEqual(['fork']);
  });

  it("against this host's head: a rollback, or another backup in its place", () => {
    expect(report([entry(5), entry(6)], { localHeads: [head(8)] }).findings).toEqual([
      {
        kind: 'rollback',
        chainId: CHAIN,
        newestListed: 6,
        expected: 8,
        message: `chain ${S}: this host made backup #8 (${id(8)}) but the newest listed is #6: the newest backups are hidden or were deleted`,
      },
    ]);
    expect(report([entry(6), entry(7, { backupId: id(77) }, {})], { localHeads: [head(7)] }).findings).toEqual([
      {
        kind: 'broken-link',
        chainId: CHAIN,
        backupId: id(77),
        message: `chain ${S}: this host's #7 is ${id(7)}, but the server lists ${id(77)} there`,
      },
    ]);
    // A head behind the list (another host writes on): nothing.
    expect(report([entry(6), entry(7)], { localHeads: [head(6)] }).findings).toEqual([]);
    expect(report([entry(6), entry(7)], { localHeads: [head(6, { backupId: id(99) })] }).findings).toEqual([]);
  });

  it("the profile's own chain with nothing listed: a rollback unless it would have expired", () => {
    const own = head(9, { createdAt: at(9) });
    const message =
      `chain ${S}: this host made backup #9 (${id(9)}) at ${at(9)}, ` +
      'but no backup of its chain is listed (hidden or deleted, or expired if the retention is shorter than the listed backups suggest)';
    expect(report([], { ownHead: own }).findings).toEqual([{ kind: 'rollback', chainId: CHAIN, newestListed: 0, expected: 9, message }]);
    // Another chain's backups tell the retention: 7 days, so a head made on day 9 is still due at day 12 ...
    const other = '99999999-2222-4333-8444-555555555555';
    const foreign = entry(10, {}, { id: other, seq: 1, previous: null });
    expect(report([foreign], { ownHead: own }).findings.map((f) => f.kind)).toEqual(['rollback']);
    // ... but one made on day 4 has expired by then (and exactly at its expiry it counts as expired).
    expect(report([foreign], { ownHead: head(4) }).findings).toEqual([]);
    expect(report([foreign], { ownHead: head(4), now: Date.parse(at(11)) }).findings).toEqual([]);
    expect(report([foreign], { ownHead: head(4), now: Date.parse(at(11)) - 1 }).findings.map((f) => f.kind)).toEqual(['rollback']);
    // Nothing listed at all: no retention to go by, never explained.
    expect(report([], { ownHead: head(1), now: Date.parse(at(1000)) }).findings.map((f) => f.kind)).toEqual(['rollback']);
    // Its chain listed: no such finding; no head: none either.
    expect(report([entry(9)], { ownHead: own, now: Date.parse(at(100)) }).findings).toEqual([]);
    expect(report([], { ownHead: null }).findings).toEqual([]);
    expect(report([]).findings).toEqual([]);
  });

  it('a malformed link: its own finding, and the backup is in no chain', () => {
    const r = report([entry(5), entry(6, { metadata: { chain: { id: CHAIN, seq: -1 } } })]);
    expect(r.findings).toEqual([
      { kind: 'malformed', chainId: null, backupId: id(6), message: `backup ${id(6)}: its chain link is malformed` },
    ]);
    expect(r.chains).toEqual([expect.objectContaining({ backups: 1 })]);
    expect(r.unchained).toEqual([]);
  });
});
