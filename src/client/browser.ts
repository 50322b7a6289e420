/**
 * The Coffer SDK in a browser (a bundler, or a plain `<script type="module">`): the same client as the Node entry
 * (./index.ts) minus what needs a file system, on fetch, web streams and libsodium in WebAssembly. It imports no Node
 * built-in, directly or through anything it pulls in (test/sdk/browser-bundle.test.ts bundles it for the browser).
 */
import type { ApiOptions } from './app/platform.js';
import { Coffer, connectOn } from './web/facade.js';
import { ready, webPlatform } from './web/platform.js';

export * from './sdk.js';
export type { ApiOptions };
export { ready, webPlatform } from './web/platform.js';
export { IntegrityError, WrongPassphraseError } from './envelope-core.js';
export {
  BackupWriter,
  Coffer,
  UnlockedVault,
  type BackupOptions,
  type BackupSource,
  type RestoredEntry,
  type UnlockOptions,
} from './web/facade.js';
export type { BackupMetadata } from './envelope-core.js';

/** Connects to a Coffer server with a URL and an API key (libsodium's WebAssembly is loaded first). */
export async function connect(options: ApiOptions): Promise<Coffer> {
  await ready;
  return connectOn(webPlatform, options);
}
