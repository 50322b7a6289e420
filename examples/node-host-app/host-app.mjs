#!/usr/bin/env node
/* global process, console, setInterval, clearInterval, AbortSignal */
/**
 * A host application's backups through coffer-sdk: its data directory backed up on a schedule (or once), and
 * restored into a new directory.
 *
 *   node host-app.mjs backup <data-dir> [--once] [--every <minutes>]
 *   node host-app.mjs restore <target-dir> [--backup <id>]
 *
 * Environment: COFFER_URL, COFFER_API_KEY, COFFER_PASSPHRASE (the vault's passphrase; `coffer init` set it).
 */
import { parseArgs } from 'node:util';
import { CadenceError, connect } from 'coffer-sdk';

/** The application's name and version, recorded with every backup (the server lists it as `hostappVersion`). */
const HOSTAPP_VERSION = 'example-host-app/1.0.0';

function requiredEnv(name) {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name} (see README.md)`);
  return value;
}

async function unlockVault() {
  const coffer = connect({ url: requiredEnv('COFFER_URL'), apiKey: requiredEnv('COFFER_API_KEY') });
  const vault = await coffer.unlock({ passphrase: requiredEnv('COFFER_PASSPHRASE') });
  return { coffer, vault };
}

/** One backup of `dataDir`; a backup the plan's cadence refuses is reported and skipped, not fatal. */
async function backupOnce(vault, dataDir) {
  try {
    const backup = await vault.backup(dataDir, {
      hostappVersion: HOSTAPP_VERSION,
      metadata: { dataDir },
      signal: AbortSignal.timeout(10 * 60_000),
    });
    console.log(JSON.stringify({ backedUp: backup.id, status: backup.detail.status, bytes: backup.metadata.plaintextSizeBytes }));
  } catch (error) {
    if (!(error instanceof CadenceError)) throw error;
    console.error(`backup skipped: the plan allows the next one at ${error.nextAllowedAt?.toISOString() ?? 'a later time'}`);
  }
}

async function backup(args) {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { once: { type: 'boolean', default: false }, every: { type: 'string', default: '60' } },
  });
  const [dataDir] = positionals;
  if (!dataDir) throw new Error('usage: host-app.mjs backup <data-dir> [--once] [--every <minutes>]');
  const { vault } = await unlockVault();
  await backupOnce(vault, dataDir);
  if (values.once) return vault.close();

  const minutes = Number(values.every);
  if (!(minutes > 0)) throw new Error(`--every takes minutes, got ${values.every}`);
  console.error(`backing up ${dataDir} every ${minutes} min; Ctrl-C stops`);
  let running = Promise.resolve();
  const timer = setInterval(() => {
    running = running.then(() => backupOnce(vault, dataDir)).catch((error) => console.error(`backup failed: ${error.message}`));
  }, minutes * 60_000);
  process.once('SIGINT', async () => {
    clearInterval(timer);
    await running;
    vault.close();
  });
}

/** The newest READY backup this application made. */
async function latestBackupId(coffer) {
  const ours = (await coffer.list())
    .filter((record) => record.status === 'READY' && record.hostappVersion?.startsWith('example-host-app/'))
    .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  if (ours.length === 0) throw new Error('no backup of this application yet');
  return ours[0].id;
}

async function restore(args) {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { backup: { type: 'string' } } });
  const [target] = positionals;
  if (!target) throw new Error('usage: host-app.mjs restore <target-dir> [--backup <id>]');
  const { coffer, vault } = await unlockVault();
  try {
    const id = values.backup ?? (await latestBackupId(coffer));
    const restored = await vault.restoreTo(id, target);
    console.log(JSON.stringify({ restored: id, target, entries: restored.entries }));
  } finally {
    vault.close();
  }
}

const [command, ...rest] = process.argv.slice(2);
const commands = { backup, restore };
if (!commands[command]) {
  console.error('usage: host-app.mjs backup <data-dir> [--once] [--every <minutes>] | restore <target-dir> [--backup <id>]');
  process.exit(2);
}
try {
  await commands[command](rest);
} catch (error) {
  console.error(`${command} failed: ${error.message}`);
  process.exitCode = 1;
}
