/**
 * The rules that decide what a credential may do, called directly: minting within a credential
 * (src/domain/grants.ts) and the append-only restriction (src/domain/append-only.ts). Killed mutants of these are
 * counted by `npm run test:mutation`.
 */
import { describe, expect, it } from 'vitest';
import {
  APPEND_ONLY_REASON,
  APPEND_ONLY_RESOLUTION,
  GUARDED_ACTIONS,
  appendOnlyDecision,
  needsVaultState,
} from '../../src/domain/append-only.js';
import { mintWithin } from '../../src/domain/grants.js';

const ALL = ['backups:read', 'backups:write', 'backups:restore'] as const;

describe('mintWithin', () => {
  it('refuses every scope the credential lacks, naming it, whatever else is asked', () => {
    const reader = { scopes: ['backups:read'] as const, expiresAt: null };
    expect(mintWithin({ scopes: ['backups:write'], expiresAt: null }, reader)).toEqual({ ok: false, missing: 'backups:write' });
    expect(mintWithin({ scopes: ['backups:read', 'backups:restore'], expiresAt: null }, reader)).toEqual({
      ok: false,
      missing: 'backups:restore',
    });
    expect(mintWithin({ scopes: ['backups:read'], expiresAt: null }, reader)).toMatchObject({
      ok: true,
      grant: { scopes: ['backups:read'] },
    });
  });

  it("grants exactly the requested scopes (a copy), never the credential's", () => {
    const requested = ['backups:write'] as 'backups:write'[];
    const decision = mintWithin({ scopes: requested, expiresAt: null }, { scopes: ALL, expiresAt: null });
    expect(decision).toEqual({ ok: true, grant: { scopes: ['backups:write'], expiresAt: null, appendOnly: false }, capped: false });
    if (!decision.ok) throw new Error('refused');
    expect(decision.grant.scopes).not.toBe(requested);
  });

  it('a key ends no later than its credential: the earlier end wins, null meaning never', () => {
    const cases: [number | null, number | null, number | null, boolean][] = [
      // requested, credential, granted, capped
      [null, null, null, false],
      [1_000, null, 1_000, false],
      [null, 2_000, 2_000, true],
      [1_000, 2_000, 1_000, false],
      [3_000, 2_000, 2_000, true],
      [2_000, 2_000, 2_000, false],
    ];
    for (const [requested, credential, granted, capped] of cases) {
      expect(
        mintWithin({ scopes: ['backups:read'], expiresAt: requested }, { scopes: ALL, expiresAt: credential }),
        `${requested} within ${credential}`,
      ).toEqual({
        ok: true,
        grant: { scopes: ['backups:read'], expiresAt: granted, appendOnly: false },
        capped,
      });
    }
  });

  it('an append-only credential mints only append-only keys; any other credential either kind', () => {
    for (const credentialAppendOnly of [undefined, false, true]) {
      for (const requestedAppendOnly of [undefined, false, true]) {
        const decision = mintWithin(
          { scopes: ['backups:read'], expiresAt: null, appendOnly: requestedAppendOnly },
          { scopes: ALL, expiresAt: null, appendOnly: credentialAppendOnly },
        );
        if (credentialAppendOnly === true && requestedAppendOnly !== true)
          expect(decision).toEqual({ ok: false, missing: null, appendOnly: true });
        else expect(decision).toMatchObject({ ok: true, grant: { appendOnly: requestedAppendOnly === true } });
      }
    }
  });
});

describe('appendOnlyDecision', () => {
  it('names what was refused, in words, for each guarded action', () => {
    const messages = GUARDED_ACTIONS.map((action) => appendOnlyDecision(action, { appendOnly: true }, { vaultInitialized: true }));
    expect(messages).toEqual([
      { allowed: false, action: 'backup.delete', message: 'This API key is append-only: it may not delete backups.' },
      { allowed: false, action: 'account.reset', message: 'This API key is append-only: it may not reset the account.' },
      { allowed: false, action: 'account.rotate', message: 'This API key is append-only: it may not rotate the vault envelope.' },
      {
        allowed: false,
        action: 'account.bootstrap',
        message: 'This API key is append-only: it may not bootstrap over an initialized vault.',
      },
    ]);
  });

  it('only a bootstrap needs to know whether the vault exists', () => {
    expect(GUARDED_ACTIONS.filter(needsVaultState)).toEqual(['account.bootstrap']);
  });

  it('the refusal carries a stable reason and says what to do instead', () => {
    expect(APPEND_ONLY_REASON).toBe('append_only');
    expect(APPEND_ONLY_RESOLUTION).toMatch(
      /^This key is append-only: it may add backups but not delete them.*owner's key or in the console\.$/,
    );
  });
});
