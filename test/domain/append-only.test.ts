/** Append-only keys, minting from an append-only credential, and the audit trail's entry check (src/domain), called directly. */
import { describe, expect, it } from 'vitest';
import { GUARDED_ACTIONS, appendOnlyDecision } from '../../src/domain/append-only.js';
import { auditEntryProblems, type AuditEntry } from '../../src/domain/audit.js';
import { mintWithin } from '../../src/domain/grants.js';

describe('appendOnlyDecision', () => {
  it('a key without the restriction may do all four; an append-only key none, except bootstrap of a missing vault', () => {
    const table = GUARDED_ACTIONS.flatMap((action) =>
      [false, true].flatMap((appendOnly) =>
        [false, true].map((vaultInitialized) => [
          action,
          appendOnly,
          vaultInitialized,
          appendOnlyDecision(action, { appendOnly }, { vaultInitialized }).allowed,
        ]),
      ),
    );
    expect(table.filter(([, , , allowed]) => !allowed)).toEqual([
      ['backup.delete', true, false, false],
      ['backup.delete', true, true, false],
      ['account.reset', true, false, false],
      ['account.reset', true, true, false],
      ['account.rotate', true, false, false],
      ['account.rotate', true, true, false],
      ['account.bootstrap', true, true, false],
    ]);
    expect(appendOnlyDecision('account.rotate', { appendOnly: true }, { vaultInitialized: true })).toEqual({
      allowed: false,
      action: 'account.rotate',
      message: 'This API key is append-only: it may not rotate the vault envelope.',
    });
  });
});

describe('mintWithin and the append-only restriction', () => {
  const all = ['backups:read', 'backups:write', 'backups:restore'] as const;
  it('an owner may mint either kind; an append-only credential only append-only keys, never silently', () => {
    const owner = { scopes: all, expiresAt: null, appendOnly: false };
    const host = { scopes: all, expiresAt: null, appendOnly: true };
    expect(mintWithin({ scopes: ['backups:read'], expiresAt: null, appendOnly: true }, owner)).toMatchObject({
      ok: true,
      grant: { appendOnly: true },
    });
    expect(mintWithin({ scopes: ['backups:read'], expiresAt: null }, owner)).toMatchObject({ ok: true, grant: { appendOnly: false } });
    expect(mintWithin({ scopes: ['backups:read'], expiresAt: null }, host)).toEqual({ ok: false, missing: null, appendOnly: true });
    expect(mintWithin({ scopes: ['backups:read'], expiresAt: null, appendOnly: true }, host)).toMatchObject({
      ok: true,
      grant: { appendOnly: true },
    });
  });
});

describe('auditEntryProblems', () => {
  const entry: Omit<AuditEntry, 'id'> = {
    accountId: '01a2062a-de2f-742b-a8a9-00a432da0116',
    at: 0,
    action: 'backup.delete',
    outcome: 'done',
    actor: { kind: 'key', id: '01a2062a-de2f-742b-a8a9-00a432da0116' },
    address: '2001:db8::1',
    target: '01a2062a-f60b-704a-b020-d71098078d21',
    detail: 'free → plus',
  };
  it('accepts ids, addresses and short notes', () => {
    expect(auditEntryProblems(entry)).toEqual([]);
  });
  it('refuses anything that looks like a secret or a blob, and unknown words', () => {
    const apiKey = `cfk_${'A'.repeat(43)}`;
    expect(auditEntryProblems({ ...entry, detail: `made ${apiKey}` })).toEqual(['detail looks like a secret']);
    expect(auditEntryProblems({ ...entry, target: `cfs_${'b'.repeat(43)}` })).toEqual(['target looks like a secret']);
    expect(auditEntryProblems({ ...entry, detail: Buffer.alloc(48, 7).toString('base64') })).toEqual(['detail looks like a secret']);
    expect(auditEntryProblems({ ...entry, detail: 'x'.repeat(201) })).toContain('detail is longer than 200 characters');
    expect(auditEntryProblems({ ...entry, action: 'backup.explode' as never, actor: { kind: 'robot' as never, id: null } })).toEqual([
      'unknown action backup.explode',
      'unknown actor kind robot',
    ]);
  });
});
