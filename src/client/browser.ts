/**
 * The Coffer SDK in a browser (a bundler, or a plain `<script type="module">`): the same client as the Node entry
 * (./index.ts) minus what needs a file system, on fetch, web streams and libsodium in WebAssembly. It imports no Node
 * built-in, directly or through anything it pulls in (test/sdk/browser-bundle.test.ts bundles it for the browser).
 */
export * from './sdk.js';
export { ready, webPlatform } from './web/platform.js';
export { IntegrityError, WrongPassphraseError } from './envelope-core.js';
