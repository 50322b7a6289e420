/**
 * API keys: create one with chosen permissions, expiry and (optionally) the append-only restriction (shown once),
 * add a backup host (an append-only key and the settings the host needs), list keys, revoke them.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  ApiError,
  SCOPES,
  api,
  type CreatedHostAccount,
  type CreatedKey,
  type HostAccountInfo,
  type KeyInfo,
  type Scope,
  type SessionInfo,
} from '../api.js';
import { HOST_LABEL, KEY_LABEL_MAX, keyLabelProblem } from '../../../src/domain/keys.js';
import type { BackupRecord } from '../api.js';
import { formatBytes, plural, shortId, StatusBadge, When } from '../format.js';
import { CardTable } from '../ui/card-table.js';
import { ConfirmAction } from '../ui/confirm.js';
import { BASE } from '../router.js';
import { deriveRecipientInWorker } from '../recipient-protocol.js';
import { SecretField } from '../secret-field.js';
import { useFreshAction } from './Retention.js';

const SCOPE_HELP: Record<Scope, string> = {
  'backups:read': 'read the vault and list backups',
  'backups:write': 'make, finish and delete backups; manage the vault',
  'backups:restore': 'download encrypted archives',
};

const EXPIRY: { label: string; days: number | null }[] = [
  { label: '7 days', days: 7 },
  { label: '30 days', days: 30 },
  { label: '90 days', days: 90 },
  { label: '1 year', days: 365 },
  { label: 'Never', days: null },
];

const APPEND_ONLY_HELP = 'can add backups, but never delete them, reset the account or change the vault: for hosts that may be stolen';

/** A host's settings as shell lines (the values are quoted for a POSIX shell). */
function hostSettings(url: string, apiKey: string, recipient: string | null): string {
  const quote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
  return [
    `export COFFER_URL=${quote(url)}`,
    `export COFFER_API_KEY=${quote(apiKey)}`,
    ...(recipient ? [`export COFFER_RECIPIENT=${quote(recipient)}`] : []),
  ].join('\n');
}

/** Copies `text`; true when the clipboard took it. */
async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

type HostState =
  | { phase: 'form' }
  | { phase: 'working'; step: string }
  | { phase: 'done'; keyId: string; settings: string; fingerprint: string | null; hostAccount: CreatedHostAccount | null };

/**
 * "Add a backup host": makes a write-only append-only key (no read, no restore), and shows what to set on the host. With the
 * passphrase, the page also derives the vault's recipient (in a worker; the passphrase never leaves the browser), so
 * the host backs up without ever holding the passphrase.
 */
