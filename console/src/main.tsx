/** The Coffer console: the page shell, the session, and the routes. */
import { render, type ComponentChildren } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { ApiError, api, setCsrfToken, whenSignedOut, type SessionInfo } from './api.js';
import { AuditPage } from './pages/Audit.js';
import { BackupPage } from './pages/Backup.js';
import { BackupsPage } from './pages/Backups.js';
import { CliPage } from './pages/Cli.js';
import { DrillsPage } from './pages/Drills.js';
import { KeysPage } from './pages/Keys.js';
import { LoginPage } from './pages/Login.js';
import { PlanPage } from './pages/Plan.js';
import { RecoverPage } from './pages/Recover.js';
import { SelfTestPage } from './pages/SelfTest.js';
import { VaultPage } from './pages/Vault.js';
import { BASE, interceptLinks, navigate, usePath } from './router.js';
import './styles.css';

const NAV = [
  { path: '/', label: 'Backups' },
  { path: '/drills', label: 'Restore drills' },
  { path: '/plan', label: 'Plan' },
  { path: '/vault', label: 'Vault' },
  { path: '/keys', label: 'API keys' },
  { path: '/activity', label: 'Activity' },
  { path: '/cli', label: 'CLI' },
];

const PUBLIC = ['/login', '/cli', '/self-test'];

function Shell({
  session,
  path,
  onSignOut,
  children,
}: {
  session: SessionInfo | null;
  path: string;
  onSignOut: () => void;
  children: ComponentChildren;
}) {
  const active = (item: string) =>
    item === '/' ? path === '/' || path.startsWith('/backups') : path.startsWith(item) || (item === '/vault' && path === '/recover');
  return (
    <>
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href={`${BASE}`}>
          <img src={`${BASE}/favicon.svg`} alt="" width="28" height="28" />
          <span>Coffer</span>
        </a>
        {session && (
          <nav aria-label="Console">
            <ul>
              {NAV.map((item) => (
                <li key={item.path}>
                  <a href={`${BASE}${item.path === '/' ? '' : item.path}`} aria-current={active(item.path) ? 'page' : undefined}>
                    {item.label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
        )}
        {session && (
          <button type="button" class="secondary signout" onClick={onSignOut}>
            Sign out
          </button>
        )}
      </header>
      <main id="main">{children}</main>
      <footer class="foot">
        <p>
          Zero-knowledge: backups are decrypted only inside this page. Your passphrase and your files are never sent to the server.{' '}
          <a href={`${BASE}/self-test`}>Check this browser</a> · <a href="/api-docs">API reference</a>
        </p>
      </footer>
    </>
  );
}

function route(path: string, session: SessionInfo, onSignedIn: (s: SessionInfo) => void) {
  if (path === '/' || path === '/backups') return <BackupsPage />;
  const detail = /^\/backups\/([^/]+)$/.exec(path);
  if (detail) return <BackupPage id={decodeURIComponent(detail[1]!)} />;
  if (path === '/drills') return <DrillsPage />;
  if (path === '/plan') return <PlanPage />;
  if (path === '/vault') return <VaultPage />;
  if (path === '/recover') return <RecoverPage />;
  if (path === '/keys') return <KeysPage session={session} />;
  if (path === '/activity') return <AuditPage />;
  if (path === '/login') return <LoginPage onSignedIn={onSignedIn} />;
  return <NotFound />;
}

function NotFound() {
  return (
    <section>
      <h1 tabIndex={-1}>Page not found</h1>
      <p>
        There is no console page at this address. <a href={BASE}>Go to your backups</a>.
      </p>
    </section>
  );
}

function App() {
  const path = usePath();
  const [session, setSession] = useState<SessionInfo | null | undefined>(undefined);
  const [notice, setNotice] = useState<string | null>(null);

  const signedIn = (info: SessionInfo) => {
    setCsrfToken(info.csrfToken);
    setSession(info);
    setNotice(null);
  };

  useEffect(() => {
    whenSignedOut(() => {
      setCsrfToken(null);
      setSession(null);
      setNotice('Your session has ended. Sign in again to continue.');
    });
    api('GET /console/api/session', { quiet401: true }).then(signedIn, () => setSession(null));
  }, []);

  const signOut = async () => {
    try {
      await api('DELETE /console/api/session');
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 401) throw error;
    }
    setCsrfToken(null);
    setSession(null);
    setNotice('You are signed out. The session has ended on the server too.');
    navigate('/login');
  };

  useEffect(() => {
    document.title = `${titleOf(path)} · Coffer console`;
  }, [path]);

  if (session === undefined) {
    return (
      <Shell session={null} path={path} onSignOut={signOut}>
        <p role="status">Loading…</p>
      </Shell>
    );
  }
  let page;
  if (path === '/cli') page = <CliPage />;
  else if (path === '/self-test') page = <SelfTestPage />;
  else if (!session)
    page = (
      <LoginPage onSignedIn={(info) => (signedIn(info), navigate(path === '/login' ? '/' : path, { replace: true }))} notice={notice} />
    );
  else if (path === '/login') {
    queueMicrotask(() => navigate('/', { replace: true }));
    page = null;
  } else page = route(path, session, signedIn);
  return (
    <Shell session={PUBLIC.includes(path) && !session ? null : session} path={path} onSignOut={signOut}>
      {page}
    </Shell>
  );
}

function titleOf(path: string): string {
  if (path === '/' || path === '/backups') return 'Backups';
  if (path.startsWith('/backups/')) return 'Backup';
  const titles: Record<string, string> = {
    '/drills': 'Restore drills',
    '/plan': 'Plan',
    '/vault': 'Vault',
    '/recover': 'Recover',
    '/keys': 'API keys',
    '/activity': 'Activity',
    '/cli': 'CLI',
    '/self-test': 'Browser check',
    '/login': 'Sign in',
  };
  return titles[path] ?? 'Not found';
}

const root = document.getElementById('app')!;
interceptLinks(root);
render(<App />, root);
