/**
 * The SQLite driver choice (src/store/sqlite-driver.ts, docs/runtime.md): every driver this Node has answers the
 * same way behind the adapter, and one that is missing or known broken is refused with one line.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { SQLITE_DRIVERS, openSqliteDatabase, sqliteDrivers } from '../../src/store/sqlite-driver.js';
import { lacking } from '../helpers/required.js';
import { tempDir } from '../helpers/tmp.js';

const drivers = await sqliteDrivers();
const lacks = (driver: string) => lacking(drivers.available.includes(driver as never), `sqlite:${driver}`);

describe('SQLite drivers', () => {
  it('this Node has at least one, and says why of any other', () => {
    expect(drivers.available.length).toBeGreaterThan(0);
    expect([...drivers.available, ...drivers.unavailable.keys()].sort()).toEqual([...SQLITE_DRIVERS].sort());
  });

  for (const driver of SQLITE_DRIVERS) {
    it.skipIf(lacks(driver))(`${driver}: plain rows, Buffers, numbers; read-only is read-only`, async () => {
      const file = path.join(tempDir('coffer-driver-'), 'x.sqlite');
      const db = await openSqliteDatabase(file, { driver });
      expect(db.driver).toBe(driver);
      db.exec('create table t (id integer primary key, n bigint, s text, b blob)');
      const insert = db.prepare('insert into t (n, s, b) values (?, ?, ?) returning id');
      expect(insert.reader).toBe(true);
      expect(insert.all([4_398_046_511_104, 'é', Buffer.from([1, 2, 3])])).toEqual([{ id: 1 }]);
      const plain = db.prepare('insert into t (n, s, b) values (?, ?, ?)');
      expect(plain.reader).toBe(false);
      expect(plain.run([Number.MAX_SAFE_INTEGER, null, null])).toMatchObject({ changes: 1 });
      const rows = db.prepare('select n, s, b from t order by id').all([]) as Record<string, unknown>[];
      expect(rows.map((row) => Object.getPrototypeOf(row))).toEqual([Object.prototype, Object.prototype]);
      expect(rows[0]!.b).toBeInstanceOf(Buffer);
      expect(rows).toEqual([
        { n: 4_398_046_511_104, s: 'é', b: Buffer.from([1, 2, 3]) },
        { n: Number.MAX_SAFE_INTEGER, s: null, b: null },
      ]);
      expect(db.prepare('select typeof(n) as type from t where id = ?').get([1])).toEqual({ type: 'integer' });
      expect(db.prepare('select 1 where 0').get([])).toBeUndefined();
      expect([...db.prepare('select id from t order by id').iterate([])]).toEqual([{ id: 1 }, { id: 2 }]);
      db.close();

      const readonly = await openSqliteDatabase(file, { readonly: true, driver });
      expect(() => readonly.exec('delete from t')).toThrow(/readonly/);
      readonly.close();
      await expect(openSqliteDatabase(path.join(path.dirname(file), 'missing.sqlite'), { readonly: true, driver })).rejects.toThrow();
    });
  }

  // Skipped only where both drivers are here (Node 22 with a better-sqlite3 built for it).
  it.skipIf(drivers.unavailable.size === 0)('a driver this Node lacks is refused with one line, by the store and the CLI', async () => {
    const missing = [...drivers.unavailable.keys()][0]!;
    const dataDir = tempDir('coffer-driver-');
    await expect(openSqliteDatabase(path.join(dataDir, 'x.sqlite'), { driver: missing })).rejects.toThrow(
      `COFFER_SQLITE_DRIVER=${missing}: `,
    );
    const result = spawnSync(process.execPath, ['dist/cli/main.js', 'admin', 'accounts', 'list'], {
      env: { ...process.env, COFFER_DATA_DIR: dataDir, COFFER_SQLITE_DRIVER: missing },
      encoding: 'utf8',
    });
    expect([result.status, result.stdout]).toEqual([1, '']);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain(`COFFER_SQLITE_DRIVER=${missing}: ${drivers.unavailable.get(missing)}`);
  });

  it('the CLI prints nothing extra on stderr while using the default driver (no ExperimentalWarning on Node 22)', () => {
    const result = spawnSync(process.execPath, ['dist/cli/main.js', 'admin', 'accounts', 'list'], {
      env: { ...process.env, COFFER_DATA_DIR: tempDir('coffer-driver-'), COFFER_SQLITE_DRIVER: '' },
      encoding: 'utf8',
    });
    expect([result.status, result.stderr, result.stdout]).toEqual([0, '', 'no accounts\n']);
  });
});
