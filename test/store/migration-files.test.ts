/**
 * The migrations, one file each in src/store/migrations/: every file is applied, under the name its database records
 * (the file's name with underscores), in the order of the names; the names of released migrations never change.
 */
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIGRATIONS } from '../../src/store/migrations.js';

const DIR = path.resolve(import.meta.dirname, '../../src/store/migrations');

describe('the migration files', () => {
  it('each is applied, under the name of its file', () => {
    const files = fs.readdirSync(DIR).filter((file) => file.endsWith('.ts'));
    expect(files.map((file) => file.replace(/\.ts$/, '').replaceAll('-', '_'))).toEqual(Object.keys(MIGRATIONS));
  });

  it('keep the names databases already record, in order', () => {
    const names = Object.keys(MIGRATIONS);
    expect(names.slice(0, 15)).toEqual([
      '0001_initial',
      '0002_settings_and_blob_keys',
      '0003_console_sessions',
      '0004_append_only_keys_and_audit',
      '0005_deletion_grace_and_vault_history',
      '0006_change_notifications',
      '0007_blobhost_multipart',
      '0008_session_freshness',
      '0009_key_labels',
      '0010_host_accounts',
      '0011_quotas',
      '0012_signin_attempts',
      '0013_operator_sessions',
      '0014_account_operator_labels',
      '0015_fleet_plans',
    ]);
    expect([...names].sort()).toEqual(names);
  });
});
