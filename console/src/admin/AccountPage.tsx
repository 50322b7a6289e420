/** One account's page: what it is, its settings, its keys, its locked backups, a sign-in link for its owner, and its audit trail. */
import { useEffect, useState } from 'preact/hooks';
import { Failure, Notice } from '../ui/alerts.js';
import { call, type AccountData } from './api.js';
import { AccountAudit } from './AccountAudit.js';
import { AccountFacts } from './AccountFacts.js';
import { AccountKeys } from './AccountKeys.js';
import { AccountLocks } from './AccountLocks.js';
import { AccountSettings, formOf, type Act, type SettingsForm } from './AccountSettings.js';
import { OwnerLink } from './OwnerLink.js';
import { Link } from './router.js';

function Heading({ id, label }: { id: string; label: string | null | undefined }) {
  return (
    <h1>
      {label ? (
        <>
          {label} <span class="mono wrap muted account-id">{id}</span>
        </>
      ) : (
        <>
          Account <span class="mono wrap">{id}</span>
        </>
      )}
    </h1>
  );
}

export function AccountPage({ id }: { id: string }) {
  const [data, setData] = useState<AccountData | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [notice, setNotice] = useState('');
  // Set with the account, before the forms show.
  const [form, setForm] = useState<SettingsForm | null>(null);
  const show = (next: AccountData) => {
    setData(next);
    setForm(formOf(next.account));
  };
  useEffect(() => {
    call('GET /accounts/:id', { params: { id } }).then(show, setError);
  }, [id]);
  const act: Act = async (work, done) => {
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
        <Link to="/">← Accounts</Link>
      </p>
      <Heading id={id} label={data?.account.label} />
      <Failure error={error} />
      <Notice text={notice} />
      {data && form && (
        <>
          <AccountFacts data={data} />
          <AccountSettings
            id={id}
            accountId={data.account.accountId}
            form={form}
            edit={(change) => setForm({ ...form, ...change })}
            act={act}
          />
          <AccountKeys id={id} keys={data.keys} act={act} />
          <AccountLocks locked={data.locked} />
          <OwnerLink id={id} setError={setError} />
          <AccountAudit audit={data.audit} />
        </>
      )}
    </>
  );
}
