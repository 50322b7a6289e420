/**
 * The operator console (docs/operations.md#operator-console): every account in counts, bytes and times; an account's
 * plan, deletion grace, keys, audit trail and a sign-in link for its owner. Nothing here can decrypt anything: the API
 * it calls returns no file name, metadata, envelope or key material.
 */
import { render } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { Failure } from '../ui/alerts.js';
import { AccountPage } from './AccountPage.js';
import { Accounts } from './Accounts.js';
import { AdminError, call, setCsrf, type OverviewData, type SessionData } from './api.js';
import { Login } from './Login.js';
import { Link, navigate, usePath } from './router.js';
import { Totals } from './Totals.js';
import '../styles.css';
import './admin.css';

function Overview({ overview, error }: { overview: OverviewData | null; error: unknown }) {
  return (
    <>
      <h1>Operator console</h1>
      <p class="lede">Counts, sizes and times of every account. Nothing here can read a backup.</p>
      <Failure error={error} />
      {overview && (
        <>
          <Accounts data={overview} />
          <Totals data={overview} />
        </>
      )}
    </>
  );
}

function Header({ signedIn, signOut }: { signedIn: boolean; signOut: () => void }) {
  return (
    <header class="top">
      <Link to="/" class="brand">
        <img src="/console/favicon.svg" alt="" width="28" height="28" />
        <span>Coffer operator</span>
      </Link>
      {signedIn && (
        <button type="button" class="secondary signout" onClick={signOut}>
          Sign out
        </button>
      )}
    </header>
  );
}

function App() {
  const path = usePath();
  const [session, setSession] = useState<SessionData | null | undefined>(undefined);
  const [overview, setOverview] = useState<OverviewData | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (path === '/login') return setSession(null);
    call('GET /session').then(
      (s) => {
        setCsrf(s.csrfToken);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);
  useEffect(() => {
    if (!session || path !== '/') return;
    call('GET /overview').then(setOverview, (failure) => {
      if (failure instanceof AdminError && failure.status === 401) setSession(null);
      else setError(failure);
    });
  }, [session, path]);
  const signOut = async () => {
    await call('DELETE /session').catch(() => undefined);
    setSession(null);
    navigate('/login');
  };
  const account = /^\/accounts\/([^/]+)$/.exec(path)?.[1];
  return (
    <>
      <Header signedIn={!!session} signOut={signOut} />
      <main id="main">
        {session === undefined ? (
          <p class="muted">Loading…</p>
        ) : session === null ? (
          <Login
            onSignedIn={(s) => {
              setSession(s);
              navigate('/');
            }}
          />
        ) : account ? (
          <AccountPage id={decodeURIComponent(account)} />
        ) : (
          <Overview overview={overview} error={error} />
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
