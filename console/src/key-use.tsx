/**
 * Which key each backup uses (docs/console.md "Keys"). Without any secret the page reads each wrappedDek's form
 * (src/client/key-usage.ts): sealed to a recipient (its fingerprint), or wrapped with a master key. Once the vault is
 * unlocked in the page (here, or by a restore), it knows which key of the ring opened each one: the current key or a
 * retired one (kept after `coffer rekey` to read older backups), with that key's recipient fingerprint. Only those
 * labels are kept, in memory; the passphrase and the keys are dropped as soon as they are used.
 */
import { unlockFailureText } from './caught.js';
import { useEffect, useState } from 'preact/hooks';
import { dekForm, type KeyUse } from '../../src/client/key-usage.js';
import { ApiError, api, type BackupKeyEntry } from './api.js';
import { type DrillFindings, type ProfileFacts } from './drills.js';
import { verifyDrills } from './drill-check.js';
import { readAttestations } from './drill-list.js';
import { plural } from './format.js';
import { letStatusRender, useUnlock, UnlockStatus, VaultPassphraseForm } from './unlock.js';

/** What unlocking taught the page: the ring's recipient fingerprints (current first) and each backup's key. */
export interface KnownKeys {
  fingerprints: string[];
  /** Per backup id: the key that opened its data key, or 'unopened' when no key of this vault did. */
  uses: Map<string, KeyUse | 'unopened'>;
  /** Per backup id: its name and source, read from its sealed metadata in this page (never sent anywhere). */
  described?: Map<string, BackupDescription>;
  /** The drill attestations the server shows, each verified with this vault's keys (drills.ts). */
  drills?: DrillFindings;
}

/** What the sealed metadata says a backup is: its name, where it was made from, and its profile's chain. */
export type BackupDescription = ProfileFacts;

let known: KnownKeys | null = null;
const listeners = new Set<() => void>();
const changed = () => listeners.forEach((listener) => listener());

/** Records what an unlock found (a later unlock with another ring replaces it). */
export function rememberKeys(
  fingerprints: string[],
  uses: Map<string, KeyUse | 'unopened'>,
  described: Map<string, BackupDescription> = new Map(),
  drills?: DrillFindings,
): void {
  const sameRing = known !== null && known.fingerprints.join() === fingerprints.join();
  known = {
    fingerprints,
    uses: sameRing ? new Map([...known!.uses, ...uses]) : uses,
    described: sameRing ? new Map([...(known!.described ?? []), ...described]) : described,
    drills: sameRing ? mergeDrills(known!.drills, drills) : drills,
  };
  changed();
}

/** A later check replaces what an earlier one found for the backups it covers (a full check replaces them all). */
function mergeDrills(before: DrillFindings | undefined, after: DrillFindings | undefined): DrillFindings | undefined {
  if (!before || !after) return after ?? before;
  if (after.complete) return after;
  return { ...before, byBackup: new Map([...before.byBackup, ...after.byBackup]) };
}

/** A backup's profile chain id, when its sealed metadata names a well-formed one (docs/crypto.md §3a). */
function chainIdOf(metadata: { chain?: unknown }): string | undefined {
  const id = (metadata.chain as { id?: unknown } | undefined)?.id;
  return typeof id === 'string' && /^[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}$/.test(id) ? id : undefined;
}

/** What a backup's opened metadata says it is. */
export function describeBackup(metadata: { name: string; sourcePath: string; sources?: string[]; chain?: unknown }): BackupDescription {
  const chainId = chainIdOf(metadata);
  return { name: metadata.name, source: sourceOf(metadata), ...(chainId ? { chainId } : {}) };
}

/** The source a backup's metadata names: its paths, or standard input. */
export function sourceOf(metadata: { sourcePath: string; sources?: string[] }): string {
  if (metadata.sourcePath === '-') return 'standard input';
  return metadata.sources && metadata.sources.length > 1 ? metadata.sources.join(', ') : metadata.sourcePath;
}

/** One backup's name and source once the vault was unlocked in this page (else nothing). */
export function BackupName({ backupId }: { backupId: string }) {
  const described = useKnownKeys()?.described?.get(backupId);
  if (!described) return null;
  return (
    <span class="backup-name" data-testid="backup-name">
      <strong>{described.name}</strong> <span class="muted">from</span> <span class="mono">{described.source}</span>
    </span>
  );
}

export function forgetKeys(): void {
  known = null;
  changed();
}

export function useKnownKeys(): KnownKeys | null {
  const [, setTick] = useState(0);
  useEffect(() => {
    const listener = () => setTick((n) => n + 1);
    listeners.add(listener);
    return () => void listeners.delete(listener);
  }, []);
  return known;
}

