#!/usr/bin/env node
/* global process, console */
/**
 * Builds the SDK package every Coffer server serves at /downloads/coffer-sdk.tgz (run by `npm run build`, after tsc
 * and tsconfig.sdk.json's declaration emit), for applications: `npm install <server>/downloads/coffer-sdk.tgz`, then
 * `import { ... } from 'coffer-sdk'` (docs/sdk.md).
 *
 * The package holds src/client/'s entries compiled (index.js for Node; browser.js, once it is built, for browsers
 * and bundlers), the modules they import (found by following the imports), their declarations (dist/sdk-types),
 * and exactly the npm packages those files name, at the versions of this package.json: none of the server's.
 * Its `coffer.apiVersions` field states which server API versions it speaks (SUPPORTED_API_VERSIONS when the SDK
 * exports it, else this release's minor line). The tarball is `npm pack`'s output, renamed.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { importClosure, npmPack, stageModule, versionsOf } from './package-closure.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const manifest = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));
const OUT = path.join(root, 'dist/downloads/coffer-sdk.tgz');
const NODE_ENTRY = 'dist/client/index.js';
const BROWSER_ENTRY = 'dist/client/browser.js';
/** Where tsconfig.sdk.json writes the declarations: dist/sdk-types/client/index.d.ts is dist/client/index.js's. */
const TYPES = 'dist/sdk-types';

if (!fs.existsSync(path.join(root, NODE_ENTRY)) || !fs.existsSync(path.join(root, TYPES, 'client/index.d.ts'))) {
  console.error(`pack-sdk: ${NODE_ENTRY} or its declarations are missing; run tsc (tsconfig.build.json, tsconfig.sdk.json) first`);
  process.exit(1);
}

const hasBrowserEntry = fs.existsSync(path.join(root, BROWSER_ENTRY));
const entries = hasBrowserEntry ? [NODE_ENTRY, BROWSER_ENTRY] : [NODE_ENTRY];
const code = importClosure(root, entries);
// Declarations: `./x.js` in a .d.ts is `./x.d.ts` beside it.
const typesRoot = path.join(root, TYPES);
const types = importClosure(
  typesRoot,
  entries.map((entry) => entry.replace(/^dist\//, '').replace(/\.js$/, '.d.ts')),
  (target) => target.replace(/\.js$/, '.d.ts'),
);
const dependencies = versionsOf(new Set([...code.packages, ...types.packages]), manifest, 'the SDK', { alsoDev: true });

/** The server API versions this SDK speaks, as one semver range. */
async function apiVersions() {
  const versionModule = path.join(root, 'dist/client/app/version.js');
  if (fs.existsSync(versionModule)) {
    const { SUPPORTED_API_VERSIONS } = await import(pathToFileURL(versionModule).href);
    if (Array.isArray(SUPPORTED_API_VERSIONS) && SUPPORTED_API_VERSIONS.length > 0) return SUPPORTED_API_VERSIONS.join(' || ');
  }
  const [major, minor] = manifest.version.split('.');
  return `^${major}.${minor}.0`;
}

/** `exports`: a bundler (or a browser import map) picks the `browser` condition; Node picks `node`. */
function exportsMap() {
  const node = { types: './dist/client/index.d.ts', default: './dist/client/index.js' };
  if (!hasBrowserEntry) return { '.': node, './package.json': './package.json' };
  const browser = { types: './dist/client/browser.d.ts', default: './dist/client/browser.js' };
  return { '.': { browser, node, default: node }, './browser': browser, './package.json': './package.json' };
}

const README = `# coffer-sdk

Coffer for programs: back up what your application has (a directory, a stream, a Blob or bytes under a name) to a
Coffer server, encrypted before it leaves the process (libsodium: Argon2id, XChaCha20-Poly1305), and restore it.
The same package runs on Node (20, 22, 24) and, through its \`browser\` export, in browsers and bundlers.

Every Coffer server serves this package and its reference:

\`\`\`sh
npm install https://backup.example.com/downloads/coffer-sdk.tgz
\`\`\`

- Guide and reference: https://backup.example.com/docs/sdk/ (the guide is docs/sdk.md in Coffer's repository)
- Server API versions spoken: the \`coffer.apiVersions\` field of this package.json.

TypeScript on Node: the declarations name Node's stream types; install \`@types/node\` in your project.
`;

const stage = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-sdk-pack-'));
try {
  for (const rel of code.files) stageModule(path.join(root, rel), path.join(stage, rel));
  for (const rel of types.files) stageModule(path.join(typesRoot, rel), path.join(stage, 'dist', rel));
  const sdk = {
    name: 'coffer-sdk',
    version: manifest.version,
    description: 'Coffer SDK: zero-knowledge encrypted backups from Node and browser applications',
    type: 'module',
    license: manifest.license,
    engines: manifest.engines,
    exports: exportsMap(),
    types: './dist/client/index.d.ts',
    files: ['dist', 'README.md'],
    dependencies,
    coffer: { apiVersions: await apiVersions() },
  };
  fs.writeFileSync(path.join(stage, 'package.json'), `${JSON.stringify(sdk, null, 2)}\n`);
  fs.writeFileSync(path.join(stage, 'README.md'), README);
  const bytes = npmPack(stage, OUT);
  console.log(
    `pack-sdk: dist/downloads/coffer-sdk.tgz (${bytes} bytes, ${code.files.size} modules, ${types.files.size} declarations; ${Object.keys(dependencies).join(', ')})`,
  );
} finally {
  fs.rmSync(stage, { recursive: true, force: true });
}
