/**
 * The recovery kit (docs/crypto.md §1c) in the browser: the one kit code of src/client/kit-core.ts (BIP-39 English
 * words, shared with `coffer kit` and `coffer recover`) on the page's envelope (libsodium in WebAssembly).
 * Environment-neutral, like ./envelope.ts.
 */
import { createKit } from '../../../src/client/kit-core.js';
import { deriveRecipient, keyMaterialOf, masterKeys, wipe } from './envelope.js';

export { type Kit, KitFormatError, kitRefusal, WORDS_PER_KEY } from '../../../src/client/kit-core.js';

export const { parseKitOrWords } = createKit({ deriveRecipient, keyMaterialOf, masterKeys, wipe });