/**
 * The wrapped data key of every visible backup (one request), read again when a backup appears or changes status
 * while the page lacks its key (a wrappedDek arrives with the finalize).
 */
export function useBackupKeys(backups: readonly { id: string; status: string }[] | null): Map<string, BackupKeyEntry> | null {
  const [entries, setEntries] = useState<Map<string, BackupKeyEntry> | null>(null);
  const missing = backups !== null && (entries === null || backups.some(({ id }) => !entries.get(id)?.wrappedDek));
  const key = backups?.map(({ id, status }) => `${id}:${status}`).join() ?? '';
  useEffect(() => {
    if (!missing) return;
    let cancelled = false;
    api('GET /console/api/backup-keys').then(
      ({ backups: list }) => !cancelled && setEntries(new Map(list.map((entry) => [entry.id, entry]))),
      (caught: unknown) => {
        if (!(caught instanceof ApiError)) throw caught;
      },
    );
    return () => {
      cancelled = true;
    };
  }, [key, missing]);
  return entries;
}

const keyName = (use: KeyUse) => (use.current ? 'Current key' : `Retired key ${use.keyIndex + 1}`);

/** One backup's key: what unlocking confirmed, else what its wrappedDek says. */
export function KeyCell({ backupId, wrappedDek }: { backupId: string; wrappedDek: string | null | undefined }) {
  const keys = useKnownKeys();
  const use = keys?.uses.get(backupId);
  const form = dekForm(wrappedDek);
  if (use && use !== 'unopened') {
    return (
      <span
        class="key-use"
        data-key-role={use.current ? 'current' : 'retired'}
        data-key-fingerprint={use.fingerprint}
        data-key-form={use.form}
      >
        <span class={`badge ${use.current ? 'key-current' : 'key-retired'}`}>{keyName(use)}</span>{' '}
        <span class="mono">{use.fingerprint}</span>
        <span class="muted"> {use.form === 'sealed' ? '(sealed by a backup host)' : '(with the passphrase)'}</span>
      </span>
    );
  }
  if (use === 'unopened') {
    return (
      <span class="key-use" data-key-role="foreign" data-key-fingerprint={form?.form === 'sealed' ? form.fingerprint : undefined}>
        <span class="badge key-foreign">No key of this vault</span>
        {form?.form === 'sealed' && <span class="mono"> {form.fingerprint}</span>}
      </span>
    );
  }
  if (form?.form === 'sealed') {
    return (
      <span class="key-use" data-key-role="unknown" data-key-fingerprint={form.fingerprint} data-key-form="sealed">
        Sealed to <span class="mono">{form.fingerprint}</span>
      </span>
    );
  }
  if (form?.form === 'master') {
    return (
      <span class="key-use" data-key-role="unknown" data-key-form="master">
        Master key <span class="muted">(unlock to see which)</span>
      </span>
    );
  }
  return <span class="muted">—</span>;
}

/**
 * Unlocks the vault in this page with the passphrase, notes which key of the ring opens each backup's data key, and
 * drops the keys again. Everything runs here: only the vault record and the wrapped keys are read from the server.
 */
export async function identifyKeys(passphrase: string): Promise<KnownKeys> {
  const crypto = await import('./crypto/envelope.js');
  await crypto.ready;
  const [account, { backups }, attestations] = await Promise.all([
    api('GET /api/backup-account'),
    api('GET /console/api/backup-keys'),
    readAttestations(),
  ]);
  if (!account.initialized) throw new crypto.IntegrityError('this account has no vault yet (coffer init)');
  const material = await crypto.unwrapMasterKey(account, passphrase);
  try {
    const fingerprints = crypto.keyFingerprints(material);
    const drills = verifyDrills(crypto, material, attestations, backups);
    const uses = new Map<string, KeyUse | 'unopened'>();
    const described = new Map<string, BackupDescription>();
    for (const entry of backups) {
      if (!entry.wrappedDek || !entry.wrappedDekNonce) continue;
      try {
        const opened = crypto.openDek(material, entry.id, entry);
        try {
          if (entry.encryptedMetadata && entry.encryptedMetadataNonce) {
            const metadata = crypto.openMetadata(opened.dek, entry.id, entry);
            described.set(entry.id, describeBackup(metadata));
          }
        } finally {
          crypto.wipe(opened.dek);
        }
        uses.set(entry.id, crypto.keyUse(opened.form, opened.keyIndex, fingerprints));
      } catch (error) {
        if (!(error instanceof crypto.IntegrityError)) throw error;
        uses.set(entry.id, 'unopened');
      }
    }
    return { fingerprints, uses, described, drills };
  } finally {
    crypto.wipe(material);
  }
}

