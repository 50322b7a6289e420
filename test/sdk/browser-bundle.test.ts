/**
 * The browser entry (src/client/browser.ts) bundles for the browser with no Node built-in, and its size: the whole
 * bundle gzipped, and gzipped without libsodium's WebAssembly (libsodium-sumo, which carries the module inline).
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../client/helpers.js';
import { SDK_VERSION } from '../../src/client/sdk-version.js';
import { BROWSER_ENTRY, bundleForBrowser, gzippedBytes } from './browser-bundle.js';

/** The package that carries libsodium's WebAssembly (base64 inside its JavaScript). */
const LIBSODIUM_WASM = 'libsodium-sumo';

describe('the SDK browser entry', () => {
  it('bundles for the browser with nothing external: no Node built-in anywhere in what it imports', async () => {
    const { code, metafile } = await bundleForBrowser(BROWSER_ENTRY);
    const inputs = Object.keys(metafile.inputs);
    expect(inputs.filter((input) => input.startsWith('node:'))).toEqual([]);
    // No Node global either: a bare `Buffer` or `process` would throw where the page runs it.
    const sdkFiles = inputs.filter((input) => input.startsWith('src/'));
    const usingNodeGlobals = sdkFiles.filter((file) => /\b(Buffer|process)\.\w/.test(fs.readFileSync(path.join(ROOT, file), 'utf8')));
    expect(usingNodeGlobals).toEqual([]);
    expect(code.length).toBeGreaterThan(0);
  });

  it('measures the bundle gzipped, with and without libsodium’s WebAssembly', async () => {
    const whole = await bundleForBrowser(BROWSER_ENTRY);
    const withoutWasm = await bundleForBrowser(BROWSER_ENTRY, { external: [LIBSODIUM_WASM] });
    const sizes = { gzipBytes: gzippedBytes(whole.code), gzipBytesWithoutWasm: gzippedBytes(withoutWasm.code) };
    console.log(`browser bundle: ${JSON.stringify({ ...sizes, bytes: whole.code.length, bytesWithoutWasm: withoutWasm.code.length })}`);
    expect(sizes.gzipBytesWithoutWasm).toBeLessThan(sizes.gzipBytes);
  });

  it('states the version package.json gives (the SDK reads no file for it)', () => {
    const manifest = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(SDK_VERSION).toBe(manifest.version);
  });
});