function AddHost({ onCreated }: { onCreated: () => Promise<void> }) {
  const [state, setState] = useState<HostState>({ phase: 'form' });
  const [passphrase, setPassphrase] = useState('');
  const [expiry, setExpiry] = useState('365');
  const [schedule, setSchedule] = useState<'shared' | 'own'>('shared');
  const [hostLabel, setHostLabel] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [copied, setCopied] = useState(false);

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const label = hostLabel.trim();
    if (schedule === 'own' && !HOST_LABEL.test(label)) {
      setError(
        'Nothing was made: name the host with 1–40 letters, digits, spaces, dots, dashes or underscores, starting with a letter or digit.',
      );
      return;
    }
    let recipient: string | null = null;
    let fingerprint: string | null = null;
    if (passphrase) {
      setState({ phase: 'working', step: 'Unlocking the vault in this page to derive its recipient…' });
      const derived = await deriveRecipientInWorker({ passphrase });
      if (derived.type === 'error') {
        setState({ phase: 'form' });
        setError(
          derived.wrongPassphrase
            ? 'That passphrase does not unlock the vault. No key was made.'
            : `The recipient could not be derived: ${derived.message}. No key was made.`,
        );
        return;
      }
      ({ recipient, fingerprint } = derived);
    }
    setPassphrase('');
    const expiresInDays = expiry === 'never' ? null : Number(expiry);
    setState({
      phase: 'working',
      step: schedule === 'own' ? 'Making the host account and its append-only key…' : 'Making the append-only key…',
    });
    try {
      const about = await api('GET /console/api/about');
      if (schedule === 'own') {
        const made = await api('POST /console/api/host-accounts', { body: { label, expiresInDays } });
        setHostLabel('');
        setState({
          phase: 'done',
          keyId: made.keyId,
          settings: hostSettings(about.publicUrl, made.apiKey, recipient),
          fingerprint,
          hostAccount: made,
        });
      } else {
        const created = await api('POST /console/api/keys', { body: { scopes: ['backups:write'], expiresInDays, appendOnly: true } });
        setState({
          phase: 'done',
          keyId: created.keyId,
          settings: hostSettings(about.publicUrl, created.apiKey, recipient),
          fingerprint,
          hostAccount: null,
        });
      }
      await onCreated();
    } catch (caught) {
      setState({ phase: 'form' });
      setError(caught instanceof ApiError ? `${caught.message} ${caught.resolution}` : String(caught));
    }
  };

  if (state.phase === 'done') {
    return (
      <div class="success new-key" role="region" aria-labelledby="host-ready-title">
        <h3 id="host-ready-title">Set this on the host</h3>
        <p>
          <strong>Copy it now: the key is shown only this once.</strong> Key {shortId(state.keyId)} is write-only and append-only: it can
          add backups, never read, list, download, delete them, reset the account or change the vault.
        </p>
        {state.hostAccount && (
          <p data-testid="host-account-made">
            It belongs to the host account <strong>{state.hostAccount.label}</strong> (
            <span class="mono">{shortId(state.hostAccount.accountId)}</span>): its own schedule, one backup every{' '}
            {state.hostAccount.backupInterval} on the {state.hostAccount.plan} plan, and the same vault as yours, so your passphrase and
            recipient open its backups. They are listed below under Host accounts.
          </p>
        )}
        <label for="host-settings">Host settings</label>
        <textarea id="host-settings" class="mono" readOnly rows={state.fingerprint ? 4 : 3} value={state.settings} />
        <div class="copy-row">
          <button type="button" class="secondary" onClick={async () => setCopied(await copyText(state.settings))}>
            Copy
          </button>
        </div>
        <p aria-live="polite" class="help">
          {copied
            ? 'Copied to the clipboard.'
            : state.fingerprint
              ? `Then run coffer backup <path> there: it seals to your vault's recipient (fingerprint ${state.fingerprint}) without the passphrase, and cannot restore.`
              : 'Then run coffer backup <path> there (give it your passphrase, or come back with it to add COFFER_RECIPIENT).'}
        </p>
        <button type="button" onClick={() => (setState({ phase: 'form' }), setCopied(false))}>
          I have stored it
        </button>
      </div>
    );
  }
  return (
    <form onSubmit={submit} aria-describedby="host-help">
      <p id="host-help" class="help">
        Makes a write-only, append-only key for a machine that runs backups, and shows what to set there. A stolen host can add backups but
        cannot read, list, download or delete any, and never holds the vault's wrapped key, so it cannot guess your passphrase offline. What
        it gives up: it cannot read the server's list, so it cannot check the server's newest backup against its own record (the chain-head
        check); that check runs where you restore, with <code>coffer list --chain</code>.
      </p>
      <p class="help" id="host-cadence">
        <strong>The schedule is per account:</strong> the plan's interval counts every backup of this account, yours and every host's with a
        key made here, so a host added here waits while another backup of the account is recent. A host that must back up on its own
        schedule needs a host account: an account of its own with the same vault (the same passphrase and recipient), whose backups you
        still list and restore here and with <code>coffer list</code>. Choose <strong>Its own</strong> below to make one (at most 5 per
        account from here; your operator adds more with <code>coffer admin accounts add-host</code>).
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <fieldset>
        <legend>Schedule</legend>
        <div class="check">
          <input
            type="radio"
            id="host-schedule-shared"
            name="host-schedule"
            value="shared"
            checked={schedule === 'shared'}
            onChange={() => setSchedule('shared')}
          />
          <label for="host-schedule-shared">
            This account's <span class="muted">a key of this account: the host waits while another backup of the account is recent</span>
          </label>
        </div>
        <div class="check">
          <input
            type="radio"
            id="host-schedule-own"
            name="host-schedule"
            value="own"
            checked={schedule === 'own'}
            onChange={() => setSchedule('own')}
          />
          <label for="host-schedule-own">
            Its own <span class="muted">a host account on your plan with the same vault: your passphrase and recipient restore it</span>
          </label>
        </div>
      </fieldset>
      {schedule === 'own' && (
        <>
          <label for="host-label">Host name</label>
          <input
            id="host-label"
            type="text"
            maxLength={40}
            autoComplete="off"
            required
            value={hostLabel}
            onInput={(event) => setHostLabel((event.target as HTMLInputElement).value)}
            aria-describedby="host-label-help"
          />
          <p id="host-label-help" class="help">
            e.g. “web”: 1–40 letters, digits, spaces, dots, dashes or underscores. Shown with its backups below and by{' '}
            <code>coffer list</code>.
          </p>
        </>
      )}
      <SecretField
        id="host-passphrase"
        label="Vault passphrase (optional)"
        value={passphrase}
        onValue={setPassphrase}
        autoComplete="current-password"
      />
      <p class="help">With it, this page derives your vault's recipient so the host never needs the passphrase. It is not sent anywhere.</p>
      <label for="host-expiry">Lifetime of the host's key</label>
      <select id="host-expiry" value={expiry} onChange={(event) => setExpiry((event.target as HTMLSelectElement).value)}>
        {EXPIRY.map((option) => (
          <option key={option.label} value={option.days === null ? 'never' : String(option.days)}>
            {option.label}
          </option>
        ))}
      </select>
      <button type="submit" disabled={state.phase === 'working'}>
        Add backup host
      </button>
      {state.phase === 'working' && <p role="status">{state.step}</p>}
    </form>
  );
}

