/**
 * Actions that cannot be undone ask for a fresh sign-in first (ConfirmSignIn), inside this session: useFreshAction
 * runs one and, when the server asks for it, shows the form and runs the action again after. Used by the deletion
 * grace (pages/Retention.tsx) and the key page (a key that can open the console).
 */
import { useState } from 'preact/hooks';
import { ApiError, api, setCsrfToken } from './api.js';
import { SecretField } from './secret-field.js';

export const asError = (caught: unknown) => (caught instanceof ApiError ? caught : new ApiError(0, 'unknown', String(caught), ''));

/** A sign-in link pasted whole, or only its token. */
const loginTokenOf = (text: string): string | null => /cfl_[A-Za-z0-9_-]{43}/.exec(text)?.[0] ?? null;

/** Confirms it is the owner: a new sign-in (link or all-scope key) for this account, then `onConfirmed`. */
export function ConfirmSignIn({ what, onConfirmed, onCancel }: { what: string; onConfirmed: () => void; onCancel: () => void }) {
  const [credential, setCredential] = useState('');
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: Event) => {
    event.preventDefault();
    const text = credential.trim();
    const token = loginTokenOf(text);
    setBusy(true);
    setError(null);
    try {
      const session = await api('POST /console/api/session/confirm', {
        body: token ? { loginToken: token } : { apiKey: text },
        quiet401: true,
      });
      setCsrfToken(session.csrfToken);
      setCredential('');
      onConfirmed();
    } catch (caught) {
      setError(asError(caught));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="panel confirm-sign-in" onSubmit={submit} aria-labelledby="confirm-title">
      <h3 id="confirm-title">Confirm with a fresh sign-in</h3>
      <p>
        To {what}, sign in again: paste a new sign-in link (<code>coffer admin login-link</code>) or an API key that holds all three
        permissions.
      </p>
      <SecretField
        id="confirm-credential"
        label="Sign-in link or API key"
        value={credential}
        onValue={setCredential}
        autoComplete="off"
        required
      />
      {error && (
        <p class="error" role="alert">
          {error.message} {error.resolution}
        </p>
      )}
      <div class="actions">
        <button type="submit" disabled={busy || credential.trim() === ''}>
          Confirm
        </button>
        <button type="button" class="secondary" onClick={onCancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** Runs `action`; when the server asks for a fresh sign-in, shows ConfirmSignIn and runs it again after. */
export function useFreshAction() {
  const [pending, setPending] = useState<{ what: string; run: () => Promise<void> } | null>(null);
  const attempt = async (what: string, run: () => Promise<void>) => {
    try {
      await run();
    } catch (caught) {
      if (caught instanceof ApiError && caught.code === 'reauthentication_required') {
        setPending({ what, run });
        return;
      }
      throw caught;
    }
  };
  const prompt = pending && (
    <ConfirmSignIn
      what={pending.what}
      onCancel={() => setPending(null)}
      onConfirmed={() => {
        const { run } = pending;
        setPending(null);
        void run().catch(() => undefined);
      }}
    />
  );
  return { attempt, prompt };
}
