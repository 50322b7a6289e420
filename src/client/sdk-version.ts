/**
 * The SDK's version, for its default User-Agent: a literal, since the SDK's code reads no file (the browser entry has
 * no file system; src/lib/version.ts reads package.json with node:fs). test/sdk/browser-bundle.test.ts checks that it
 * is package.json's version.
 */
export const SDK_VERSION = '0.1.0';
