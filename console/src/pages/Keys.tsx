/** API keys: create one with chosen permissions and expiry (shown once), list them, revoke them. */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, SCOPES, api, type KeyInfo, type Scope, type SessionInfo } from '../api.js';
import { shortId, When } from '../format.js';

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

type Created = KeyInfo & { apiKey: string; expiryCapped: boolean };

function NewKey({ created, onDone }: { created: Created; onDone: () => void }) {
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
        <input id="new-key-value" ref={field} class="mono" readOnly value={created.apiKey} onFocus={(e) => (e.target as HTMLInputElement).select()} />
        <button type="button" class="secondary" onClick={copy}>
          Copy
        </button>
      </div>
      <p aria-live="polite" class="help">
        {copied ? (
          'Copied to the clipboard.'
        ) : (
          <>
            Permissions: {created.scopes.join(', ')}. Expires: <When at={created.expiresAt} empty="never" />.
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
  const [created, setCreated] = useState<Created | null>(null);
  const [confirm, setConfirm] = useState<string | null>(null);
  const [announcement, setAnnouncement] = useState('');

  const load = () =>
    api<{ keys: KeyInfo[] }>('GET', '/console/api/keys').then(
      (body) => setKeys(body.keys),
      (caught: unknown) => setError(caught instanceof ApiError ? caught.message : String(caught)),
    );
  useEffect(() => void load(), []);

  const create = async (event: Event) => {
    event.preventDefault();
    setError(null);
    try {
      const key = await api<Created>('POST', '/console/api/keys', {
        scopes: SCOPES.filter((scope) => scopes.has(scope)),
        expiresInDays: expiry === 'never' ? null : Number(expiry),
      });
      setCreated(key);
      await load();
    } catch (caught) {
      setError(caught instanceof ApiError ? `${caught.message} ${caught.resolution}` : String(caught));
    }
  };

  const revoke = async (keyId: string) => {
    setError(null);
    try {
      await api('DELETE', `/console/api/keys/${encodeURIComponent(keyId)}`);
      setConfirm(null);
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
        {created ? (
          <NewKey created={created} onDone={() => setCreated(null)} />
        ) : (
          <form onSubmit={create}>
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

      <h2>Your keys</h2>
      {!keys && !error && <p role="status">Loading keys…</p>}
      {keys && (
        <table class="cards" aria-label="API keys">
          <thead>
            <tr>
              <th scope="col">Key</th>
              <th scope="col">Permissions</th>
              <th scope="col">Created</th>
              <th scope="col">Expires</th>
              <th scope="col">Status</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {keys.map((key) => (
              <tr key={key.keyId} data-key-id={key.keyId}>
                <td data-label="Key">
                  <span class="mono" title={key.keyId}>
                    {shortId(key.keyId)}
                  </span>
                  {key.usedByThisSession && <span class="muted"> (this session)</span>}
                </td>
                <td data-label="Permissions">{key.scopes.map((s) => s.replace('backups:', '')).join(', ')}</td>
                <td data-label="Created">
                  <When at={key.createdAt} />
                </td>
                <td data-label="Expires">
                  <When at={key.expiresAt} empty="Never" />
                </td>
                <td data-label="Status">
                  <span class={`badge key-${key.status}`}>{key.status}</span>
                </td>
                <td data-label="Actions">
                  {key.status === 'active' &&
                    (confirm === key.keyId ? (
                      <span class="confirm" role="group" aria-label={`Confirm revoking key ${shortId(key.keyId)}`}>
                        <button type="button" class="danger" onClick={() => revoke(key.keyId)}>
                          Revoke now
                        </button>
                        <button type="button" class="secondary" onClick={() => setConfirm(null)}>
                          Cancel
                        </button>
                        {key.usedByThisSession && <span class="help">This signs you out.</span>}
                      </span>
                    ) : (
                      <button type="button" class="secondary" onClick={() => setConfirm(key.keyId)} aria-label={`Revoke key ${shortId(key.keyId)}`}>
                        Revoke…
                      </button>
                    ))}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <p class="help">Signed in {session.signedInWith === 'api-key' ? 'with an API key' : 'with a one-time link'}.</p>
    </section>
  );
}
