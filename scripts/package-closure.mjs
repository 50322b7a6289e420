/**
 * What the packages built from this repository share (scripts/pack-cli.mjs, scripts/pack-sdk.mjs): the modules an
 * entry imports, found by following the imports of the compiled files, the npm packages they name, and `npm pack`
 * of a staged folder.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { builtinModules } from 'node:module';
import path from 'node:path';

const IMPORT =
  /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;])import\s*['"]([^'"]+)['"]|\bimport\(\s*['"]([^'"]+)['"]\s*\)/gm;
const builtins = new Set(builtinModules);

/** The npm package a bare specifier names (`@scope/name/sub` → `@scope/name`). */
function packageOf(specifier) {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}

/**
 * The files under `root` that `entries` (paths relative to root) import, themselves included, and the npm packages
 * they name (Node's built-ins left out). `resolve` maps a relative import to the file that holds it (for
 * declarations: `./x.js` is `./x.d.ts`).
 */
export function importClosure(root, entries, resolve = (target) => target) {
  const files = new Set();
  const packages = new Set();
  const queue = [...entries];
  while (queue.length > 0) {
    const rel = queue.pop();
    if (files.has(rel)) continue;
    files.add(rel);
    const source = fs.readFileSync(path.join(root, rel), 'utf8');
    for (const match of source.matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2] ?? match[3];
      if (specifier.startsWith('.')) {
        const target = resolve(path.posix.normalize(path.posix.join(path.posix.dirname(rel), specifier)));
        if (!fs.existsSync(path.join(root, target))) throw new Error(`${rel} imports ${specifier}, which is not built`);
        queue.push(target);
      } else if (!specifier.startsWith('node:') && !builtins.has(specifier)) {
        packages.add(packageOf(specifier));
      }
    }
  }
  return { files, packages };
}

/**
 * `packages` with the version ranges of `manifest`'s dependencies (and, with `alsoDev`, its devDependencies: the
 * browser's libsodium is one, bundled into the console page by the server's build).
 */
export function versionsOf(packages, manifest, what, { alsoDev = false } = {}) {
  const dependencies = {};
  for (const name of [...packages].sort()) {
    const range = manifest.dependencies?.[name] ?? (alsoDev ? manifest.devDependencies?.[name] : undefined);
    if (!range) throw new Error(`${what} imports ${name}, which is not a dependency in package.json`);
    dependencies[name] = range;
  }
  return dependencies;
}

/** Copies a compiled module into the stage without its source map comment (the maps point into src/, not shipped). */
export function stageModule(from, to, mode = 0o644) {
  fs.mkdirSync(path.dirname(to), { recursive: true });
  const text = fs.readFileSync(from, 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
  fs.writeFileSync(to, text, { mode });
}

/** `npm pack` of the staged folder, written to `out` (atomically: a server may be serving the previous one). */
export function npmPack(stage, out) {
  fs.mkdirSync(path.dirname(out), { recursive: true });
  const output = execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', stage], {
    cwd: stage,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const [{ filename }] = JSON.parse(output);
  fs.copyFileSync(path.join(stage, filename), `${out}.tmp`);
  fs.renameSync(`${out}.tmp`, out);
  return fs.statSync(out).size;
}
