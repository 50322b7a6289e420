/**
 * The vault (wrapped master key) operations behind `coffer init`, `coffer passphrase` and every command that
 * needs the master key. The passphrase stays in this process: only the wrapped key and KDF parameters travel.
 */
import {
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  newKdfParams,
  newKey,
  unwrapMasterKey,
  wipe,
  wrapMasterKey,
  type KdfProfile,
} from './envelope.js';
import type { BackupAccountBody, BootstrapResponseBody, CofferClient, RotateResponseBody } from './sdk.js';

export class VaultStateError extends Error {
  override readonly name = 'VaultStateError';
}

/** Creates the master key, wraps it under the passphrase and bootstraps the account. */
export async function initVault(
  client: CofferClient,
  passphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
): Promise<BootstrapResponseBody> {
  const account = await client.getAccount(signal);
  if (account.initialized) {
    throw new VaultStateError('the vault is already initialized; use `coffer passphrase` to change its passphrase');
  }
  const masterKey = newKey();
  try {
    const envelope = await wrapMasterKey(masterKey, passphrase, newKdfParams(profile));
    const result = await client.bootstrap(envelope, signal);
    if (!result.created) {
      throw new VaultStateError('another client initialized the vault at the same time; nothing was changed');
    }
    return result;
  } finally {
    wipe(masterKey);
  }
}

/** The account and its unwrapped master key (secure buffer: wipe it when done). */
export async function unlockVault(
  client: CofferClient,
  passphrase: string,
  signal?: AbortSignal,
): Promise<{ account: BackupAccountBody; masterKey: Buffer }> {
  const account = await client.getAccount(signal);
  if (!account.initialized) throw new VaultStateError('the vault is not initialized; run `coffer init` first');
  return { account, masterKey: await unwrapMasterKey(account, passphrase) };
}

/**
 * Before a backup sealed to a recipient (docs/crypto.md §2b): the vault must be initialized and v1. Nothing is
 * unwrapped and no passphrase is involved; the recipient itself comes from the user, never from the server.
 */
export async function requireSealableVault(client: CofferClient, signal?: AbortSignal): Promise<void> {
  const account = await client.getAccount(signal);
  if (!account.initialized) throw new VaultStateError('the vault is not initialized; run `coffer init` first');
  if (account.cryptoVersion !== CRYPTO_VERSION) {
    throw new VaultStateError(`the vault uses crypto version ${JSON.stringify(account.cryptoVersion)}; recipients need ${CRYPTO_VERSION}`);
  }
}

/** Re-wraps the same master key under a new passphrase and salt (rotate): every backup stays readable. */
export async function changePassphrase(
  client: CofferClient,
  masterKey: Buffer,
  newPassphrase: string,
  profile: KdfProfile = DEFAULT_KDF_PROFILE,
  signal?: AbortSignal,
): Promise<RotateResponseBody> {
  const envelope = await wrapMasterKey(masterKey, newPassphrase, newKdfParams(profile));
  return client.rotate(envelope, signal);
}
