/** The operator's sign-in: a one-time link from `coffer admin login-link --operator`, or its token pasted. */
import { useEffect, useState } from 'preact/hooks';
import { Failure } from '../ui/alerts.js';
import { call, setCsrf, type SessionData } from './api.js';
import { valueOf } from '../ui/forms.js';

export function Login({ onSignedIn }: { onSignedIn: (session: SessionData) => void }) {
  const [error, setError] = useState<unknown>(null);
  const [token, setToken] = useState('');
  const submit = async (value: string) => {
    setError(null);
    try {
      const session = await call('POST /session', { body: { loginToken: value.trim() } });
      setCsrf(session.csrfToken);
      onSignedIn(session);
    } catch (failure) {
      setError(failure);
    }
  };
  useEffect(() => {
    const fromHash = new URLSearchParams(location.hash.slice(1)).get('token');
    if (fromHash) {
      // Out of the address bar and the history at once: the link works once anyway.
      history.replaceState(null, '', location.pathname);
      void submit(fromHash);
    }
  }, []);
  return (
    <section class="narrow">
      <h1>Operator sign-in</h1>
      <p class="lede">
        Open a link from <code>coffer admin login-link --operator</code> on the server, or paste its token here. Each link works once.
      </p>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          void submit(token);
        }}
      >
        <label for="token">Sign-in token</label>
        <input id="token" class="mono" autocomplete="off" value={token} onInput={(e) => setToken(valueOf(e))} />
        <button type="submit">Sign in</button>
      </form>
      <Failure error={error} />
    </section>
  );
}
