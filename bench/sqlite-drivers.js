/* global process, console */
/**
 * The two SQLite drivers side by side (docs/runtime.md): one prepared SELECT of 20 rows × 8 columns (the shape of
 * an account's backup list), run again and again through the same adapter the store uses
 * (dist/store/sqlite-driver.js), on every driver this Node has. Needs `npm run build` first.
 *
 *   node bench/sqlite-drivers.js [--queries 20000] [--rounds 5]
 *
 * Prints the median over the rounds of µs per query, per driver (rounds alternate between the drivers). A side benchmark, not one of the P targets.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { openSqliteDatabase, sqliteDrivers } from '../dist/store/sqlite-driver.js';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(`--${name}`);
  return at === -1 ? fallback : Number(args[at + 1]);
};
const QUERIES = option('queries', 20_000);
const ROUNDS = option('rounds', 5);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'coffer-bench-sqlite-'));
try {
  const { available, unavailable } = await sqliteDrivers();
  const file = path.join(dir, 'bench.sqlite');
  const setup = await openSqliteDatabase(file, { driver: available[0] });
  setup.exec(`create table backups (id text primary key, account_id text not null, status text not null,
    created_at bigint not null, expires_at bigint not null, ciphertext_size_bytes bigint, plaintext_size_bytes bigint,
    client_version text)`);
  setup.exec('create index backups_account on backups (account_id, created_at)');
  const insert = setup.prepare('insert into backups values (?, ?, ?, ?, ?, ?, ?, ?)');
  for (let account = 0; account < 100; account++) {
    for (let i = 0; i < 20; i++) {
      insert.run([
        `b-${account}-${i}`,
        `a-${account}`,
        'READY',
        1_700_000_000_000 + i,
        1_800_000_000_000 + i,
        52_428_800,
        60_000_000,
        '1.0.0',
      ]);
    }
  }
  setup.close();

  // Rounds alternate between the drivers, so that a busy machine slows both alike.
  const open = [];
  for (const driver of available) {
    const db = await openSqliteDatabase(file, { readonly: true, driver });
    const list = db.prepare(
      `select id, status, created_at, expires_at, ciphertext_size_bytes, plaintext_size_bytes, client_version, account_id
       from backups where account_id = ? order by created_at desc, id desc`,
    );
    open.push({ driver, db, list, perQuery: [] });
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const { driver, list, perQuery } of open) {
      let rows = 0;
      const start = process.hrtime.bigint();
      for (let q = 0; q < QUERIES; q++) rows += list.all([`a-${q % 100}`]).length;
      const ns = Number(process.hrtime.bigint() - start);
      if (rows !== QUERIES * 20) throw new Error(`${driver}: ${rows} rows, expected ${QUERIES * 20}`);
      perQuery.push(ns / QUERIES / 1000);
    }
  }
  const results = {};
  for (const { driver, db, perQuery } of open) {
    db.close();
    perQuery.sort((a, b) => a - b);
    results[driver] = Math.round(perQuery[Math.floor(ROUNDS / 2)] * 10) / 10;
  }
  console.log(
    JSON.stringify({
      node: process.versions.node,
      queries: QUERIES,
      rounds: ROUNDS,
      usPerQuery: results,
      unavailable: Object.fromEntries(unavailable),
    }),
  );
} finally {
  fs.rmSync(dir, { recursive: true, force: true });
}
