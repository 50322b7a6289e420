/**
 * Append-only keys (docs/api-rules.md#append-only-keys): a restriction on a key, not a fourth permission. An
 * append-only key keeps whatever scopes it holds (read the account, create slots, upload, finalize, watch), but
 * may not take anything away: delete a backup, reset the account, rotate the vault envelope, or bootstrap over a
 * vault that exists. Pure: the HTTP layer asks `appendOnlyDecision` before any id is looked at or anything changes.
 */

/** The operations an append-only key is refused. */
export const GUARDED_ACTIONS = ['backup.delete', 'account.reset', 'account.rotate', 'account.bootstrap'] as const;
export type GuardedAction = (typeof GUARDED_ACTIONS)[number];

/** What the refusal carries in `details.reason`. */
export const APPEND_ONLY_REASON = 'append_only';

/** The `resolution` of a refusal: what the caller can do instead. */
export const APPEND_ONLY_RESOLUTION =
  'This key is append-only: it may add backups but not delete them, reset the account, rotate or replace the vault. ' +
  "Do this with the account owner's key or in the console.";

const WHAT: Record<GuardedAction, string> = {
  'backup.delete': 'delete backups',
  'account.reset': 'reset the account',
  'account.rotate': 'rotate the vault envelope',
  'account.bootstrap': 'bootstrap over an initialized vault',
};

export type AppendOnlyDecision = { allowed: true } | { allowed: false; action: GuardedAction; message: string };

/**
 * Whether a credential may perform `action`. `vaultInitialized` matters only for a bootstrap: an append-only key may
 * set up a vault that does not exist yet (a new host's first run), never replace or shadow one.
 */
export function appendOnlyDecision(
  action: GuardedAction,
  credential: { appendOnly: boolean },
  state: { vaultInitialized: boolean },
): AppendOnlyDecision {
  if (!credential.appendOnly) return { allowed: true };
  if (action === 'account.bootstrap' && !state.vaultInitialized) return { allowed: true };
  return { allowed: false, action, message: `This API key is append-only: it may not ${WHAT[action]}.` };
}

/** Whether an action needs to know if the vault exists before it can be decided. */
export const needsVaultState = (action: GuardedAction): boolean => action === 'account.bootstrap';

/**
 * Whether a credential may receive the vault's wrapped master key, its nonce and the KDF parameters. An append-only
 * key never does: a stolen backup host could otherwise guess the passphrase offline, and a host needs only the
 * public recipient (docs/api-rules.md#append-only-keys).
 */
export const receivesWrappedKey = (credential: { appendOnly: boolean }): boolean => !credential.appendOnly;
