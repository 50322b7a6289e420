/**
 * `coffer --version`, `coffer version` and `coffer completion <shell>` of the real built executable. The bash script
 * is sourced in a real bash (without the bash-completion package, like macOS's) and its completion function is
 * called as bash calls it, with COMP_WORDS/COMP_CWORD set; what it offers is compared with what `--help` lists.
 */
import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/tmp.js';
import { hangGuard } from '../helpers/bounds.js';
import { lacking } from '../helpers/required.js';

const BIN = path.resolve('dist/cli/main.js');
const VERSION = (JSON.parse(fs.readFileSync('package.json', 'utf8')) as { version: string }).version;

function coffer(args: string[]) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
  return { code: result.status, stdout: result.stdout, stderr: result.stderr };
}

const installed = (shell: string) => spawnSync('sh', ['-c', `command -v ${shell}`]).status === 0;

/**
 * A directory with a `coffer` on it that runs the built CLI (the completion script calls `coffer` by name), and the
 * script `coffer completion bash` printed, made once: each completion below then starts one CLI, as in a shell.
 */
let binDir: string;
let bashScript: string;
beforeAll(() => {
  if (!fs.existsSync(BIN)) throw new Error('dist/cli/main.js is missing: run `npm run build` (npm test does it)');
  binDir = tempDir();
  fs.writeFileSync(path.join(binDir, 'coffer'), `#!/bin/sh\nexec '${process.execPath}' '${BIN}' "$@"\n`, { mode: 0o755 });
  bashScript = path.join(binDir, 'coffer.bash');
  const printed = coffer(['completion', 'bash']);
  expect(printed.code, printed.stderr).toBe(0);
  fs.writeFileSync(bashScript, printed.stdout);
});

const run = promisify(execFile);

/** What bash would offer after `coffer <words…>` (the last word is the one being completed). */
async function bashComplete(words: string[]): Promise<string[]> {
  const quoted = ['coffer', ...words].map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
  const script = [
    `source '${bashScript}' || exit 9`,
    `COMP_WORDS=(${quoted})`,
    `COMP_CWORD=${words.length}`,
    '__coffer_complete 2>/dev/null',
    `printf '%s\\n' "\${COMPREPLY[@]}"`,
  ].join('\n');
  const { stdout } = await run('bash', ['--norc', '--noprofile', '-c', script], {
    encoding: 'utf8',
    env: { ...process.env, PATH: `${binDir}${path.delimiter}${process.env.PATH}` },
  });
  return stdout.split('\n').filter(Boolean).sort();
}

type Help = { commands: string[]; options: string[] };

/** The subcommands and long options `coffer <command…> --help` lists. */
function helpOf(command: string[]): Help {
  const { stdout, code } = coffer([...command, '--help']);
  expect(code).toBe(0);
  return parseHelp(stdout);
}

async function helpOfAsync(command: string[]): Promise<Help> {
  const { stdout } = await run(process.execPath, [BIN, ...command, '--help'], { encoding: 'utf8' });
  return parseHelp(stdout);
}

function parseHelp(stdout: string): Help {
  const section = (title: string) => (stdout.split(`\n${title}:\n`)[1] ?? '').split('\n\n')[0]!.split('\n');
  return {
    commands: section('Commands')
      .map((line) => /^ {2}([a-z][a-z-]*)/.exec(line)?.[1])
      .filter((name): name is string => !!name),
    options: section('Options').flatMap((line) => /^ {2}(?:-\w, )?(--[a-z-]+)/.exec(line)?.[1] ?? []),
  };
}

describe('coffer version', () => {
  it('prints the package version for --version, -V and `version`', () => {
    for (const args of [['--version'], ['-V'], ['version']]) {
      expect(coffer(args)).toMatchObject({ code: 0, stdout: `${VERSION}\n` });
    }
  });
});

describe('coffer completion', () => {
  it('refuses an unknown shell with a usage error', () => {
    const result = coffer(['completion', 'tcsh']);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toMatch(/zsh, bash, fish, powershell/);
  });

  it('bash: completes every command `coffer --help` lists, and a prefix to its command', async () => {
    const commands = helpOf([]).commands;
    expect(commands).toEqual(expect.arrayContaining(['serve', 'admin', 'backup', 'restore', 'version', 'completion']));
    expect(await bashComplete([''])).toEqual([...commands].sort());
    expect(await bashComplete(['res'])).toEqual(['reset', 'restore']);
  });

  // Two CLI processes per command (over 50 with the agent's commands), all at once: a hang guard.
  it('bash: completes the options of every command, as its --help lists them', { timeout: hangGuard(60_000) }, async () => {
    const commands = helpOf([]).commands.filter((name) => name !== 'help');
    // Every command at once: each --help and each completion is its own process.
    const [helps, offered] = await Promise.all([
      Promise.all(commands.map((command) => helpOfAsync([command]))),
      Promise.all(commands.map((command) => bashComplete([command, '--']))),
    ]);
    commands.forEach((command, i) => {
      expect(helps[i]!.options.length, command).toBeGreaterThan(0);
      expect(offered[i], command).toEqual(expect.arrayContaining(helps[i]!.options));
    });
  });

  it('bash: completes nested admin commands and argument choices', async () => {
    expect(await bashComplete(['admin', ''])).toEqual([...helpOf(['admin']).commands].sort());
    expect(await bashComplete(['admin', 'keys', ''])).toEqual([...helpOf(['admin', 'keys']).commands].sort());
    expect(await bashComplete(['completion', ''])).toEqual(['bash', 'fish', 'powershell', 'zsh']);
    expect(await bashComplete(['backup', '--j'])).toEqual(['--json']);
  });

  it.skipIf(lacking(installed('zsh'), 'zsh'))('zsh: the script parses (zsh -n)', () => {
    const file = path.join(tempDir(), '_coffer');
    fs.writeFileSync(file, coffer(['completion', 'zsh']).stdout);
    const result = spawnSync('zsh', ['-n', file], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
  });

  it.skipIf(lacking(installed('fish'), 'fish'))('fish: the script parses (fish -n)', () => {
    const file = path.join(tempDir(), 'coffer.fish');
    fs.writeFileSync(file, coffer(['completion', 'fish']).stdout);
    const result = spawnSync('fish', ['-n', file], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
  });

  it('every script names the program and its hidden suggestion command', () => {
    for (const shell of ['bash', 'zsh', 'fish', 'powershell']) {
      const { code, stdout } = coffer(['completion', shell]);
      expect(code, shell).toBe(0);
      expect(stdout, shell).toMatch(/coffer complete '?--'?/);
    }
  });
});
