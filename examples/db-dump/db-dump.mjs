#!/usr/bin/env node
/* global process, console, AbortSignal, ReadableStream */
/**
 * A database dump streamed into a Coffer backup: the dump command's stdout is read as the SDK uploads, compressed
 * and encrypted on the way, with no temp file; a dump that fails (a non-zero exit) fails the backup, and the SDK
 * then deletes what it had started on the server.
 *
 *   node db-dump.mjs backup <name> -- <dump command and its arguments>
 *   node db-dump.mjs restore <file> [--backup <id>]
 *
 * Environment: COFFER_URL, COFFER_API_KEY, COFFER_PASSPHRASE.
 */
import { spawn } from 'node:child_process';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { connect } from 'coffer-sdk';

const HOSTAPP_VERSION = 'example-db-dump/1.0.0';

function requiredEnv(name) {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see README.md)`);
  return value;
}

async function unlockVault() {
  const coffer = connect({ url: requiredEnv('COFFER_URL'), apiKey: requiredEnv('COFFER_API_KEY') });
  return { coffer, vault: await coffer.unlock({ passphrase: requiredEnv('COFFER_PASSPHRASE') }) };
}

/**
 * The stdout of `command` as a web stream. The command starts when the SDK first reads (after the server opened
 * the backup), and the stream ends only once it exited 0: any other exit is an error, and fails the backup.
 */
function commandOutput(command, args) {
  let child;
  let reader;
  let exited;
  const start = () => {
    child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    exited = new Promise((resolve, reject) => {
      child.once('error', reject);
      child.once('close', (code, signal) => (code === 0 ? resolve() : reject(new Error(`${command} exited with ${code ?? signal}`))));
    });
    // Awaited once stdout ends; until then a failure must not count as an unhandled rejection (which ends Node).
    exited.catch(() => undefined);
    reader = Readable.toWeb(child.stdout).getReader();
  };
  return new ReadableStream({
    async pull(controller) {
      if (!child) start();
      const { done, value } = await reader.read();
      if (!done) return controller.enqueue(value);
      await exited;
      controller.close();
    },
    cancel(reason) {
      child?.kill();
      return reader?.cancel(reason);
    },
  });
}

async function backup(args) {
  const separator = args.indexOf('--');
  const [name] = args.slice(0, separator);
  const [command, ...commandArgs] = separator === -1 ? [] : args.slice(separator + 1);
  if (!name || !command) throw new Error('usage: db-dump.mjs backup <name> -- <dump command> [args...]');
  const { vault } = await unlockVault();
  try {
    const made = await vault.backup(commandOutput(command, commandArgs), {
      name,
      hostappVersion: HOSTAPP_VERSION,
      metadata: { dumpedBy: command },
      signal: AbortSignal.timeout(60 * 60_000),
    });
    console.log(JSON.stringify({ backedUp: made.id, status: made.detail.status, bytes: made.metadata.plaintextSizeBytes }));
  } finally {
    vault.close();
  }
}

/** The newest READY dump this script made. */
async function latestBackupId(coffer) {
  const ours = (await coffer.list())
    .filter((record) => record.status === 'READY' && record.hostappVersion?.startsWith('example-db-dump/'))
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  if (ours.length === 0) throw new Error('no dump backed up by this script yet');
  return ours[0].id;
}

async function restore(args) {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { backup: { type: 'string' } } });
  const [file] = positionals;
  if (!file) throw new Error('usage: db-dump.mjs restore <file> [--backup <id>]');
  const { coffer, vault } = await unlockVault();
  try {
    const id = values.backup ?? (await latestBackupId(coffer));
    // Written beside `file` and renamed onto it only once the whole backup is verified: never a partial dump.
    const { bytes } = await vault.restoreFile(id, file);
    console.log(JSON.stringify({ restored: id, file, bytes }));
  } finally {
    vault.close();
  }
}

const [command, ...rest] = process.argv.slice(2);
const commands = { backup, restore };
if (!commands[command]) {
  console.error('usage: db-dump.mjs backup <name> -- <dump command> [args...] | restore <file> [--backup <id>]');
  process.exit(2);
}
try {
  await commands[command](rest);
} catch (error) {
  console.error(`${command} failed: ${error.message}`);
  process.exitCode = 1;
}