/**
 * The account's host accounts (GET /api/host-accounts, with this session) and each one's backups: they open like the
 * account's own (the same vault), from the backup page.
 */
function HostAccounts({ version }: { version: number }) {
  const [hosts, setHosts] = useState<{ host: HostAccountInfo; backups: BackupRecord[] }[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let cancelled = false;
    (async () => {
      const { hosts: list } = await api('GET /api/host-accounts');
      const withBackups = await Promise.all(
        list.map(async (host) => ({
          host,
          backups: (await api('GET /api/host-accounts/:accountId/backups', { params: { accountId: host.accountId } })).backups,
        })),
      );
      if (!cancelled) setHosts(withBackups);
    })().catch((caught: unknown) => !cancelled && setError(caught instanceof ApiError ? caught.message : String(caught)));
    return () => {
      cancelled = true;
    };
  }, [version]);
  if (error) {
    return (
      <p class="error" role="alert">
        {error}
      </p>
    );
  }
  if (!hosts) return <p role="status">Loading host accounts…</p>;
  if (hosts.length === 0) return <p class="help">No host accounts yet: add one above with the schedule “Its own”.</p>;
  return (
    <ul class="host-accounts" aria-label="Host accounts">
      {hosts.map(({ host, backups }) => (
        <li key={host.accountId} data-host-account={host.accountId}>
          <h3>
            {host.label} <span class="mono muted">{shortId(host.accountId)}</span>
          </h3>
          <p class="help">
            Its own schedule: one backup every {host.backupInterval}. Added <When at={host.createdAt} />.{' '}
            {host.vault === 'shared'
              ? 'Same vault as yours.'
              : host.vault === 'diverged'
                ? 'Its vault was changed apart from yours: its backups open with the passphrase of its own vault.'
                : 'It has no vault.'}{' '}
            {plural(backups.length, 'backup')}.
          </p>
          {backups.length > 0 && (
            <ul>
              {backups.map((backup) => (
                <li key={backup.id} data-backup-id={backup.id}>
                  <a href={`${BASE}/backups/${backup.id}`} aria-label={`Backup ${shortId(backup.id)} of ${host.label}, open details`}>
                    <When at={backup.createdAt} />
                  </a>{' '}
                  <StatusBadge status={backup.status} /> <span class="muted">{formatBytes(backup.ciphertextSizeBytes)}</span>
                </li>
              ))}
            </ul>
          )}
        </li>
      ))}
    </ul>
  );
}

