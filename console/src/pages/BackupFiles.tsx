/**
 * The files of a backup decrypted in this page: a filterable list (path, size, mode, modified) and a button per
 * file that saves that one file, cut out of the verified archive in the page (nothing is downloaded again).
 */
import { useEffect, useMemo, useState } from 'preact/hooks';
import { extractFile, type ArchiveEntry } from '../archive-index.js';
import type { BackupMetadata } from '../crypto/envelope.js';
import { formatBytes, plural } from '../format.js';
import { CardTable, type Column } from '../ui/card-table.js';
import { valueOf } from '../ui/forms.js';

/** How many rows are drawn at once (a filter narrows the rest down). */
const SHOWN = 300;

const TYPE_LETTER: Record<ArchiveEntry['type'], string> = { file: '-', directory: 'd', symlink: 'l', hardlink: 'h', other: '?' };

/** `-rw-r--r--`, as `ls -l` and `coffer ls` show it. */
export function modeString(entry: ArchiveEntry): string {
  const bits = (shift: number) => {
    const b = (entry.mode >> shift) & 7;
    return `${b & 4 ? 'r' : '-'}${b & 2 ? 'w' : '-'}${b & 1 ? 'x' : '-'}`;
  };
  return TYPE_LETTER[entry.type] + bits(6) + bits(3) + bits(0);
}

/** The base name of an archive path as a safe download name. */
const downloadName = (entryPath: string) =>
  entryPath
    .split('/')
    .pop()!
    .replace(/[^\p{L}\p{N}._ -]+/gu, '-')
    .replace(/^[.-]+/, '') || 'file';

const isFile = (entry: ArchiveEntry) => entry.type === 'file' || entry.type === 'hardlink';

const COLUMNS: Column<ArchiveEntry>[] = [
  {
    header: 'Path',
    class: 'mono',
    cell: (entry) => (
      <>
        {entry.type === 'directory' ? `${entry.path}/` : entry.path}
        {entry.type === 'symlink' && <span class="muted"> → {entry.linkTarget}</span>}
      </>
    ),
  },
  { header: 'Size', cell: (entry) => (entry.type === 'file' ? formatBytes(entry.size) : '—') },
  { header: 'Mode', class: 'mono', cell: modeString },
  { header: 'Modified', cell: (entry) => (entry.mtime ? entry.mtime.slice(0, 16).replace('T', ' ') : '—') },
];

/** What the filter shows, and the file last saved (to save again). */
function FilesStatus({ filter, matching, saved }: { filter: string; matching: number; saved: Saved | null }) {
  return (
    <div aria-live="polite" role="status">
      {matching > SHOWN ? (
        <p class="muted">
          Showing {SHOWN} of {plural(matching, 'matching entry', 'matching entries')}: narrow the filter to see the others.
        </p>
      ) : (
        filter.trim() !== '' && <p class="muted">{plural(matching, 'matching entry', 'matching entries')}.</p>
      )}
      {saved && (
        <p>
          Saved <code>{saved.path}</code>:{' '}
          <a href={saved.url} download={saved.name}>
            save {saved.name} again
          </a>
        </p>
      )}
    </div>
  );
}

interface Saved {
  url: string;
  name: string;
  path: string;
}

/** Saves one file of the archive (cut out of it in the page), as a download; the last one saved, to save again. */
function useSaveFile(archive: Blob, metadata: BackupMetadata, entries: ArchiveEntry[]) {
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saved, setSaved] = useState<Saved | null>(null);

  useEffect(() => {
    if (!saved) return;
    const { url } = saved;
    return () => URL.revokeObjectURL(url);
  }, [saved]);

  const save = async (entry: ArchiveEntry) => {
    setBusy(entry.path);
    setError(null);
    try {
      const blob = await extractFile(archive, metadata, entry, entries);
      const next = { url: URL.createObjectURL(blob), name: downloadName(entry.path), path: entry.path };
      setSaved(next);
      const link = document.createElement('a');
      link.href = next.url;
      link.download = next.name;
      link.click();
    } catch (caught) {
      setError(caught instanceof Error ? caught.message : String(caught));
    } finally {
      setBusy(null);
    }
  };
  return { busy, error, saved, save };
}

export function BackupFiles({ archive, metadata, entries }: { archive: Blob; metadata: BackupMetadata; entries: ArchiveEntry[] }) {
  const [filter, setFilter] = useState('');
  const { busy, error, saved, save } = useSaveFile(archive, metadata, entries);
  const matching = useMemo(() => {
    const needle = filter.trim().toLowerCase();
    return needle === '' ? entries : entries.filter((e) => e.path.toLowerCase().includes(needle));
  }, [entries, filter]);
  const files = entries.filter(isFile).length;

  return (
    <section class="panel" aria-labelledby="files-title">
      <h2 id="files-title">Files in this backup</h2>
      <p class="muted">
        {plural(files, 'file')}, {plural(entries.length, 'entry', 'entries')} in all, listed from the decrypted and verified archive in this
        page.
      </p>
      <label for="files-filter">Filter by path</label>
      <input
        id="files-filter"
        type="search"
        autoComplete="off"
        spellcheck={false}
        value={filter}
        onInput={(event) => setFilter(valueOf(event))}
      />
      <FilesStatus filter={filter} matching={matching.length} saved={saved} />
      {error && (
        <p class="error" role="alert">
          The file could not be saved: {error}
        </p>
      )}
      <CardTable
        label="Files"
        rows={matching.slice(0, SHOWN)}
        row={(entry) => ({ key: entry.path, 'data-path': entry.path })}
        columns={[
          ...COLUMNS,
          {
            header: 'Actions',
            hiddenHeader: true,
            label: null,
            cell: (entry) =>
              isFile(entry) && (
                <button
                  type="button"
                  class="secondary"
                  disabled={busy !== null}
                  onClick={() => void save(entry)}
                  aria-label={`Save ${entry.path}`}
                >
                  {busy === entry.path ? 'Saving…' : 'Save'}
                </button>
              ),
          },
        ]}
      />
    </section>
  );
}
