/**
 * Sign in: a one-time link from `coffer admin login-link` (its token rides in the URL fragment, which browsers
 * never send to a server; the page posts it once and removes it from the address bar), or an API key that holds
 * all three permissions.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, api, type SessionInfo } from '../api.js';
import { valueOf } from '../ui/forms.js';

export function LoginPage({ onSignedIn, notice }: { onSignedIn: (session: SessionInfo) => void; notice?: string | null }) {
  const [error, setError] = useState<ApiError | null>(null);
  const [busy, setBusy] = useState(false);
  const [apiKey, setApiKey] = useState('');
  const tried = useRef<string | null>(null);

  const signIn = async (body: { loginToken: string } | { apiKey: string }) => {
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await api('POST /console/api/session', { body, quiet401: true }));
    } catch (caught) {
      setError(caught instanceof ApiError ? caught : new ApiError(0, 'unknown', String(caught), ''));
    } finally {
      setBusy(false);
    }
  };

  useEffect(() => {
    const consume = () => {
      const token = new URLSearchParams(location.hash.slice(1)).get('token');
      if (!token || tried.current === token) return;
      tried.current = token;
      // Out of the address bar and the history before anything else: a login link works once.
      history.replaceState(null, '', location.pathname);
      void signIn({ loginToken: token });
    };
    consume();
    // A link opened in a tab that already shows this page changes only the fragment.
    addEventListener('hashchange', consume);
    return () => removeEventListener('hashchange', consume);
  }, []);

  const linkRefused = error?.code === 'login_link_invalid';
  return (
    <section class="narrow">
      <h1 tabIndex={-1}>Sign in</h1>
      {notice && (
        <p class="notice" role="status">
          {notice}
        </p>
      )}
      {busy && <p role="status">Signing in…</p>}
      {error && (
        <div class="error" role="alert">
          <p>
            {linkRefused ? (
              <strong>This sign-in link cannot be used: it was already used, has expired, or is incomplete.</strong>
            ) : (
              <>
                <strong>Sign-in failed.</strong> {error.message}
              </>
            )}
          </p>
          {linkRefused ? (
            <p>
              Links work once and expire after a few minutes. Ask the operator for a new one:{' '}
              <code>coffer admin login-link &lt;accountId&gt;</code>
            </p>
          ) : error.code === 'authentication_required' ? (
            // The page below already says how to sign in: only what to check about this key.
            <p>Check that the whole key was pasted (it starts with cfk_), or ask the operator for a new one.</p>
          ) : (
            error.resolution && <p>{error.resolution}</p>
          )}
        </div>
      )}
      <p>
        Open the one-time link your operator gave you (<code>coffer admin login-link</code>), or sign in with an API key that holds all
        three permissions (read, write and restore).
      </p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (apiKey.trim()) void signIn({ apiKey: apiKey.trim() });
        }}
      >
        <label for="api-key">API key</label>
        <input
          id="api-key"
          name="api-key"
          type="password"
          autoComplete="off"
          spellcheck={false}
          placeholder="cfk_…"
          value={apiKey}
          onInput={(event) => setApiKey(valueOf(event))}
          aria-describedby="api-key-help"
          required
        />
        <p id="api-key-help" class="help">
          The key is sent once to open a session; the page does not keep it.
        </p>
        <button type="submit" disabled={busy}>
          Sign in
        </button>
      </form>
    </section>
  );
}
