/**
 * The operator console (docs/operations.md#operator-console): every account in counts, bytes and times; an account's
 * plan, deletion grace, keys, audit trail and a sign-in link for its owner. Nothing here can decrypt anything: the API
 * it calls returns no file name, metadata, envelope or key material.
 */
import { render } from 'preact';
import { useEffect, useMemo, useState } from 'preact/hooks';
import {
  AdminError,
  bytes,
  call,
  setCsrf,
  when,
  type AccountData,
  type OverviewData,
  type OwnerLinkData,
  type Plan,
  type SessionData,
} from './api.js';
import { CardTable } from '../card-table.js';
import { ConfirmAction } from '../confirm.js';
import '../styles.css';
import './admin.css';

const BASE = '/admin';
const PLANS = ['free', 'plus', 'pro'] as const;
type Row = OverviewData['accounts'][number];
type SortKey = 'overdue' | 'accountId' | 'label' | 'plan' | 'backups' | 'storedBytes' | 'lastReadyAt' | 'keys';

function usePath(): [string, (to: string) => void] {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const onPop = () => setPath(location.pathname);
    addEventListener('popstate', onPop);
    return () => removeEventListener('popstate', onPop);
  }, []);
  const go = (to: string) => {
    history.pushState(null, '', to);
    setPath(to);
    scrollTo(0, 0);
  };
  return [path, go];
}

function Failure({ error }: { error: unknown }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error instanceof Error ? error.message : String(error)}
    </p>
  );
}

function Login({ onSignedIn }: { onSignedIn: (session: SessionData) => void }) {
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
        <input id="token" class="mono" autocomplete="off" value={token} onInput={(e) => setToken((e.target as HTMLInputElement).value)} />
        <button type="submit">Sign in</button>
      </form>
      <Failure error={error} />
    </section>
  );
}

function Totals({ data }: { data: OverviewData }) {
  const { totals, server } = data;
  return (
    <section class="panel" aria-labelledby="totals">
      <h2 id="totals">Totals</h2>
      <dl class="facts">
        <dt>Accounts</dt>
        <dd>{totals.accounts}</dd>
        <dt>Stored</dt>
        <dd>{bytes(totals.storedBytes)}</dd>
        <dt>Backups, last 24 h</dt>
        <dd>{totals.backupsLast24h}</dd>
        <dt>Overdue</dt>
        <dd data-testid="total-overdue">{totals.overdue}</dd>
      </dl>
      <CardTable
        rows={totals.plans}
        row={(p) => ({ key: p.plan })}
        columns={[
          { header: 'Plan', cell: (p) => p.plan },
          { header: 'Accounts', cell: (p) => p.accounts },
          { header: 'Stored', cell: (p) => bytes(p.storedBytes) },
        ]}
      />
      <dl class="facts">
        <dt>Server</dt>
        <dd>Coffer {server.version}</dd>
        <dt>Database</dt>
        <dd>{server.database === 'postgres' ? 'PostgreSQL' : 'SQLite'}</dd>
        <dt>Blob store</dt>
        <dd>{server.blobStore === 's3' ? 'S3' : 'file system'}</dd>
        <dt>Migrations</dt>
        <dd>
          {server.migrations.length} applied, last <span class="mono">{server.migrations.at(-1) ?? 'none'}</span>
        </dd>
      </dl>
    </section>
  );
}

function compare(a: Row, b: Row, key: SortKey): number {
  switch (key) {
    case 'overdue':
      return Number(b.overdue) - Number(a.overdue) || (a.lastReadyAt ?? '').localeCompare(b.lastReadyAt ?? '');
    case 'label':
      // Named accounts first, by name.
      return a.label === null ? (b.label === null ? 0 : 1) : b.label === null ? -1 : a.label.localeCompare(b.label);
    case 'accountId':
    case 'plan':
      return a[key].localeCompare(b[key]);
    case 'lastReadyAt':
      return (b.lastReadyAt ?? '').localeCompare(a.lastReadyAt ?? '');
    default:
      return b[key] - a[key];
  }
}

