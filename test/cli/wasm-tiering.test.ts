/**
 * The V8 setting of the client commands (src/cli/wasm-tiering.ts: WebAssembly stays on the baseline tier). V8 prints
 * "unrecognized flag" on stderr for a flag it does not know, so the setting is made only on the V8 versions it was
 * measured on: a client command still writes nothing but its own output, on this Node and on each of
 * COFFER_TEST_NODES (.ci/run: Node 22 and 24), and a V8 outside that range is left alone.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/** This Node and the other executables of COFFER_TEST_NODES (':'-separated). */
function nodes(): { node: string; version: string }[] {
  const found = new Map<string, string>([[process.version, process.execPath]]);
  for (const node of (process.env.COFFER_TEST_NODES ?? '').split(':').filter(Boolean)) {
    const version = spawnSync(node, ['--version'], { encoding: 'utf8' }).stdout?.trim();
    if (version && !found.has(version)) found.set(version, node);
  }
  return [...found].map(([version, node]) => ({ node, version }));
}

describe('the WebAssembly tiering setting of the client commands', () => {
  let home: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(() => {
    home = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-wasm-tiering-'));
    env = { ...process.env, HOME: home, XDG_CONFIG_HOME: home, XDG_STATE_HOME: home, XDG_CACHE_HOME: home, NO_COLOR: '1' };
  });
  afterAll(() => fs.rmSync(home, { recursive: true, force: true }));

  for (const { node, version } of nodes()) {
    it(`a client command on Node ${version} writes nothing but its own output`, () => {
      const result = spawnSync(node, ['dist/cli/main.js', 'backup', '--help'], { encoding: 'utf8', env });
      expect(result.stderr).toBe('');
      expect([result.status, result.stdout.includes('Usage: coffer backup')]).toEqual([0, true]);
    });
  }

  it('is left alone on a V8 it was not measured on', () => {
    // The module run on its own, with V8 pretending to be version 99: no flag is set, so nothing is printed.
    const pretend = `data:text/javascript,Object.defineProperty(process.versions,"v8",{value:"99.0.0"})`;
    const bogus = `data:text/javascript,import v8 from "node:v8"; v8.setFlagsFromString("--wasm-tiering-budget-that-is-not");`;
    const moduleUrl = new URL('../../dist/cli/wasm-tiering.js', import.meta.url).href;
    const alone = spawnSync(
      process.execPath,
      ['--import', pretend, '--input-type=module', '-e', `await import(${JSON.stringify(moduleUrl)})`],
      {
        encoding: 'utf8',
        env,
      },
    );
    expect([alone.status, alone.stderr]).toEqual([0, '']);
    // What it avoids: a flag V8 does not know is reported on stderr.
    const unknown = spawnSync(process.execPath, ['--import', bogus, '-e', '0'], { encoding: 'utf8', env });
    expect(unknown.stderr).toMatch(/unrecognized flag/);
  });
});