function NewKey({ created, onDone }: { created: CreatedKey; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => field.current?.focus(), []);
  const copy = async () => {
    field.current?.select();
    try {
      await navigator.clipboard.writeText(created.apiKey);
      setCopied(true);
    } catch {
      setCopied(false);
    }
  };
  return (
    <div class="success new-key" role="region" aria-labelledby="new-key-title">
      <h3 id="new-key-title">Your new key</h3>
      <p>
        <strong>Copy it now: it is shown only this once.</strong> The server keeps only a hash of it.
      </p>
      <label for="new-key-value">API key</label>
      <div class="copy-row">
        <input
          id="new-key-value"
          ref={field}
          class="mono"
          readOnly
          value={created.apiKey}
          onFocus={(e) => (e.target as HTMLInputElement).select()}
        />
        <button type="button" class="secondary" onClick={copy}>
          Copy
        </button>
      </div>
      <p aria-live="polite" class="help">
        {copied ? (
          'Copied to the clipboard.'
        ) : (
          <>
            Permissions: {created.scopes.join(', ')}
            {created.appendOnly && ' (append-only)'}. Expires: <When at={created.expiresAt} empty="never" />.
            {created.expiryCapped && ' A key made here cannot outlive the key you signed in with, so it expires with that key.'}
          </>
        )}
      </p>
      <button type="button" onClick={onDone}>
        I have stored it
      </button>
    </div>
  );
}

