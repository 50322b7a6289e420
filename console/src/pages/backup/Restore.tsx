/** "Restore files" on a backup's page: the passphrase, the restore's progress, the archive to save and its files. */
import type { RefObject } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { formatBytes, plural } from '../../format.js';
import { useUnlock, VaultPassphraseForm, WorkerFailure, type UnlockState } from '../../unlock.js';
import { BackupFiles } from '../BackupFiles.js';
import { restoreInWorker, type Restored, type RestoreFailure, type RestoreProgress } from './restore-run.js';

type RestoreState = UnlockState<Restored, RestoreFailure, RestoreProgress>;

function Saved({ restored, backupId, saveLink }: { restored: Restored; backupId: string; saveLink: RefObject<HTMLAnchorElement> }) {
  return (
    <div class="success">
      <p>
        <strong>Decrypted and verified.</strong> {formatBytes(restored.bytes)} archive of “{restored.metadata.name}”:{' '}
        {plural(restored.metadata.fileCount, 'file')}, {plural(restored.metadata.directoryCount, 'folder')},{' '}
        {plural(restored.metadata.symlinkCount, 'link')}, from <code>{restored.metadata.sourcePath}</code>. Final tag, size and SHA-256 all
        match.
      </p>
      <p>
        <a ref={saveLink} class="button" href={restored.url} download={restored.fileName}>
          Save {restored.fileName}
        </a>
      </p>
      <p class="help">
        Unpack with <code>tar -xf {restored.fileName}</code>, or restore directly with <code>coffer restore {backupId} ./restored</code>.
      </p>
    </div>
  );
}

/** The restore's live status: unlocking, the download's progress, then the archive to save. */
function RestoreStatus({ state, backupId, saveLink }: { state: RestoreState; backupId: string; saveLink: RefObject<HTMLAnchorElement> }) {
  const restored = state.phase === 'done' ? state.result : null;
  return (
    <div aria-live="polite" role="status" class="restore-status">
      {state.phase === 'busy' && !state.progress && <p>Unlocking the vault (Argon2id, this takes a moment)…</p>}
      {state.phase === 'busy' && state.progress && (
        <>
          <label for="restore-progress">Downloading and decrypting</label>
          <progress id="restore-progress" max={state.progress.total || 1} value={state.progress.done} />
          <p class="muted">
            {formatBytes(state.progress.done)} of {formatBytes(state.progress.total)}
          </p>
        </>
      )}
      {restored && <Saved restored={restored} backupId={backupId} saveLink={saveLink} />}
    </div>
  );
}

function RestoreError({ state }: { state: Extract<RestoreState, { phase: 'error' }> }) {
  return (
    <div class="error" role="alert" id="restore-error">
      {state.wrongPassphrase ? (
        <p>
          <strong>Wrong passphrase.</strong> The vault could not be unlocked with it, so nothing was downloaded or decrypted. Check the
          passphrase (it is case-sensitive) and try again.
        </p>
      ) : state.failure.integrity ? (
        <p>
          <strong>This backup failed verification and was not saved:</strong> {state.failure.message}.
        </p>
      ) : (
        <p>
          <strong>The restore did not finish:</strong> {state.failure.message}
        </p>
      )}
    </div>
  );
}

export function Restore({ backupId }: { backupId: string }) {
  const [passphrase, setPassphrase] = useState('');
  const stop = useRef<(() => void) | null>(null);
  const saveLink = useRef<HTMLAnchorElement>(null);
  const passphraseInput = useRef<HTMLInputElement>(null);
  const { state, run } = useUnlock<Restored, RestoreFailure, { done: number; total: number }>({
    describe: (caught) =>
      caught instanceof WorkerFailure
        ? { integrity: caught.report.integrity ?? false, message: caught.report.message }
        : { integrity: false, message: String(caught) },
    focusOnError: ({ wrongPassphrase }) => (wrongPassphrase ? passphraseInput : null),
  });

  // Leaving the page stops a running restore; a saved archive's object URL is released when it is replaced.
  useEffect(() => () => stop.current?.(), []);
  useEffect(() => {
    if (state.phase !== 'done') return;
    const { url } = state.result;
    return () => URL.revokeObjectURL(url);
  }, [state]);

  // Offer the file as soon as it is verified (the link stays for a second save).
  useEffect(() => {
    if (state.phase === 'done') saveLink.current?.click();
  }, [state.phase]);

  const restore = (event: Event) => {
    event.preventDefault();
    if (!passphrase) return;
    void run((progress) =>
      restoreInWorker(
        { backupId, passphrase },
        progress,
        (stopWorker) => (stop.current = stopWorker),
        () => setPassphrase(''),
      ),
    );
  };

  const restored = state.phase === 'done' ? state.result : null;
  return (
    <section class="panel" aria-labelledby="restore-title">
      <h2 id="restore-title">Restore files</h2>
      <p>
        The encrypted archive is downloaded and decrypted in this page with your passphrase, checked against its sealed SHA-256, then saved
        as a <code>.tar</code> file. The passphrase and the files never leave this browser.
      </p>
      <VaultPassphraseForm
        id="passphrase"
        errorId="restore-error"
        state={state}
        passphrase={passphrase}
        onPassphrase={setPassphrase}
        onSubmit={restore}
        inputRef={passphraseInput}
      >
        Decrypt and save
      </VaultPassphraseForm>
      <RestoreStatus state={state} backupId={backupId} saveLink={saveLink} />
      {state.phase === 'error' && <RestoreError state={state} />}
      {restored && <BackupFiles archive={restored.blob} metadata={restored.metadata} entries={restored.entries} />}
    </section>
  );
}
