/**
 * Every environment variable src/config.ts reads is documented by the real `coffer` executable: the server's in
 * `coffer serve --help`, the client commands' in `coffer --help`, each with its default and meaning. The names are
 * found in config.ts's own text (table keys, `env.X`, `env['X']`, and any all-caps string literal, as a reader
 * call would name one), so a variable read outside the settings tables cannot go unnoticed. README.md's
 * Configuration section names every server setting too.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CLIENT_SETTINGS, loadClientConfig, loadConfig, SERVER_SETTINGS, type Setting } from '../../src/config.js';

const BIN = path.resolve('dist/cli/main.js');

function help(args: string[]): string {
  const result = spawnSync(process.execPath, [BIN, ...args, '--help'], { encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
  return result.stdout;
}

/** The settings rows of a --help text: variable → [default, meaning]. */
function rows(text: string): Map<string, [string, string]> {
  const found = new Map<string, [string, string]>();
  for (const match of text.matchAll(/^ {2}([A-Z][A-Z0-9_]+) +(\S+) +(.+)$/gm)) {
    if (match[1] !== 'VARIABLE') found.set(match[1]!, [match[2]!, match[3]!]);
  }
  return found;
}

/** The environment src/config.ts reads besides the settings: the OS user (archived as a file owner), not a setting to show. */
const OS_VARIABLES = ['USER'];

/** Every variable name src/config.ts mentions in a way that reads, or could read, the environment. */
function namesReadByConfigTs(): Set<string> {
  // src/config.ts and the files it is made of (the settings tables, the readers).
  const source = ['src/config.ts', 'src/config-settings.ts', 'src/config-readers.ts']
    .map((file) => fs.readFileSync(file, 'utf8'))
    .join('\n');
  const patterns = [
    /^ {2}([A-Z][A-Z0-9_]+): \{/gm, // a settings-table row
    /\benv\.([A-Z][A-Z0-9_]*)/g, // env.X, process.env.X
    /\benv\[\s*['"`]([A-Z][A-Z0-9_]*)['"`]\s*\]/g, // env['X']
    /['"`]([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+|PORT|HOST)['"`]/g, // read(env, 'X'), a name passed as a string
  ];
  return new Set(patterns.flatMap((pattern) => [...source.matchAll(pattern)].map((m) => m[1]!)));
}

function expectDocumented(text: string, table: Readonly<Record<string, Setting>>) {
  const shown = rows(text);
  expect([...shown.keys()]).toEqual(Object.keys(table));
  for (const setting of Object.values(table)) {
    const [value, about] = shown.get(setting.name)!;
    expect(value, setting.name).toBe(setting.default ?? '(unset)');
    expect(about, setting.name).toContain(setting.about);
    expect(setting.about.length, setting.name).toBeGreaterThan(8);
  }
}

describe('settings in --help', () => {
  it('coffer serve --help lists every server setting with its default and meaning', () => {
    expectDocumented(help(['serve']), SERVER_SETTINGS);
  });

  it('coffer --help lists every client setting with its default and meaning', () => {
    expectDocumented(help([]), CLIENT_SETTINGS);
  });

  it('every variable src/config.ts reads is in one of the two', () => {
    const names = namesReadByConfigTs();
    const shown = new Set([...rows(help(['serve'])).keys(), ...rows(help([])).keys()]);
    expect(names.size).toBeGreaterThanOrEqual(Object.keys(SERVER_SETTINGS).length);
    expect([...names].filter((name) => !shown.has(name) && !OS_VARIABLES.includes(name))).toEqual([]);
  });

  it('the defaults shown are the defaults used: setting each to its shown default changes nothing', () => {
    const asSet = (table: Readonly<Record<string, Setting>>) =>
      Object.fromEntries(Object.values(table).flatMap((s) => (s.default === null ? [] : [[s.name, s.default]])));
    expect(loadConfig(asSet(SERVER_SETTINGS), '/srv')).toEqual(loadConfig({}, '/srv'));
    expect(loadClientConfig(asSet(CLIENT_SETTINGS))).toEqual(loadClientConfig({}));
  });

  it("README's Configuration names every server setting (a `PREFIX_*` names those it starts)", () => {
    const readme = fs.readFileSync('README.md', 'utf8');
    const section = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
    const named = new Set([...section.matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1]!));
    const prefixes = [...section.matchAll(/`([A-Z][A-Z0-9_]*_)\*`/g)].map((match) => match[1]!);
    const missing = Object.keys(SERVER_SETTINGS).filter((name) => !named.has(name) && !prefixes.some((prefix) => name.startsWith(prefix)));
    expect(missing).toEqual([]);
  });
});
