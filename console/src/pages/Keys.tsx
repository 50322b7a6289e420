/**
 * API keys: create one with chosen permissions, expiry and (optionally) the append-only restriction (shown once),
 * add a backup host (an append-only key and the settings the host needs), list keys, revoke them. The parts are in
 * pages/keys/.
 */
import { useEffect, useState } from 'preact/hooks';
import { api, type KeyInfo, type SessionInfo } from '../api.js';
import { caughtText } from '../caught.js';
import { shortId } from '../format.js';
import { AddHost } from './keys/AddHost.js';
import { CreateKey } from './keys/CreateKey.js';
import { HostAccounts } from './keys/HostAccounts.js';
import { KeyList } from './keys/KeyList.js';
import { Failure } from '../ui/alerts.js';

export function KeysPage({ session }: { session: SessionInfo }) {
  const [keys, setKeys] = useState<KeyInfo[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [announcement, setAnnouncement] = useState('');
  const [hostsVersion, setHostsVersion] = useState(0);

  const load = () =>
    api('GET /console/api/keys').then(
      (body) => setKeys(body.keys),
      (caught: unknown) => setError(caughtText(caught)),
    );
  useEffect(() => void load(), []);

  const revoke = async (keyId: string) => {
    setError(null);
    try {
      await api('DELETE /console/api/keys/:id', { params: { id: keyId } });
      setAnnouncement(`Key ${shortId(keyId)} revoked.`);
      await load();
    } catch (caught) {
      setError(caughtText(caught));
    }
  };

  return (
    <section>
      <h1 tabIndex={-1}>API keys</h1>
      <p class="lede">Keys let the CLI and your scripts reach your backups. Give each device its own key, with only what it needs.</p>
      <p class="visually-hidden" role="status" aria-live="polite">
        {announcement}
      </p>
      <Failure error={error} />
      <section class="panel" aria-labelledby="create-title">
        <h2 id="create-title">Create a key</h2>
        <CreateKey setError={setError} onCreated={load} />
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
      {keys && <KeyList keys={keys} revoke={revoke} />}
      <p class="help">Signed in {session.signedInWith === 'api-key' ? 'with an API key' : 'with a one-time link'}.</p>
    </section>
  );
}
