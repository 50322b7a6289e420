/** An account's label, plan, deletion grace and quota: one small form each, the values the account has until edited. */
import type { ComponentChildren } from 'preact';
import { bytes, call, type AccountData, type Plan } from './api.js';
import { valueOf } from '../ui/forms.js';
import { PlanOptions } from './PlanOptions.js';

type QuotaMode = 'plan' | 'none' | 'bytes';

/** The forms' values: set from the account each time the server answers with it, edited in between. */
export interface SettingsForm {
  label: string;
  plan: Plan;
  grace: string;
  quotaMode: QuotaMode;
  quotaBytes: string;
}

export function formOf(account: AccountData['account']): SettingsForm {
  const own = account.quotaSource === 'account';
  return {
    label: account.label ?? '',
    plan: account.plan,
    grace: String(account.deletionGraceDays),
    quotaMode: !own ? 'plan' : account.quotaBytes === null ? 'none' : 'bytes',
    quotaBytes: account.quotaBytes === null ? '' : String(account.quotaBytes),
  };
}

/** Runs a change on the account and says what it did (AccountPage). */
export type Act = (work: () => Promise<AccountData>, done: string) => Promise<void>;

interface FormProps {
  id: string;
  form: SettingsForm;
  edit: (change: Partial<SettingsForm>) => void;
  act: Act;
}

/** An inline form that submits without leaving the page. */
function Inline({ submit, children }: { submit: () => void; children: ComponentChildren }) {
  return (
    <form
      class="admin-inline"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      {children}
    </form>
  );
}

function LabelForm({ id, form, edit, act }: FormProps) {
  const submit = () => {
    const next = form.label.trim() || null;
    void act(
      () => call('PUT /accounts/:id/label', { params: { id }, body: { label: next } }),
      next === null ? 'The account has no label now.' : `The label is now “${next}”.`,
    );
  };
  return (
    <Inline submit={submit}>
      <label>
        Label
        <input type="text" maxLength={48} value={form.label} onInput={(e) => edit({ label: valueOf(e) })} />
      </label>
      <button type="submit">Set label</button>
    </Inline>
  );
}

function PlanForm({ id, form: { plan }, edit, act }: FormProps) {
  return (
    <Inline submit={() => void act(() => call('PUT /accounts/:id/plan', { params: { id }, body: { plan } }), `The plan is now ${plan}.`)}>
      <label>
        Plan
        <select value={plan} onChange={(e) => edit({ plan: valueOf(e) as Plan })}>
          <PlanOptions />
        </select>
      </label>
      <button type="submit">Change plan</button>
    </Inline>
  );
}

function GraceForm({ id, form: { grace }, edit, act }: FormProps) {
  const submit = () =>
    void act(
      () => call('PUT /accounts/:id/deletion-grace', { params: { id }, body: { days: Number(grace) } }),
      `The deletion grace is now ${grace} days.`,
    );
  return (
    <Inline submit={submit}>
      <label>
        Deletion grace (days)
        <input type="number" min="0" max="365" value={grace} onInput={(e) => edit({ grace: valueOf(e) })} />
      </label>
      <button type="submit">Set grace</button>
    </Inline>
  );
}

function QuotaForm({ id, form: { quotaMode, quotaBytes }, edit, act }: FormProps) {
  const quota = quotaMode === 'plan' ? 'plan' : quotaMode === 'none' ? null : Number(quotaBytes);
  const done =
    quotaMode === 'plan'
      ? "The quota now follows the plan's."
      : quotaMode === 'none'
        ? 'The account has no quota now.'
        : `The quota is now ${bytes(Number(quotaBytes))}.`;
  return (
    <Inline submit={() => void act(() => call('PUT /accounts/:id/quota', { params: { id }, body: { quota } }), done)}>
      <label>
        Quota
        <select value={quotaMode} onChange={(e) => edit({ quotaMode: valueOf(e) as QuotaMode })}>
          <option value="plan">The plan's</option>
          <option value="none">None</option>
          <option value="bytes">Bytes</option>
        </select>
      </label>
      {quotaMode === 'bytes' && (
        <label>
          Quota (bytes)
          <input type="number" min="0" step="1" required value={quotaBytes} onInput={(e) => edit({ quotaBytes: valueOf(e) })} />
        </label>
      )}
      <button type="submit">Set quota</button>
    </Inline>
  );
}

/** `accountId`: the account's id as the server spells it, for the equivalent commands. */
export function AccountSettings({ accountId, ...props }: FormProps & { accountId: string }) {
  return (
    <section class="panel" aria-labelledby="change">
      <h2 id="change">Label, plan, deletion grace and quota</h2>
      <LabelForm {...props} />
      <PlanForm {...props} />
      <GraceForm {...props} />
      <QuotaForm {...props} />
      <p class="help">
        Stored bytes count READY backups, backups in their deletion grace and uploads in progress. The label is your name for the account,
        searched in the accounts list (empty: none). Also <code>coffer admin accounts set-label {accountId} &lt;label&gt;</code> and{' '}
        <code>coffer admin accounts set-quota {accountId} &lt;bytes&gt;|none|plan</code>.
      </p>
    </section>
  );
}
