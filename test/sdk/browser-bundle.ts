/**
 * The SDK's browser entry bundled the way an application's bundler does it: esbuild, platform 'browser', nothing
 * external. A Node built-in anywhere in what the entry pulls in fails the build ("could not resolve node:…").
 */
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { build, type Metafile } from 'esbuild';
import { ROOT } from '../client/helpers.js';

export const BROWSER_ENTRY = path.join(ROOT, 'src/client/browser.ts');

export interface BrowserBundle {
  code: string;
  metafile: Metafile;
}

/** Bundles `entry` (a module that imports the browser entry, or the entry itself) into one ES module. */
export async function bundleForBrowser(entry: string, options: { external?: string[] } = {}): Promise<BrowserBundle> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    minify: true,
    write: false,
    metafile: true,
    logLevel: 'silent',
    external: options.external ?? [],
  });
  return { code: result.outputFiles[0]!.text, metafile: result.metafile };
}

/** The size of `code` gzipped at the level a web server commonly serves (6). */
export const gzippedBytes = (code: string): number => gzipSync(code, { level: 6 }).length;
