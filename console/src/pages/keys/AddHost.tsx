/** "Add a backup host" (add-host.ts): the form, and once made, the settings to set on the host. */
import { useState } from 'preact/hooks';
import { shortId } from '../../format.js';
import { SecretField } from '../../secret-field.js';
import { useAddHost, type HostFields, type HostState } from './add-host.js';
import { ExpirySelect } from './choices.js';
import { Failure } from '../../ui/alerts.js';
import { valueOf } from '../../ui/forms.js';

/** Copies `text`; true when the clipboard took it. */
async function copyText(text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

function HostReady({ state, onDone }: { state: Extract<HostState, { phase: 'done' }>; onDone: () => void }) {
  const [copied, setCopied] = useState(false);
  return (
    <div class="success new-key" role="region" aria-labelledby="host-ready-title">
      <h3 id="host-ready-title">Set this on the host</h3>
      <p>
        <strong>Copy it now: the key is shown only this once.</strong> Key {shortId(state.keyId)} is write-only and append-only: it can add
        backups, never read, list, download, delete them, reset the account or change the vault.
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
      <button type="button" onClick={() => (onDone(), setCopied(false))}>
        I have stored it
      </button>
    </div>
  );
}

/** What a host key can and cannot do, and why a host that keeps its own schedule needs an account of its own. */
function HostHelp() {
  return (
    <>
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
    </>
  );
}

function ScheduleChoice({ schedule, choose }: { schedule: HostFields['schedule']; choose: (schedule: HostFields['schedule']) => void }) {
  const option = (value: HostFields['schedule'], name: string, about: string) => (
    <div class="check">
      <input
        type="radio"
        id={`host-schedule-${value}`}
        name="host-schedule"
        value={value}
        checked={schedule === value}
        onChange={() => choose(value)}
      />
      <label for={`host-schedule-${value}`}>
        {name} <span class="muted">{about}</span>
      </label>
    </div>
  );
  return (
    <fieldset>
      <legend>Schedule</legend>
      {option('shared', "This account's", 'a key of this account: the host waits while another backup of the account is recent')}
      {option('own', 'Its own', 'a host account on your plan with the same vault: your passphrase and recipient restore it')}
    </fieldset>
  );
}

export function AddHost({ onCreated }: { onCreated: () => Promise<void> }) {
  const { state, fields, edit, error, submit, reset } = useAddHost(onCreated);
  if (state.phase === 'done') return <HostReady state={state} onDone={reset} />;
  return (
    <form onSubmit={submit} aria-describedby="host-help">
      <HostHelp />
      <Failure error={error} />
      <ScheduleChoice schedule={fields.schedule} choose={(schedule) => edit({ schedule })} />
      {fields.schedule === 'own' && (
        <>
          <label for="host-label">Host name</label>
          <input
            id="host-label"
            type="text"
            maxLength={40}
            autoComplete="off"
            required
            value={fields.hostLabel}
            onInput={(event) => edit({ hostLabel: valueOf(event) })}
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
        value={fields.passphrase}
        onValue={(passphrase) => edit({ passphrase })}
        autoComplete="current-password"
      />
      <p class="help">With it, this page derives your vault's recipient so the host never needs the passphrase. It is not sent anywhere.</p>
      <label for="host-expiry">Lifetime of the host's key</label>
      <ExpirySelect id="host-expiry" value={fields.expiry} onValue={(expiry) => edit({ expiry })} />
      <button type="submit" disabled={state.phase === 'working'}>
        Add backup host
      </button>
      {state.phase === 'working' && <p role="status">{state.step}</p>}
    </form>
  );
}
