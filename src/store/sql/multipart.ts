/** MultipartStore on SQL: the blob host's multipart uploads and their parts' sizes. */
import type { MultipartStore } from '../ports/multipart.js';
import type { SqlContext } from './context.js';

export class SqlMultipartStore implements MultipartStore {
  constructor(private readonly ctx: SqlContext) {}

  async addMultipartUpload(backupId: string, uploadId: string, now: number): Promise<number> {
    await this.ctx.db.insertInto('blobhost_uploads').values({ upload_id: uploadId, backup_id: backupId, created_at: now }).execute();
    return this.countMultipartUploads(backupId);
  }

  async countMultipartUploads(backupId: string): Promise<number> {
    const row = await this.ctx.db
      .selectFrom('blobhost_uploads')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('backup_id', '=', backupId)
      .executeTakeFirstOrThrow();
    return Number(row.n);
  }

  async putPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<number> {
    await this.ctx.db
      .insertInto('blobhost_parts')
      .values({ upload_id: uploadId, part_number: partNumber, backup_id: backupId, size })
      .onConflict((oc) => oc.columns(['upload_id', 'part_number']).doUpdateSet({ size, backup_id: backupId }))
      .execute();
    return this.slotBytes(backupId);
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
    const open = await this.ctx.db.selectFrom('blobhost_uploads').select('upload_id').where('upload_id', '=', uploadId).executeTakeFirst();
    if (!open) return undefined;
    let query = this.ctx.db
      .selectFrom('blobhost_parts')
      .select((eb) => eb.fn.sum<number | string | null>('size').as('total'))
      .where('upload_id', '=', uploadId);
    if (exceptPart !== undefined) query = query.where('part_number', '!=', exceptPart);
    const row = await query.executeTakeFirstOrThrow();
    return Number(row.total ?? 0);
  }

  async removeMultipartUpload(uploadId: string): Promise<void> {
    await this.ctx.transaction(async (trx) => {
      await trx.deleteFrom('blobhost_parts').where('upload_id', '=', uploadId).execute();
      await trx.deleteFrom('blobhost_uploads').where('upload_id', '=', uploadId).execute();
    });
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