/**
 * A passphrase form's state and submit: unlocks in this page (identifyKeys), remembers what it found for every page,
 * and clears the passphrase. The Keys panel and the drills page share it.
 */
export function usePassphraseUnlock() {
  const [passphrase, setPassphrase] = useState('');
  const { state, run } = useUnlock<KnownKeys, string>({ describe: unlockFailureText });
  const unlock = (event: Event) => {
    event.preventDefault();
    if (!passphrase) return;
    void run(async () => {
      await letStatusRender();
      const found = await identifyKeys(passphrase);
      rememberKeys(found.fingerprints, found.uses, found.described, found.drills);
      setPassphrase('');
      return found;
    });
  };
  return { state, passphrase, setPassphrase, unlock };
}

/** The panel on the backups page: unlock to label every backup with its key, and the ring with its counts. */
export function KeyUnlock() {
  const keys = useKnownKeys();
  const { state, passphrase, setPassphrase, unlock } = usePassphraseUnlock();

  if (keys) {
    const counts = keys.fingerprints.map(
      (_, i) => [...keys.uses.values()].filter((use) => use !== 'unopened' && use.keyIndex === i).length,
    );
    const foreign = [...keys.uses.values()].filter((use) => use === 'unopened').length;
    return (
      <section class="panel" aria-labelledby="keys-title">
        <h2 id="keys-title">Keys</h2>
        <p>
          This vault holds {keys.fingerprints.length === 1 ? 'one master key' : `${keys.fingerprints.length} master keys`}. New backups use
          the current key; retired keys (kept by <code>coffer rekey</code>) only read the backups made before.
        </p>
        <ol class="key-ring" data-testid="key-ring">
          {keys.fingerprints.map((fingerprint, i) => (
            <li key={fingerprint} data-key-role={i === 0 ? 'current' : 'retired'} data-key-fingerprint={fingerprint}>
              <span class={`badge ${i === 0 ? 'key-current' : 'key-retired'}`}>{i === 0 ? 'Current key' : `Retired key ${i + 1}`}</span>{' '}
              <span class="mono">{fingerprint}</span>: {plural(counts[i]!, 'backup')}
            </li>
          ))}
        </ol>
        {foreign > 0 && (
          <p class="error" role="alert">
            {plural(foreign, 'backup')} could not be opened with any key of this vault (sealed to another recipient, or altered).
          </p>
        )}
        {counts.slice(1).some((n) => n > 0) && (
          <p class="help">
            Backups on a retired key are only as safe as that key. Backup hosts still sealing to a retired recipient should be given the
            current one (<code>coffer recipient</code>).
          </p>
        )}
        <button type="button" class="secondary" onClick={forgetKeys}>
          Hide key details
        </button>
      </section>
    );
  }
  return (
    <section class="panel" aria-labelledby="keys-title">
      <h2 id="keys-title">Keys</h2>
      <p>
        Each backup's name and source are sealed with it: the server cannot read them. Unlock the vault in this page to show them, and which
        key of your vault each backup uses (the current one, or one retired by <code>coffer rekey</code>). They are decrypted here; the
        passphrase and what it opens never leave this browser.
      </p>
      <VaultPassphraseForm
        id="keys-passphrase"
        errorId="keys-error"
        state={state}
        passphrase={passphrase}
        onPassphrase={setPassphrase}
        onSubmit={unlock}
      >
        Show keys
      </VaultPassphraseForm>
      <UnlockStatus state={state} errorId="keys-error" />
    </section>
  );
}

/** The backup page's fact: which key this backup uses (dt/dd for its fact list). */
export function BackupKey({ backupId, wrappedDek }: { backupId: string; wrappedDek: string | null }) {
  const keys = useKnownKeys();
  const form = dekForm(wrappedDek);
  return (
    <>
      <dt>Data key</dt>
      <dd data-testid="backup-key">
        <KeyCell backupId={backupId} wrappedDek={wrappedDek} />
        {!keys?.uses.has(backupId) && (
          <span class="help">
            {' '}
            {form?.form === 'sealed'
              ? 'Sealed to that recipient by a backup host that holds no passphrase. Restoring ' +
                '(below) shows which key of your vault opens it.'
              : 'Wrapped with a master key of your vault. Restoring (below) shows which one: the current key or a retired one.'}
          </span>
        )}
      </dd>
    </>
  );
}
