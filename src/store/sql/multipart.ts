/**
 * MultipartStore on SQL: the blob host's multipart uploads and their parts' sizes. The statements of the presigned
 * upload's cycle are compiled once (SqlContext.cached; bench P8).
 */
import { sql } from 'kysely';
import type { MultipartStore } from '../ports/multipart.js';
import { precompiled, type SqlContext } from './context.js';

export class SqlMultipartStore implements MultipartStore {
  constructor(private readonly ctx: SqlContext) {}

  async addMultipartUpload(backupId: string, uploadId: string, now: number, firstPartSize?: number): Promise<number> {
    const upload = { upload_id: uploadId, backup_id: backupId, created_at: now };
    if (firstPartSize === undefined) {
      await this.ctx.cached(this.ctx.db, 'writes', 'addMultipartUpload', Object.values(upload), (db) =>
        db.insertInto('blobhost_uploads').values(upload),
      );
    } else if (this.ctx.kind === 'postgres') {
      // The upload and its part 1 in one statement (one round trip, one commit).
      await this.ctx.cached(this.ctx.db, 'writes', 'addMultipartUpload/part1', [uploadId, backupId, now, firstPartSize], (db) =>
        precompiled(
          db,
          sql`with upload as (insert into blobhost_uploads (upload_id, backup_id, created_at) values (${uploadId}, ${backupId}, ${now}) returning upload_id, backup_id) insert into blobhost_parts (upload_id, part_number, backup_id, size) select upload_id, 1, backup_id, ${firstPartSize} from upload`,
        ),
      );
    } else {
      const part = { upload_id: uploadId, part_number: 1, backup_id: backupId, size: firstPartSize };
      await this.ctx.transaction(async (trx) => {
        await this.ctx.cached(trx, 'writes', 'addMultipartUpload', Object.values(upload), (db) =>
          db.insertInto('blobhost_uploads').values(upload),
        );
        await this.ctx.cached(trx, 'writes', 'addMultipartUpload/part', Object.values(part), (db) =>
          db.insertInto('blobhost_parts').values(part),
        );
      });
    }
    // Counted after the insert's commit (not in the same statement): of two uploads added at once on two nodes, at
    // least the later one sees both.
    return this.countMultipartUploads(backupId);
  }

  async countMultipartUploads(backupId: string): Promise<number> {
    const [row] = await this.ctx.read('countMultipartUploads', [backupId], (db) =>
      db
        .selectFrom('blobhost_uploads')
        .select((eb) => eb.fn.countAll().as('n'))
        .where('backup_id', '=', backupId),
    );
    return Number(row!.n);
  }

  async putPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<number> {
    await this.setPartSize(backupId, uploadId, partNumber, size);
    return this.slotBytes(backupId);
  }

  async setPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<void> {
    await this.ctx.cached(this.ctx.db, 'writes', 'setPartSize', [uploadId, partNumber, backupId, size, size, backupId], (db) =>
      db
        .insertInto('blobhost_parts')
        .values({ upload_id: uploadId, part_number: partNumber, backup_id: backupId, size })
        .onConflict((oc) => oc.columns(['upload_id', 'part_number']).doUpdateSet({ size, backup_id: backupId })),
    );
  }

  async slotBytes(backupId: string, except?: { uploadId: string; partNumber: number }): Promise<number> {
    let query = this.ctx.db
      .selectFrom('blobhost_parts')
      .select((eb) => eb.fn.sum<number | string | null>('size').as('total'))
      .where('backup_id', '=', backupId);
    if (except) {
      query = query.where((eb) => eb.or([eb('upload_id', '!=', except.uploadId), eb('part_number', '!=', except.partNumber)]));
    }
    const row = await query.executeTakeFirstOrThrow();
    return Number(row.total ?? 0);
  }

  async uploadBytes(uploadId: string, exceptPart?: number): Promise<number | undefined> {
    // One statement: no row when the upload is not open; else the sum of its parts (0 without any).
    const parameters = exceptPart === undefined ? [uploadId] : [exceptPart, uploadId];
    const [row] = await this.ctx.read(`uploadBytes${exceptPart === undefined ? '' : '/except'}`, parameters, (db) =>
      db
        .selectFrom('blobhost_uploads as u')
        .select((eb) => {
          let parts = eb
            .selectFrom('blobhost_parts as p')
            .select(sql<number | string | null>`sum(p.size)`.as('s'))
            .whereRef('p.upload_id', '=', 'u.upload_id');
          if (exceptPart !== undefined) parts = parts.where('p.part_number', '!=', exceptPart);
          return parts.as('total');
        })
        .where('u.upload_id', '=', uploadId),
    );
    return row === undefined ? undefined : Number(row.total ?? 0);
  }

  async removeMultipartUpload(uploadId: string): Promise<void> {
    if (this.ctx.kind === 'postgres') await this.ctx.deleteOpenUpload(this.ctx.db, uploadId);
    else await this.ctx.transaction((trx) => this.ctx.deleteOpenUpload(trx, uploadId));
  }

  async pruneMultipartUploads(): Promise<number> {
    return this.ctx.transaction(async (trx) => {
      const pending = trx.selectFrom('backups').select('id').where('status', '=', 'PENDING_UPLOAD');
      await trx.deleteFrom('blobhost_parts').where('backup_id', 'not in', pending).execute();
      const result = await trx.deleteFrom('blobhost_uploads').where('backup_id', 'not in', pending).executeTakeFirst();
      return Number(result.numDeletedRows);
    });
  }
}