/** The account as an operator knows it: its label (else its id), and for a host account whose host it is. */
function AccountName({
  row,
  owner,
  open,
}: {
  row: Row;
  owner: { accountId: string; label: string | null } | undefined;
  open: (id: string) => void;
}) {
  const link = (id: string, text: string, mono: boolean) => (
    <a
      class={mono ? 'mono' : undefined}
      href={`${BASE}/accounts/${id}`}
      onClick={(e) => {
        e.preventDefault();
        open(id);
      }}
    >
      {text}
    </a>
  );
  return (
    <>
      {row.label ? (
        <>
          {link(row.accountId, row.label, false)} <span class="mono muted">{row.accountId}</span>
        </>
      ) : (
        link(row.accountId, row.accountId, true)
      )}
      {row.ownerAccountId && (
        <span class="host-of" data-testid="host-of">
          {' '}
          host “{row.hostLabel}” of {link(row.ownerAccountId, owner?.label ?? row.ownerAccountId, !owner?.label)}
        </span>
      )}
    </>
  );
}

/** What the search box finds: an account by its label, id, host name, or its owner's label. */
function matches(row: Row, owner: Row | undefined, text: string): boolean {
  const wanted = text.trim().toLowerCase();
  if (!wanted) return true;
  return [row.accountId, row.label, row.hostLabel, row.ownerAccountId, owner?.label].some((field) => field?.toLowerCase().includes(wanted));
}

const quotaText = (r: Row) => (r.quotaBytes === null ? 'none' : bytes(r.quotaBytes)) + (r.quotaSource === 'account' ? ' (own)' : '');

