/**
 * The Coffer SDK in a browser (a bundler, or a plain `<script type="module">`): the application API of the Node
 * entry (./index.ts) minus what needs a file system (directory backups, restores to a directory or a file), on fetch,
 * web streams and libsodium in WebAssembly (./web/platform.ts). `connect` with a URL and an API key; `unlock` with the
 * passphrase or a recovery kit, or `writer` with only the vault's recipient (a page that can back up and never
 * restore); back up a Blob/File, bytes, a stream or named entries; list, get, watch, delete; restore to entries;
 * verify. It imports no Node built-in, directly or through anything it pulls in (test/sdk/browser-bundle.test.ts
 * bundles it for the browser with esbuild).
 *
 * libsodium's WebAssembly is compiled when this module loads (a top-level await): once imported, everything is ready.
 */
import { apiOf, Coffer, type ConnectOptions } from './app/coffer.js';
import { ready, webPlatform } from './web/platform.js';

await ready;

export * from './app/public.js';
export * from './sdk.js';
export { IntegrityError, WrongPassphraseError } from './envelope-core.js';
export { RecipientFormatError } from './envelope-recipient.js';
export { KitFormatError } from './kit-core.js';
// Restore attestations (docs/crypto.md#restore-attestations): pass webPlatform.primitives.
export * from './attestation-public.js';
export type { Primitives, StreamState } from './envelope-primitives.js';
export { webPlatform };

/** Connects to a server (nothing is sent until the first call, which checks the server's API version). */
export function connect(options: Omit<ConnectOptions, 'platform'> & { platform?: ConnectOptions['platform'] }): Coffer {
  const platform = options.platform ?? webPlatform;
  return new Coffer(apiOf(options, platform), platform);
}
