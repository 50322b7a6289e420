/**
 * A minimal npm registry on a loopback port, serving packages as this checkout installed them (node_modules): so a
 * test can `npm install` a package's dependencies without the network. Each package directory is packed into a
 * tarball (`package/…`, its nested node_modules left out) with the name, version and dependencies of its
 * package.json; the packument (GET /<name>) lists every installed version of that name.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import * as tar from 'tar';

interface Manifest {
  name: string;
  version: string;
  dependencies?: Record<string, string>;
  optionalDependencies?: Record<string, string>;
  peerDependencies?: Record<string, string>;
  [field: string]: unknown;
}

export interface LocalRegistry {
  url: string;
  /** The packages served, as name@version. */
  packages: string[];
  close(): Promise<void>;
}

/** Where Node would find `name` from `dir`: its own node_modules, then each parent's, up to `root`. */
function installedDir(name: string, from: string, root: string): string | undefined {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (dir === root || dir === path.dirname(dir)) return undefined;
  }
}

/**
 * Serves `names` (as installed below `root`) and everything they depend on (dependencies, and the optional and
 * peer dependencies that are installed).
 */
export async function startLocalRegistry(root: string, names: string[]): Promise<LocalRegistry> {
  const dirs = new Map<string, Manifest>();
  const visit = (name: string, from: string, required: boolean) => {
    const dir = installedDir(name, from, root);
    if (!dir) {
      if (required) throw new Error(`${name} is not installed below ${from}`);
      return;
    }
    if (dirs.has(dir)) return;
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8')) as Manifest;
    dirs.set(dir, manifest);
    for (const dependency of Object.keys(manifest.dependencies ?? {})) visit(dependency, dir, true);
    for (const dependency of Object.keys({ ...manifest.optionalDependencies, ...manifest.peerDependencies })) visit(dependency, dir, false);
  };
  for (const name of names) visit(name, root, true);

  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const tarballs = new Map<string, Buffer>();
  const packuments = new Map<string, { name: string; 'dist-tags': { latest: string }; versions: Record<string, unknown> }>();
  for (const [dir, manifest] of dirs) {
    const files = fs.readdirSync(dir).filter((entry) => entry !== 'node_modules');
    const chunks: Buffer[] = [];
    const stream = tar.c({ gzip: true, cwd: dir, prefix: 'package', portable: true }, files);
    for await (const chunk of stream as unknown as AsyncIterable<Buffer>) chunks.push(chunk);
    const bytes = Buffer.concat(chunks);
    const file = `${manifest.name.replace('/', '__')}-${manifest.version}.tgz`;
    tarballs.set(file, bytes);
    const packument = packuments.get(manifest.name) ?? { name: manifest.name, 'dist-tags': { latest: manifest.version }, versions: {} };
    packument.versions[manifest.version] = {
      ...manifest,
      dist: {
        tarball: `${url}/-/${file}`,
        integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`,
        shasum: createHash('sha1').update(bytes).digest('hex'),
      },
    };
    // The newest version is "latest" (the versions of one name below one checkout are few).
    const newest = Object.keys(packument.versions)
      .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }))
      .at(-1)!;
    packument['dist-tags'].latest = newest;
    packuments.set(manifest.name, packument);
  }

  server.on('request', (request, response) => {
    const target = decodeURIComponent((request.url ?? '/').split('?')[0]!);
    const tarball = target.startsWith('/-/') ? tarballs.get(target.slice(3)) : undefined;
    if (tarball) {
      response.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': tarball.length });
      response.end(tarball);
      return;
    }
    const packument = packuments.get(target.slice(1));
    if (packument) {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(packument));
      return;
    }
    response.writeHead(404, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ error: 'not found' }));
  });

  return {
    url,
    packages: [...dirs.values()].map((m) => `${m.name}@${m.version}`).sort(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