function Accounts({ data, open }: { data: OverviewData; open: (id: string) => void }) {
  const [sort, setSort] = useState<SortKey>('overdue');
  const [filter, setFilter] = useState('');
  const [plan, setPlan] = useState('');
  const [overdueOnly, setOverdueOnly] = useState(false);
  const byId = useMemo(() => new Map(data.accounts.map((r) => [r.accountId, r])), [data]);
  const ownerOf = (r: Row) => (r.ownerAccountId ? byId.get(r.ownerAccountId) : undefined);
  // The accounts that match, each owner's host accounts right under it (a fleet sorts by its owner).
  const rows = useMemo(() => {
    const hostsOf = new Map<string, Row[]>();
    for (const r of data.accounts) {
      if (r.ownerAccountId !== null && byId.has(r.ownerAccountId))
        hostsOf.set(r.ownerAccountId, [...(hostsOf.get(r.ownerAccountId) ?? []), r]);
    }
    const fleetOf = (owner: Row) => [owner, ...(hostsOf.get(owner.accountId) ?? [])];
    const shown = (r: Row) => (!plan || r.plan === plan) && (!overdueOnly || r.overdue) && matches(r, ownerOf(r), filter);
    return data.accounts
      .filter((r) => r.ownerAccountId === null || !byId.has(r.ownerAccountId))
      .sort((a, b) => compare(a, b, sort) || a.accountId.localeCompare(b.accountId))
      .flatMap(fleetOf)
      .filter(shown);
  }, [data, byId, sort, filter, plan, overdueOnly]);
  return (
    <section class="panel" aria-labelledby="accounts">
      <h2 id="accounts">Accounts</h2>
      <div class="admin-filters">
        <label>
          Sort by
          <select value={sort} onChange={(e) => setSort((e.target as HTMLSelectElement).value as SortKey)}>
            <option value="overdue">Overdue first</option>
            <option value="storedBytes">Stored bytes</option>
            <option value="backups">Backups</option>
            <option value="lastReadyAt">Last READY</option>
            <option value="keys">Keys</option>
            <option value="plan">Plan</option>
            <option value="label">Label</option>
            <option value="accountId">Account id</option>
          </select>
        </label>
        <label>
          Plan
          <select value={plan} onChange={(e) => setPlan((e.target as HTMLSelectElement).value)}>
            <option value="">All</option>
            {PLANS.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Search label or id
          <input type="search" value={filter} onInput={(e) => setFilter((e.target as HTMLInputElement).value)} />
        </label>
        <label class="check">
          <input type="checkbox" checked={overdueOnly} onChange={(e) => setOverdueOnly((e.target as HTMLInputElement).checked)} />
          Overdue only
        </label>
      </div>
      {rows.length === 0 ? (
        <p class="empty">No accounts match.</p>
      ) : (
        <CardTable
          testId="accounts"
          rows={rows}
          row={(r) => ({
            key: r.accountId,
            'data-account': r.accountId,
            ...(r.ownerAccountId === null ? {} : { 'data-owner': r.ownerAccountId }),
          })}
          columns={[
            { header: 'Account', class: 'wrap', cell: (r) => <AccountName row={r} owner={ownerOf(r)} open={open} /> },
            { header: 'Plan', cell: (r) => r.plan },
            {
              header: 'Backups',
              cell: (r) => (
                <>
                  {r.backups}
                  {r.graceBackups > 0 && <span class="muted"> (+{r.graceBackups} in grace)</span>}
                </>
              ),
            },
            {
              header: 'Stored',
              cell: (r) => (
                <>
                  {bytes(r.storedBytes)}
                  {r.fleet && (
                    <span class="fleet-total" data-testid="fleet-total">
                      {' '}
                      (with its {r.fleet.accounts - 1} host account{r.fleet.accounts === 2 ? '' : 's'}: {bytes(r.fleet.storedBytes)})
                    </span>
                  )}
                </>
              ),
            },
            {
              header: 'Quota',
              cell: (r) =>
                r.quotaSource === 'owner' ? (
                  <span class="muted">the owner’s</span>
                ) : (
                  <>
                    {quotaText(r)}
                    {(r.fleet?.atQuota ?? (r.quotaBytes !== null && r.storedBytes >= r.quotaBytes)) && (
                      <span class="badge audit-refused"> at quota</span>
                    )}
                  </>
                ),
            },
            { header: 'Last READY', cell: (r) => when(r.lastReadyAt) },
            { header: 'Overdue', cell: (r) => (r.overdue ? <span class="badge audit-refused">overdue</span> : 'no') },
            { header: 'Keys', cell: (r) => r.keys },
          ]}
        />
      )}
    </section>
  );
}

/** Another account on an account's page (its owner, its hosts): its label and id, a link to it. */
function Related({ row }: { row: Row }) {
  return (
    <a href={`${BASE}/accounts/${row.accountId}`}>
      {row.label && <>{row.label} </>}
      <span class="mono">{row.accountId}</span>
    </a>
  );
}

function AccountPage({ id, back }: { id: string; back: () => void }) {
  const [data, setData] = useState<AccountData | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState('');
  // Set with the account, before the form shows.
  const [plan, setPlan] = useState<Plan>('free');
  const [grace, setGrace] = useState('');
  const [quotaMode, setQuotaMode] = useState<'plan' | 'none' | 'bytes'>('plan');
  const [quotaBytes, setQuotaBytes] = useState('');
  const [link, setLink] = useState<OwnerLinkData | null>(null);
  const [label, setLabel] = useState('');
  const show = (next: AccountData) => {
    setData(next);
    setLabel(next.account.label ?? '');
    setPlan(next.account.plan);
    setGrace(String(next.account.deletionGraceDays));
    const own = next.account.quotaSource === 'account';
    setQuotaMode(!own ? 'plan' : next.account.quotaBytes === null ? 'none' : 'bytes');
    setQuotaBytes(next.account.quotaBytes === null ? '' : String(next.account.quotaBytes));
  };
  const quotaBody = (): { quota: number | null | 'plan' } => ({
    quota: quotaMode === 'plan' ? 'plan' : quotaMode === 'none' ? null : Number(quotaBytes),
  });
  const quotaDone = () =>
    quotaMode === 'plan'
      ? "The quota now follows the plan's."
      : quotaMode === 'none'
        ? 'The account has no quota now.'
        : `The quota is now ${bytes(Number(quotaBytes))}.`;
  useEffect(() => {
    call('GET /accounts/:id', { params: { id } }).then(show, setError);
  }, [id]);
  const act = async (work: () => Promise<AccountData>, done: string) => {
    setError(null);
    setNotice('');
    try {
      show(await work());
      setNotice(done);
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <>
      <p class="crumbs">
        <a
          href={BASE}
          onClick={(e) => {
            e.preventDefault();
            back();
          }}
        >
          ← Accounts
        </a>
      </p>
      <h1>
        {data?.account.label ? (
          <>
            {data.account.label} <span class="mono wrap muted account-id">{id}</span>
          </>
        ) : (
          <>
            Account <span class="mono wrap">{id}</span>
          </>
        )}
      </h1>
      <Failure error={error} />
      {notice && (
        <p class="success" role="status">
          {notice}
        </p>
      )}
      {data && (
        <>
          <section class="panel">
            <dl class="facts">
              <dt>Label</dt>
              <dd data-testid="label">{data.account.label ?? <span class="muted">none</span>}</dd>
              {data.owner && (
                <>
                  <dt>Host account of</dt>
                  <dd data-testid="owner">
                    <Related row={data.owner} />{' '}
                    <span class="muted">
                      (its owner named this host “{data.account.hostLabel}”; on its owner’s plan, storing under its owner’s quota: change
                      both on the owner)
                    </span>
                  </dd>
                </>
              )}
              {data.hosts.length > 0 && (
                <>
                  <dt>Host accounts</dt>
                  <dd data-testid="hosts">
                    <ul class="plain">
                      {data.hosts.map((host) => (
                        <li key={host.accountId}>
                          “{host.hostLabel}”: <Related row={host} />
                        </li>
                      ))}
                    </ul>
                  </dd>
                </>
              )}
              <dt>Plan</dt>
              <dd data-testid="plan">{data.account.plan}</dd>
              <dt>Backups</dt>
              <dd>
                {data.account.backups} READY, {data.account.graceBackups} in deletion grace, {data.account.uploadingBackups} uploading
              </dd>
              <dt>Stored</dt>
              <dd>
                {bytes(data.account.storedBytes)}
                {data.account.fleet && (
                  <span class="muted" data-testid="fleet-total">
                    {' '}
                    (with its {data.account.fleet.accounts - 1} host account{data.account.fleet.accounts === 2 ? '' : 's'}:{' '}
                    {bytes(data.account.fleet.storedBytes)}, against this account’s quota)
                  </span>
                )}
              </dd>
              <dt>Last READY</dt>
              <dd>{when(data.account.lastReadyAt)}</dd>
              <dt>Overdue</dt>
              <dd>{data.account.overdue ? 'yes' : 'no'}</dd>
              <dt>Created</dt>
              <dd>{when(data.account.createdAt)}</dd>
              <dt>Quota</dt>
              <dd data-testid="quota">
                {data.account.quotaBytes === null ? 'none' : bytes(data.account.quotaBytes)}
                <span class="muted">
                  {data.account.quotaSource === 'plan'
                    ? " (the plan's)"
                    : data.account.quotaSource === 'owner'
                      ? ' (its owner’s, shared with the owner’s other accounts)'
                      : ' (this account’s own)'}
                </span>
              </dd>
            </dl>
          </section>
          <section class="panel" aria-labelledby="change">
            <h2 id="change">Label, plan, deletion grace and quota</h2>
            <form
              class="admin-inline"
              onSubmit={(e) => {
                e.preventDefault();
                const next = label.trim() || null;
                void act(
                  () => call('PUT /accounts/:id/label', { params: { id }, body: { label: next } }),
                  next === null ? 'The account has no label now.' : `The label is now “${next}”.`,
                );
              }}
            >
              <label>
                Label
                <input type="text" maxLength={48} value={label} onInput={(e) => setLabel((e.target as HTMLInputElement).value)} />
              </label>
              <button type="submit">Set label</button>
            </form>
            <form
              class="admin-inline"
              onSubmit={(e) => {
                e.preventDefault();
                void act(() => call('PUT /accounts/:id/plan', { params: { id }, body: { plan } }), `The plan is now ${plan}.`);
              }}
            >
              <label>
                Plan
                <select value={plan} onChange={(e) => setPlan((e.target as HTMLSelectElement).value as Plan)}>
                  {PLANS.map((p) => (
                    <option key={p} value={p}>
                      {p}
                    </option>
                  ))}
                </select>
              </label>
              <button type="submit">Change plan</button>
            </form>
            <form
              class="admin-inline"
              onSubmit={(e) => {
                e.preventDefault();
                void act(
                  () => call('PUT /accounts/:id/deletion-grace', { params: { id }, body: { days: Number(grace) } }),
                  `The deletion grace is now ${grace} days.`,
                );
              }}
            >
              <label>
                Deletion grace (days)
                <input type="number" min="0" max="365" value={grace} onInput={(e) => setGrace((e.target as HTMLInputElement).value)} />
              </label>
              <button type="submit">Set grace</button>
            </form>
            <form
              class="admin-inline"
              onSubmit={(e) => {
                e.preventDefault();
                void act(() => call('PUT /accounts/:id/quota', { params: { id }, body: quotaBody() }), quotaDone());
              }}
            >
              <label>
                Quota
                <select
                  value={quotaMode}
                  onChange={(e) => setQuotaMode((e.target as HTMLSelectElement).value as 'plan' | 'none' | 'bytes')}
                >
                  <option value="plan">The plan's</option>
                  <option value="none">None</option>
                  <option value="bytes">Bytes</option>
                </select>
              </label>
              {quotaMode === 'bytes' && (
                <label>
                  Quota (bytes)
                  <input
                    type="number"
                    min="0"
                    step="1"
                    required
                    value={quotaBytes}
                    onInput={(e) => setQuotaBytes((e.target as HTMLInputElement).value)}
                  />
                </label>
              )}
              <button type="submit">Set quota</button>
            </form>
            <p class="help">
              Stored bytes count READY backups, backups in their deletion grace and uploads in progress. The label is your name for the
              account, searched in the accounts list (empty: none). Also{' '}
              <code>coffer admin accounts set-label {data.account.accountId} &lt;label&gt;</code> and{' '}
              <code>coffer admin accounts set-quota {data.account.accountId} &lt;bytes&gt;|none|plan</code>.
            </p>
          </section>
          <section class="panel" aria-labelledby="keys">
            <h2 id="keys">API keys</h2>
            {data.keys.length === 0 ? (
              <p class="empty">No keys.</p>
            ) : (
              <CardTable
                testId="keys"
                rows={data.keys}
                row={(k) => ({ key: k.keyId, 'data-key': k.keyId })}
                columns={[
                  {
                    header: 'Key',
                    cell: (k) => (
                      <>
                        {k.label && <strong class="key-label">{k.label} </strong>}
                        <span class="mono">{k.keyId}</span>
                      </>
                    ),
                  },
                  {
                    header: 'Scopes',
                    cell: (k) => (
                      <>
                        {k.scopes.join(', ')}
                        {k.appendOnly && ' (append-only)'}
                      </>
                    ),
                  },
                  { header: 'Status', cell: (k) => <span class={`badge key-${k.status}`}>{k.status}</span> },
                  { header: 'Created', cell: (k) => when(k.createdAt) },
                  {
                    header: 'Action',
                    hiddenHeader: true,
                    cell: (k) =>
                      k.status === 'active' && (
                        <ConfirmAction
                          ask="Revoke…"
                          askLabel={`Revoke key ${k.label ?? k.keyId}`}
                          confirm="Revoke now"
                          question={`Confirm revoking key ${k.label ?? k.keyId}`}
                          consequence="A revoked key never works again: the owner makes a new one."
                          onConfirm={() =>
                            act(
                              () => call('POST /accounts/:id/keys/:keyId/revoke', { params: { id, keyId: k.keyId } }),
                              `Key ${k.keyId} revoked.`,
                            )
                          }
                        />
                      ),
                  },
                ]}
              />
            )}
          </section>
          <section class="panel" aria-labelledby="owner-link">
            <h2 id="owner-link">Sign-in link for the owner</h2>
            <p class="help">A one-time link to the owners' console, valid 15 minutes. Give it to the owner only.</p>
            <button
              type="button"
              class="secondary"
              onClick={async () => {
                setError(null);
                try {
                  setLink(await call('POST /accounts/:id/login-link', { params: { id } }));
                } catch (failure) {
                  setError(failure);
                }
              }}
            >
              Make a sign-in link
            </button>
            {link && (
              <p class="copy-row">
                <input class="mono" readOnly value={link.url} aria-label="Owner sign-in link" />
                <span class="muted">until {when(link.expiresAt)}</span>
              </p>
            )}
          </section>
          <section class="panel" aria-labelledby="audit">
            <h2 id="audit">Audit trail</h2>
            {data.audit.length === 0 ? (
              <p class="empty">No recorded actions.</p>
            ) : (
              <CardTable
                testId="audit"
                rows={data.audit}
                row={(e) => ({ key: e.id })}
                columns={[
                  { header: 'When', cell: (e) => when(e.at) },
                  {
                    header: 'What',
                    cell: (e) => (
                      <>
                        {e.action}
                        {e.outcome === 'refused' && ' (refused)'}
                      </>
                    ),
                  },
                  {
                    header: 'Who',
                    cell: (e) => (
                      <>
                        {e.actor.kind}
                        {e.actor.id && <span class="mono"> {e.actor.id}</span>}
                        {e.address && <span class="muted"> from {e.address}</span>}
                      </>
                    ),
                  },
                  { header: 'Detail', class: 'wrap', cell: (e) => [e.target, e.detail].filter(Boolean).join(' · ') },
                ]}
              />
            )}
          </section>
        </>
      )}
    </>
  );
}

function App() {
  const [path, go] = usePath();
  const [session, setSession] = useState<SessionData | null | undefined>(undefined);
  const [overview, setOverview] = useState<OverviewData | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    if (path === `${BASE}/login`) return setSession(null);
    call('GET /session').then(
      (s) => {
        setCsrf(s.csrfToken);
        setSession(s);
      },
      () => setSession(null),
    );
  }, []);
  useEffect(() => {
    if (!session || path !== BASE) return;
    call('GET /overview').then(setOverview, (failure) => {
      if (failure instanceof AdminError && failure.status === 401) setSession(null);
      else setError(failure);
    });
  }, [session, path]);
  const account = /^\/admin\/accounts\/([^/]+)$/.exec(path)?.[1];
  return (
    <>
      <header class="top">
        <a
          class="brand"
          href={BASE}
          onClick={(e) => {
            e.preventDefault();
            go(BASE);
          }}
        >
          <img src="/console/favicon.svg" alt="" width="28" height="28" />
          <span>Coffer operator</span>
        </a>
        {session && (
          <button
            type="button"
            class="secondary signout"
            onClick={async () => {
              await call('DELETE /session').catch(() => undefined);
              setSession(null);
              go(`${BASE}/login`);
            }}
          >
            Sign out
          </button>
        )}
      </header>
      <main id="main">
        {session === undefined ? (
          <p class="muted">Loading…</p>
        ) : session === null ? (
          <Login
            onSignedIn={(s) => {
              setSession(s);
              go(BASE);
            }}
          />
        ) : account ? (
          <AccountPage id={decodeURIComponent(account)} back={() => go(BASE)} />
        ) : (
          <>
            <h1>Operator console</h1>
            <p class="lede">Counts, sizes and times of every account. Nothing here can read a backup.</p>
            <Failure error={error} />
            {overview && (
              <>
                <Accounts data={overview} open={(id) => go(`${BASE}/accounts/${id}`)} />
                <Totals data={overview} />
              </>
            )}
          </>
        )}
      </main>
    </>
  );
}

render(<App />, document.getElementById('app')!);
