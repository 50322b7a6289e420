/**
 * The vault's recipient for a new backup host, off the main thread: fetch the wrapped master key with the session,
 * unlock it with the passphrase (Argon2id in WebAssembly), derive the recipient (src/client/envelope-core.ts's
 * deriveRecipient) and hand back only its public text and fingerprint. The passphrase and the master key stay here.
 */
/// <reference lib="webworker" />
import type { VaultFields } from './crypto/envelope.js';
import type { RecipientMessage, RecipientRequest } from './recipient-protocol.js';

// Loaded on demand, as in the restore worker: the handler must be installed before libsodium's top-level await.
const crypto = import('./crypto/envelope.js');

declare const self: DedicatedWorkerGlobalScope;

async function derive({ passphrase }: RecipientRequest): Promise<RecipientMessage> {
  const { WrongPassphraseError, deriveRecipient, ready, unwrapMasterKey, wipe } = await crypto;
  await ready;
  const response = await fetch('/api/backup-account', { credentials: 'same-origin', headers: { accept: 'application/json' } });
  if (!response.ok) return { type: 'error', wrongPassphrase: false, message: `the server answered ${response.status}` };
  const account = (await response.json()) as VaultFields & { initialized: boolean };
  if (!account.initialized)
    return { type: 'error', wrongPassphrase: false, message: 'this account has no vault yet: run coffer init first' };
  let masterKey: Uint8Array;
  try {
    masterKey = await unwrapMasterKey(account, passphrase);
  } catch (error) {
    const wrong = error instanceof WrongPassphraseError;
    return { type: 'error', wrongPassphrase: wrong, message: wrong ? 'wrong passphrase' : String((error as Error)?.message ?? error) };
  }
  try {
    const recipient = deriveRecipient(masterKey);
    return { type: 'done', recipient: recipient.text, fingerprint: recipient.fingerprint };
  } finally {
    wipe(masterKey);
  }
}

self.onmessage = (event: MessageEvent<RecipientRequest>) => {
  derive(event.data).then(
    (message) => self.postMessage(message),
    (error: unknown) =>
      self.postMessage({
        type: 'error',
        wrongPassphrase: false,
        message: String((error as Error)?.message ?? error),
      } satisfies RecipientMessage),
  );
};
