/** `coffer ls <id> [path]`: the entries of a backup (decrypted and checked whole first; nothing is written). */
import type { Command } from 'commander';
import { listBackup, type ListedEntry, wipe } from '../../client/index.js';
import { action, clientFor, PASSPHRASE_FILE_OPTION, type PassphraseOptions } from '../command-frame.js';
import { unlock } from '../secrets.js';
import { progressBar } from '../progress.js';
import { print, printJson } from '../output.js';

const TYPE_LETTER: Record<ListedEntry['type'], string> = { file: '-', directory: 'd', symlink: 'l', hardlink: 'h', other: '?' };

/** `-rw-r--r--` from a type and mode bits (setuid/setgid/sticky shown as s/S and t/T, like ls). */
export function modeString(entry: Pick<ListedEntry, 'type' | 'mode'>): string {
  const { mode } = entry;
  const triple = (shift: number, special: number, letter: string) => {
    const bits = (mode >> shift) & 7;
    const x = bits & 1;
    const on = (mode & special) !== 0;
    return `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${on ? (x ? letter : letter.toUpperCase()) : x ? 'x' : '-'}`;
  };
  return TYPE_LETTER[entry.type] + triple(6, 0o4000, 's') + triple(3, 0o2000, 's') + triple(0, 0o1000, 't');
}

const ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

/**
 * A name as one safe piece of a human listing: `\` doubled, newline, CR and tab as `\n`, `\r`, `\t`, every other
 * control character (C0, DEL, C1) and the Unicode line/paragraph separators and bidirectional controls as `\xNN` /
 * `\uNNNN`, so a name can neither fake listing lines nor reorder what the terminal shows. --json stays exact.
 */
export function escapeName(name: string): string {
  // eslint-disable-next-line no-control-regex
  return name.replace(/[\\\u0000-\u001f\u007f-\u009f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, (ch) => {
    const known = ESCAPES[ch];
    if (known) return known;
    const code = ch.codePointAt(0)!;
    return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}

function lines(entries: ListedEntry[]): string[] {
  const width = Math.max(1, ...entries.map((e) => String(e.size).length));
  return entries.map((e) => {
    const when = e.mtime ? e.mtime.slice(0, 16).replace('T', ' ') : '-'.padEnd(16);
    const name = e.type === 'directory' ? `${escapeName(e.path)}/` : escapeName(e.path);
    const target = escapeName(e.linkTarget ?? '');
    const link = e.type === 'symlink' ? ` -> ${target}` : e.type === 'hardlink' ? ` link to ${target}` : '';
    return `${modeString(e)}  ${String(e.size).padStart(width)}  ${when}  ${name}${link}`;
  });
}

export function registerLs(program: Command): void {
  program
    .command('ls <id> [path]')
    .description(
      'list the files of a backup (path, size, mode, mtime), or those at and below [path]; the ' +
        'backup is downloaded and checked whole, nothing is written',
    )
    .option(...PASSPHRASE_FILE_OPTION)
    .option('--json', 'print {"backupId", "entries": [{"path", "type", "size", "mode", "mtime", "linkTarget"?}]} (mode as a number)')
    .action(
      action(async ({ signal, config }, id: string, at: string | undefined, options: PassphraseOptions) => {
        const client = clientFor(config);
        const { masterKey } = await unlock(client, config, options, signal);
        const bar = progressBar('downloading + checking', !!options.json);
        try {
          const { entries } = await listBackup({
            client,
            masterKey,
            backupId: id,
            path: at,
            signal,
            onEvent: (event) => {
              if (event.type === 'progress') bar.update(event.received, event.total);
            },
          });
          bar.stop();
          if (options.json) return printJson({ backupId: id, entries });
          if (entries.length === 0)
            return print(at ? `nothing at ${escapeName(at)} in backup ${escapeName(id)}` : `backup ${escapeName(id)} holds no entries`);
          print(lines(entries).join('\n'));
        } finally {
          bar.stop();
          wipe(masterKey);
        }
      }),
    );
}
