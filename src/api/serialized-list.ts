/**
 * The list body of GET /api/backups and of a host account's backups, serialized once per unchanged list. Route-specific,
 * so not in src/contract: it leans on the metadata cache handing out frozen arrays (src/store/cached-store.ts) and
 * on the route's own response serializer.
 */
import type { BackupListBody } from '../contract/schemas.js';
import { recordBody } from '../contract/views.js';
import type { Backup } from '../domain/entities.js';

/** Serialized list bodies by the record array they were made from; only frozen arrays, which cannot change. */
const listBodies = new WeakMap<readonly Backup[], string>();

/**
 * The list body, serialized by `serialize` (the route's response serializer). The metadata cache hands out the same
 * frozen array until the account changes, so an unchanged list is converted and serialized once, not on every poll
 * (bench P3).
 */
export function serializedList(records: readonly Backup[], serialize: (body: BackupListBody) => string): string {
  let body = listBodies.get(records);
  if (body === undefined) {
    body = serialize({ backups: records.map(recordBody) });
    if (Object.isFrozen(records) && records.every((record) => Object.isFrozen(record))) listBodies.set(records, body);
  }
  return body;
}
