/**
 * The recovery kit (docs/crypto.md §1c) for the CLI: ./kit-core.ts (shared with the console page) on the sodium-native
 * envelope. The vault's master keys as BIP-39 English words, 24 per 32-byte key, current first. Whoever holds it
 * reads every backup, exactly like whoever holds the passphrase.
 */
import { deriveRecipient, keyMaterialOf, masterKeys, wipe } from './envelope.js';
import { createKit, type Kit as CoreKit } from './kit-core.js';

export { KIT_HEADER, KitFormatError, kitRefusal } from './kit-core.js';

export type Kit = CoreKit<Buffer>;

export const { formatKit, parseKit, parseKitWords, parseKitOrWords } = createKit<Buffer>({
  deriveRecipient,
  keyMaterialOf,
  masterKeys,
  wipe,
});
