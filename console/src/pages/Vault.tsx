/** Vault state: whether key material exists, its key-derivation parameters, and when it was created and rotated. */
import { formatBytes, When } from '../format.js';
import { BASE } from '../router.js';
import { useOverview } from './Plan.js';
import { VaultHistorySection } from './Retention.js';
import { Failure } from '../ui/alerts.js';

export function VaultPage() {
  const { overview, error } = useOverview();
  const vault = overview?.vault;
  return (
    <section>
      <h1 tabIndex={-1}>Vault</h1>
      <p class="lede">
        The vault is your master key, wrapped by a key derived from your passphrase. The server stores only the wrapped key and the
        parameters below; it cannot unwrap it.
      </p>
      <Failure error={error} />
      {!overview && !error && <p role="status">Loading…</p>}
      {vault && !vault.initialized && (
        <div class="empty">
          <p>
            <strong>Not initialized.</strong> Create your vault on your own machine: <code>coffer init</code>.
          </p>
        </div>
      )}
      {vault?.initialized && vault.kdf && (
        <dl class="facts">
          <dt>State</dt>
          <dd>
            <strong>Initialized</strong>
          </dd>
          <dt>Envelope</dt>
          <dd>{vault.cryptoVersion}</dd>
          <dt>Key derivation</dt>
          <dd>{vault.kdf.algorithm}</dd>
          <dt>Operations limit</dt>
          <dd>{vault.kdf.opslimit}</dd>
          <dt>Memory limit</dt>
          <dd>
            {formatBytes(vault.kdf.memlimit)} ({vault.kdf.memlimit.toLocaleString()} bytes)
          </dd>
          <dt>Salt</dt>
          <dd>{vault.kdf.saltBytes} random bytes</dd>
          <dt>Created</dt>
          <dd>
            <When at={vault.createdAt} empty="Before this was recorded" />
          </dd>
          <dt>Last rotation</dt>
          <dd>{vault.lastRotatedAt ? <When at={vault.lastRotatedAt} /> : 'Never rotated'}</dd>
        </dl>
      )}
      <VaultHistorySection onRestored={() => undefined} />
      <p class="help">
        Change your passphrase with <code>coffer passphrase</code>: it re-wraps the same master key, so every backup stays readable.{' '}
        <code>coffer rekey</code> adds a new master key for everything from then on; the backups list shows which key each backup uses.
      </p>
      {vault?.initialized && (
        <p class="help">
          Forgot the passphrase? <a href={`${BASE}/recover`}>Recover with your recovery kit</a> (<code>coffer kit</code> printed it).
        </p>
      )}
    </section>
  );
}
