/**
 * The blob host's multipart uploads (src/services/blob-host.ts) and the presigned uploads with their signed sizes
 * (src/services/presigned-upload.ts), counted here instead of listed in storage.
 */
export interface MultipartStore {
  /**
   * Records an open multipart upload of a slot (with `firstPartSize`: and the size of its part 1, as setPartSize,
   * in the same commit); returns how many the slot now has open, counted after that commit.
   */
  addMultipartUpload(backupId: string, uploadId: string, now: number, firstPartSize?: number): Promise<number>;
  /** How many multipart uploads the slot has open. */
  countMultipartUploads(backupId: string): Promise<number>;
  /** Records (or replaces) the size of a stored part; returns the bytes the slot's open uploads now hold together. */
  putPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<number>;
  /** Records (or replaces) the size of a part, like putPartSize without reading the slot's bytes afterwards. */
  setPartSize(backupId: string, uploadId: string, partNumber: number, size: number): Promise<void>;
  /** Bytes the slot's open uploads hold together, leaving out one part (the one about to be replaced). */
  slotBytes(backupId: string, except?: { uploadId: string; partNumber: number }): Promise<number>;
  /**
   * Bytes one open upload holds (the sum of its parts' sizes), leaving out part `exceptPart`; undefined when no such
   * upload is open (never recorded, or removed).
   */
  uploadBytes(uploadId: string, exceptPart?: number): Promise<number | undefined>;
  /** Forgets a multipart upload and its parts (completed or aborted). */
  removeMultipartUpload(uploadId: string): Promise<void>;
  /** Forgets the uploads of slots that take no upload any more (no longer PENDING_UPLOAD); returns how many. */
  pruneMultipartUploads(): Promise<number>;
}
