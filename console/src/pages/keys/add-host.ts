/**
 * What "Add a backup host" does: a write-only append-only key (no read, no restore), in this account or in a new host
 * account, and the settings the host needs. With the passphrase, the vault's recipient is derived first (in a worker;
 * the passphrase never leaves the browser), so the host backs up without ever holding the passphrase.
 */
import { useState } from 'preact/hooks';
import { HOST_LABEL } from '../../../../src/domain/keys.js';
import { api, type CreatedHostAccount } from '../../api.js';
import { caughtAdvice } from '../../caught.js';
import { deriveRecipientInWorker } from '../../recipient-protocol.js';
import { expiresInDays } from './choices.js';

export type HostState =
  | { phase: 'form' }
  | { phase: 'working'; step: string }
  | { phase: 'done'; keyId: string; settings: string; fingerprint: string | null; hostAccount: CreatedHostAccount | null };

/** The form's fields: whose schedule the host follows, its name for a host account of its own. */
export interface HostFields {
  passphrase: string;
  expiry: string;
  schedule: 'shared' | 'own';
  hostLabel: string;
}

/** A host's settings as shell lines (the values are quoted for a POSIX shell). */
function hostSettings(url: string, apiKey: string, recipient: string | null): string {
  const quote = (value: string) => `'${value.replace(/'/g, `'\\''`)}'`;
  return [
    `export COFFER_URL=${quote(url)}`,
    `export COFFER_API_KEY=${quote(apiKey)}`,
    ...(recipient ? [`export COFFER_RECIPIENT=${quote(recipient)}`] : []),
  ].join('\n');
}

/** The vault's recipient from the passphrase, or the text of why none was derived. */
async function recipientOf(passphrase: string): Promise<{ recipient: string; fingerprint: string } | string> {
  const derived = await deriveRecipientInWorker({ passphrase });
  if (derived.type !== 'error') return derived;
  return derived.wrongPassphrase
    ? 'That passphrase does not unlock the vault. No key was made.'
    : `The recipient could not be derived: ${derived.message}. No key was made.`;
}

export function useAddHost(onCreated: () => Promise<void>) {
  const [state, setState] = useState<HostState>({ phase: 'form' });
  const [fields, setFields] = useState<HostFields>({ passphrase: '', expiry: '365', schedule: 'shared', hostLabel: '' });
  const [error, setError] = useState<string | null>(null);
  const edit = (change: Partial<HostFields>) => setFields((now) => ({ ...now, ...change }));

  const submit = async (event: Event) => {
    event.preventDefault();
    setError(null);
    const { passphrase, schedule } = fields;
    const label = fields.hostLabel.trim();
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
      const derived = await recipientOf(passphrase);
      if (typeof derived === 'string') {
        setState({ phase: 'form' });
        setError(derived);
        return;
      }
      ({ recipient, fingerprint } = derived);
    }
    edit({ passphrase: '' });
    const expires = expiresInDays(fields.expiry);
    setState({
      phase: 'working',
      step: schedule === 'own' ? 'Making the host account and its append-only key…' : 'Making the append-only key…',
    });
    try {
      const about = await api('GET /console/api/about');
      const made =
        schedule === 'own'
          ? await api('POST /console/api/host-accounts', { body: { label, expiresInDays: expires } })
          : await api('POST /console/api/keys', { body: { scopes: ['backups:write'], expiresInDays: expires, appendOnly: true } });
      if (schedule === 'own') edit({ hostLabel: '' });
      const hostAccount = schedule === 'own' ? (made as CreatedHostAccount) : null;
      setState({
        phase: 'done',
        keyId: made.keyId,
        settings: hostSettings(about.publicUrl, made.apiKey, recipient),
        fingerprint,
        hostAccount,
      });
      await onCreated();
    } catch (caught) {
      setState({ phase: 'form' });
      setError(caughtAdvice(caught));
    }
  };
  return { state, fields, edit, error, submit, reset: () => setState({ phase: 'form' }) };
}
