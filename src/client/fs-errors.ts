/** File-system failures in words: the file named, the reason said the way a user reads it (not errno text). */

const REASONS: Record<string, string> = {
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOENT: 'no such file or directory',
  ENOTDIR: 'a part of the path is not a directory',
  EISDIR: 'it is a directory',
  ELOOP: 'too many levels of symbolic links',
  ENAMETOOLONG: 'the name is too long',
  EIO: 'input/output error (the disk or file system failed)',
  ENXIO: 'no such device',
  ENODEV: 'no such device',
  EBUSY: 'the file is busy',
  ETXTBSY: 'the file is busy',
  EEXIST: 'it already exists',
  EROFS: 'the file system is read-only',
  ENOSPC: 'no space left on the device',
  EDQUOT: 'the disk quota is used up',
  EMFILE: 'too many open files',
  ENFILE: 'too many open files in the system',
  EINVAL: 'the file system does not allow this',
  EXDEV: 'it is on another file system',
  ENOTEMPTY: 'the directory is not empty',
  EFBIG: 'the file is too large',
};

/** The reason of a failed file-system call in words ("permission denied"), never raw errno text. */
export function fsReason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code && REASONS[code]) return REASONS[code];
  return code ? `system error ${code}` : error instanceof Error ? error.message : String(error);
}

/** A file of the source could not be read, or changed while it was read: the backup stores nothing. */
export class SourceReadError extends Error {
  override readonly name = 'SourceReadError';
  constructor(
    message: string,
    readonly file: string,
  ) {
    super(message);
  }
}

export const cannotRead = (file: string, error: unknown) =>
  new SourceReadError(`cannot read ${file}: ${fsReason(error)}; nothing was stored`, file);

export const changedWhileRead = (file: string) =>
  new SourceReadError(
    `file changed while it was read: ${file}; nothing was stored. Run the backup again when nothing is writing to it.`,
    file,
  );
