/** Small display helpers shared by the pages. */
import type { ComponentChildren } from 'preact';
import type { BackupStatus } from './api.js';

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

export function When({ at, empty = '—' }: { at: string | null | undefined; empty?: string }) {
  if (!at) return <span>{empty}</span>;
  return (
    <time dateTime={at} title={at}>
      {dateTime.format(new Date(at))}
    </time>
  );
}

const STATUS_TEXT: Record<BackupStatus, string> = {
  PENDING_UPLOAD: 'Waiting for upload',
  UPLOADED: 'Uploaded, finishing',
  READY: 'Ready',
  FAILED: 'Failed',
  DELETING: 'Deleting',
  DELETED: 'Deleted',
};

/** A status as text and colour (never colour alone); the raw value stays readable for tests and screen readers. */
export function StatusBadge({ status }: { status: BackupStatus }) {
  return (
    <span class={`badge badge-${status.toLowerCase()}`} data-status={status} title={STATUS_TEXT[status]}>
      {status}
    </span>
  );
}

export const statusText = (status: BackupStatus) => STATUS_TEXT[status];

/** "1 file", "2 files": the one rule of the console and the CLI. */
export { formatBytes, plural } from '../../src/domain/words.js';

export const shortId = (id: string) => id.slice(0, 8);

/**
 * A command that wraps only at spaces and after a slash (a long URL), never inside a word, not even at a hyphen: a
 * command copied from two lines must stay the same command.
 */
export function wrapPoints(text: string): ComponentChildren {
  return text
    .split(/(\s+)/)
    .map((run) =>
      /^\s*$/.test(run) ? run : run.split(/(?<=\/)/).map((piece, index) => [index > 0 && <wbr />, <span class="unbroken">{piece}</span>]),
    );
}
