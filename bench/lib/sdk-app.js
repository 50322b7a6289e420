/* global process, console */
/**
 * The application side of bench/sdk.js: one process that does what an application embedding coffer-sdk does, through
 * the SDK's Node entry as built (dist/client/index.js, the files the served package holds), so its wall time
 * compares with a `coffer` CLI command's (process start to exit).
 *
 *   node bench/lib/sdk-app.js backup <dir>            COFFER_URL, COFFER_API_KEY, COFFER_RECIPIENT: prints the backup
 *   node bench/lib/sdk-app.js restore <id> <target>   COFFER_URL, COFFER_API_KEY, COFFER_PASSPHRASE
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { DIST } from './common.js';

const { connect } = await import(pathToFileURL(path.join(DIST, 'client', 'index.js')).href);
const env = (name) => process.env[name] ?? '';
const coffer = connect({ url: env('COFFER_URL'), apiKey: env('COFFER_API_KEY') });
const [command, ...args] = process.argv.slice(2);

if (command === 'backup') {
  // As P6's backup host: sealed to the recipient, no passphrase (no key derivation).
  const made = await coffer.writer(env('COFFER_RECIPIENT')).backup(args[0], { hostappVersion: 'coffer-bench/1' });
  console.log(JSON.stringify(made.detail));
} else if (command === 'restore') {
  const vault = await coffer.unlock({ passphrase: env('COFFER_PASSPHRASE') });
  await vault.restoreTo(args[0], args[1]);
  vault.close();
} else {
  console.error('usage: sdk-app.js backup <dir> | restore <id> <target>');
  process.exit(2);
}