export function KeysPage({ session }: { session: SessionInfo }) {
  const [keys, setKeys] = useState<KeyInfo[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [scopes, setScopes] = useState<Set<Scope>>(new Set(['backups:read']));
  const [expiry, setExpiry] = useState('30');
  const [appendOnly, setAppendOnly] = useState(false);
  const [label, setLabel] = useState('');
  const [created, setCreated] = useState<CreatedKey | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const [hostsVersion, setHostsVersion] = useState(0);

  const load = () =>
    api('GET /console/api/keys').then(
      (body) => setKeys(body.keys),
      (caught: unknown) => setError(caught instanceof ApiError ? caught.message : String(caught)),
    );
  useEffect(() => void load(), []);

  // A key that can open the console (all three permissions, not append-only) needs a fresh sign-in.
  const fresh = useFreshAction();
  const create = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const labelProblem = label.trim() === '' ? null : keyLabelProblem(label.trim());
    if (labelProblem !== null) {
      setError(`No key was made: ${labelProblem}.`);
      return;
    }
    const request = {
      scopes: SCOPES.filter((scope) => scopes.has(scope)),
      expiresInDays: expiry === 'never' ? null : Number(expiry),
      appendOnly,
      ...(label.trim() === '' ? {} : { label: label.trim() }),
    };
    try {
      await fresh.attempt('make a key that can open the console', async () => {
        setCreated(await api('POST /console/api/keys', { body: request }));
        setLabel('');
        await load();
      });
    } catch (caught) {
      setError(caught instanceof ApiError ? `${caught.message} ${caught.resolution}` : String(caught));
    }
  };

  const revoke = async (keyId: string) => {
    setError(null);
    try {
      await api('DELETE /console/api/keys/:id', { params: { id: keyId } });
      setAnnouncement(`Key ${shortId(keyId)} revoked.`);
      await load();
    } catch (caught) {
      setError(caught instanceof ApiError ? caught.message : String(caught));
    }
  };

  const toggle = (scope: Scope, on: boolean) => {
    const next = new Set(scopes);
    if (on) next.add(scope);
    else next.delete(scope);
    setScopes(next);
  };

  return (
    <section>
      <h1 tabIndex={-1}>API keys</h1>
      <p class="lede">Keys let the CLI and your scripts reach your backups. Give each device its own key, with only what it needs.</p>
      <p class="visually-hidden" role="status" aria-live="polite">
        {announcement}
      </p>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      <section class="panel" aria-labelledby="create-title">
        <h2 id="create-title">Create a key</h2>
        {fresh.prompt}
        {created ? (
          <NewKey created={created} onDone={() => setCreated(null)} />
        ) : (
          <form onSubmit={create}>
            <label for="key-label">
              Label <span class="muted">(optional: which device or script uses it, e.g. “laptop”)</span>
            </label>
            <input
              id="key-label"
              type="text"
              maxLength={KEY_LABEL_MAX}
              autoComplete="off"
              value={label}
              onInput={(event) => setLabel((event.target as HTMLInputElement).value)}
              aria-describedby="key-label-help"
            />
            <p id="key-label-help" class="help">
              Up to {KEY_LABEL_MAX} letters, digits, spaces and . _ - @ : / ( ) # + , '. Shown in the list below and in Activity.
            </p>
            <fieldset>
              <legend>Permissions</legend>
              {SCOPES.map((scope) => (
                <div class="check" key={scope}>
                  <input
                    type="checkbox"
                    id={`scope-${scope}`}
                    name="scopes"
                    value={scope}
                    checked={scopes.has(scope)}
                    onChange={(event) => toggle(scope, (event.target as HTMLInputElement).checked)}
                  />
                  <label for={`scope-${scope}`}>
                    <code>{scope}</code> <span class="muted">{SCOPE_HELP[scope]}</span>
                  </label>
                </div>
              ))}
            </fieldset>
            <div class="check">
              <input
                type="checkbox"
                id="append-only"
                name="appendOnly"
                checked={appendOnly}
                onChange={(event) => setAppendOnly((event.target as HTMLInputElement).checked)}
              />
              <label for="append-only">
                Append-only <span class="muted">{APPEND_ONLY_HELP}</span>
              </label>
            </div>
            <label for="expiry">Expires after</label>
            <select id="expiry" value={expiry} onChange={(event) => setExpiry((event.target as HTMLSelectElement).value)}>
              {EXPIRY.map((option) => (
                <option key={option.label} value={option.days === null ? 'never' : String(option.days)}>
                  {option.label}
                </option>
              ))}
            </select>
            <button type="submit" disabled={scopes.size === 0}>
              Create key
            </button>
            {scopes.size === 0 && <p class="help">Choose at least one permission.</p>}
          </form>
        )}
      </section>

      <section class="panel" aria-labelledby="host-title">
        <h2 id="host-title">Add a backup host</h2>
        <AddHost onCreated={async () => (setHostsVersion((v) => v + 1), await load())} />
      </section>

      <section class="panel" aria-labelledby="host-accounts-title">
        <h2 id="host-accounts-title">Host accounts</h2>
        <HostAccounts version={hostsVersion} />
      </section>

      <h2>Your keys</h2>
      {!keys && !error && <p role="status">Loading keys…</p>}
      {keys && (
        <CardTable
          label="API keys"
          rows={keys}
          row={(key) => ({ key: key.keyId, 'data-key-id': key.keyId })}
          columns={[
            {
              header: 'Key',
              cell: (key) => (
                <>
                  {key.label && <strong class="key-label">{key.label} </strong>}
                  <span class="mono" title={key.keyId}>
                    {shortId(key.keyId)}
                  </span>
                  {key.usedByThisSession && <span class="muted"> (this session)</span>}
                </>
              ),
            },
            {
              header: 'Permissions',
              cell: (key) => (
                <>
                  {key.scopes.map((s) => s.replace('backups:', '')).join(', ')}
                  {key.appendOnly && (
                    <>
                      {' '}
                      <span class="badge key-append-only" title={APPEND_ONLY_HELP}>
                        append-only
                      </span>
                    </>
                  )}
                </>
              ),
            },
            { header: 'Created', cell: (key) => <When at={key.createdAt} /> },
            { header: 'Expires', cell: (key) => <When at={key.expiresAt} empty="Never" /> },
            { header: 'Status', cell: (key) => <span class={`badge key-${key.status}`}>{key.status}</span> },
            {
              header: 'Actions',
              hiddenHeader: true,
              cell: (key) =>
                key.status === 'active' && (
                  <ConfirmAction
                    ask="Revoke…"
                    askLabel={`Revoke key ${shortId(key.keyId)}`}
                    confirm="Revoke now"
                    question={`Confirm revoking key ${shortId(key.keyId)}`}
                    consequence={`A revoked key never works again.${key.usedByThisSession ? ' This signs you out.' : ''}`}
                    onConfirm={() => revoke(key.keyId)}
                  />
                ),
            },
          ]}
        />
      )}
      <p class="help">Signed in {session.signedInWith === 'api-key' ? 'with an API key' : 'with a one-time link'}.</p>
    </section>
  );
}
