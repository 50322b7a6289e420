/**
 * The filesystem store is opened by more than one process on the same data directory: the server, every
 * `coffer admin` command that needs blobs, and the nodes of a scale-out on a shared directory. Opening a store must
 * not disturb an upload that another one is writing; temp files a crash left behind go with the sweeper's
 * removeIncomplete (after the orphan grace), never on open.
 */
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { expect, it } from 'vitest';
import { FsBlobStore } from '../../src/blobs/fs.js';
import { tempDir } from '../helpers/tmp.js';

it('opening a second store on the same directory leaves an upload in flight intact', async () => {
  const root = tempDir('coffer-blobs-shared-');
  const server = new FsBlobStore(root);
  const body = new PassThrough();
  const first = Buffer.alloc(64 * 1024, 1);
  const rest = Buffer.alloc(64 * 1024, 2);
  const put = server.put('backups/a/b/blob.bin', body);
  body.write(first);
  await expect.poll(() => fs.readdirSync(path.join(root, 'tmp')).length).toBe(1);

  new FsBlobStore(root); // what `coffer admin backups undelete` does while the server runs

  expect(fs.readdirSync(path.join(root, 'tmp'))).toHaveLength(1);
  body.end(rest);
  await expect(put).resolves.toEqual({ size: first.length + rest.length });
  expect(await buffer(await server.get('backups/a/b/blob.bin'))).toEqual(Buffer.concat([first, rest]));
});

it('a temp file a crash left behind is removed by removeIncomplete, not by opening the store', async () => {
  const root = tempDir('coffer-blobs-crash-');
  new FsBlobStore(root);
  const leftover = path.join(root, 'tmp', 'left-by-a-crash');
  fs.writeFileSync(leftover, 'partial');
  const store = new FsBlobStore(root);
  expect(fs.existsSync(leftover)).toBe(true);
  expect(await store.removeIncomplete(Date.now() + 60_000)).toBe(1);
  expect(fs.existsSync(leftover)).toBe(false);
});
