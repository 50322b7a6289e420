/**
 * The operator's side (docs/operations.md#operator-console): every account in counts, bytes and times, the
 * changes an operator makes (plan, deletion grace, quota, revoking a key, an owner's login link), each recorded in the
 * account's audit trail with the operator as actor. It reads no vault, no sealed metadata, no wrapped key: what it
 * returns holds ids, plans, sizes, counts and times only. `coffer admin` and the operator console both use it.
 */
import { type AuditActor, type AuditEntry } from '../domain/audit.js';
import { isDeletionGrace } from '../domain/backups.js';
import { AppError } from '../domain/errors.js';
import type { Clock } from '../domain/clock.js';
import { atQuota, effectiveQuota, isOverdue, quotaWords, type PlanQuotas, type QuotaOverride } from '../domain/quotas.js';
import { PLANS, type Plan } from '../domain/plans.js';
import { keyLabelProblem, keyStatus } from '../domain/keys.js';
import type { Account, ApiKey } from '../domain/entities.js';
import type { Stores } from '../store/ports/stores.js';
import type { AccountUsageRow } from '../store/ports/usage.js';
import type { AuditTrail } from './audit.js';
import type { IssuedLoginLink, SessionService } from './sessions.js';
import { fleets } from './usage.js';

export interface AccountSummary {
  accountId: string;
  plan: Plan;
  createdAt: number;
  deletionGraceDays: number;
  readyBackups: number;
  graceBackups: number;
  uploadingBackups: number;
  storedBytes: number;
  lastReadyAt: number | null;
  overdue: boolean;
  activeKeys: number;
  /** The quota that applies (the account's own, else its plan's; a host account's: its owner's; null: none). */
  quotaBytes: number | null;
  /** Where it comes from: the plan's setting (COFFER_QUOTA_<PLAN>), the account's own, or its owner's (a host account). */
  quotaSource: 'plan' | 'account' | 'owner';
  /** The operator's name for the account (setLabel); null: none. */
  label: string | null;
  /** A host account: its owner (whose plan and quota it shares) and the name its owner gave it; else null. */
  ownerAccountId: string | null;
  hostLabel: string | null;
  /** An owner with host accounts: the fleet (the owner and its host accounts) against the owner's quota; else null. */
  fleet: FleetSummary | null;
}

export interface FleetSummary {
  accounts: number;
  storedBytes: number;
  backups: number;
  /** The fleet stores at or over the owner's quota. */
  atQuota: boolean;
}

export interface OperatorKey {
  keyId: string;
  scopes: string[];
  appendOnly: boolean;
  createdAt: number;
  expiresAt: number | null;
  revokedAt: number | null;
  status: ReturnType<typeof keyStatus>;
  /** The owner's name for the key; null: none. */
  label: string | null;
}

export interface Totals {
  plans: { plan: Plan; accounts: number; storedBytes: number }[];
  accounts: number;
  storedBytes: number;
  backupsLast24h: number;
  overdue: number;
}

/** How far back "backups created recently" looks in the operator's totals. */
const RECENT_WINDOW_MS = 24 * 3_600_000;

/** The counts of the usage port's rows an account summary uses (the store's one source of per-account numbers). */
type Counts = Pick<AccountUsageRow, 'backups' | 'graceBackups' | 'uploadingBackups' | 'storedBytes' | 'createdSince'>;

/** A host account's plan and quota are its owner's (one budget for the fleet): they are changed on the owner. */
export function refuseHostAccount(account: Account, what: 'plan' | 'quota'): void {
  if (!account.ownerAccountId) return;
  throw AppError.validation(
    [{ path: 'accountId', message: `is a host account of ${account.ownerAccountId}` }],
    `Account ${account.id} is a host account of ${account.ownerAccountId}: it is on its owner's plan and stores under its owner's quota. Change the ${what} of ${account.ownerAccountId}.`,
  );
}

export class OperatorService {
  constructor(
    private readonly ports: Pick<Stores, 'accounts' | 'usage' | 'keys'>,
    private readonly audit: AuditTrail,
    private readonly sessions: SessionService,
    private readonly clock: Clock,
    private readonly planQuotas: PlanQuotas = {},
  ) {}

  private summarize(account: Account, usage: Counts, keys: ApiKey[], now: number): AccountSummary {
    return {
      accountId: account.id,
      plan: account.plan,
      createdAt: account.createdAt,
      deletionGraceDays: account.deletionGraceDays ?? 0,
      readyBackups: usage.backups,
      graceBackups: usage.graceBackups,
      uploadingBackups: usage.uploadingBackups,
      storedBytes: usage.storedBytes,
      lastReadyAt: account.lastReadyCreatedAt,
      overdue: isOverdue(account.plan, account.lastReadyCreatedAt, account.createdAt, now),
      activeKeys: keys.filter((key) => key.accountId === account.id && keyStatus(key, now) === 'active').length,
      quotaBytes: effectiveQuota(account.plan, account.quotaOverride, this.planQuotas),
      quotaSource: account.quotaOverride === undefined ? 'plan' : 'account',
      label: account.operatorLabel ?? null,
      ownerAccountId: account.ownerAccountId ?? null,
      hostLabel: account.ownerAccountId ? (account.label ?? null) : null,
      fleet: null,
    };
  }

  /** Host accounts take their owner's quota; an owner with host accounts gets the fleet's total. */
  private withFleet(owner: AccountSummary, hosts: AccountSummary[]): AccountSummary[] {
    if (hosts.length === 0) return [owner];
    const members = [owner, ...hosts];
    const storedBytes = members.reduce((sum, row) => sum + row.storedBytes, 0);
    const fleet = {
      accounts: members.length,
      storedBytes,
      backups: members.reduce((sum, row) => sum + row.readyBackups, 0),
      atQuota: atQuota(owner.quotaBytes, storedBytes),
    };
    return [{ ...owner, fleet }, ...hosts.map((host) => ({ ...host, quotaBytes: owner.quotaBytes, quotaSource: 'owner' as const }))];
  }

  /** Every account with its usage, and the totals over them. */
  async overview(): Promise<{ accounts: AccountSummary[]; totals: Totals }> {
    const now = this.clock.now();
    const [accounts, usage, keys] = await Promise.all([
      this.ports.accounts.listAccounts(),
      this.ports.usage.usage(now, undefined, now - RECENT_WINDOW_MS),
      this.ports.keys.listApiKeys(),
    ]);
    const byAccount = new Map(usage.map((row) => [row.accountId, row]));
    const summaries = accounts.flatMap((account) => {
      const counts = byAccount.get(account.id);
      return counts ? [this.summarize(account, counts, keys, now)] : []; // an account made since the usage query
    });
    // Each owner followed by its host accounts, the owner carrying the fleet's total.
    const rows = fleets(summaries).flatMap(({ owner, hosts }) => this.withFleet(owner, hosts));
    const totals: Totals = {
      plans: PLANS.map((plan) => {
        const on = rows.filter((row) => row.plan === plan);
        return { plan, accounts: on.length, storedBytes: on.reduce((sum, row) => sum + row.storedBytes, 0) };
      }),
      accounts: rows.length,
      storedBytes: rows.reduce((sum, row) => sum + row.storedBytes, 0),
      backupsLast24h: usage.reduce((sum, row) => sum + row.createdSince, 0),
      overdue: rows.filter((row) => row.overdue).length,
    };
    return { accounts: rows, totals };
  }

  /**
   * One account: its summary, its keys (never a secret or hash), its audit trail, and whose it is: its owner's
   * summary for a host account, its host accounts' for an owner. Undefined when unknown.
   */
  async account(
    accountId: string,
  ): Promise<
    { summary: AccountSummary; keys: OperatorKey[]; audit: AuditEntry[]; owner: AccountSummary | null; hosts: AccountSummary[] } | undefined
  > {
    const account = await this.ports.accounts.getAccount(accountId);
    if (!account) return undefined;
    const now = this.clock.now();
    const [[own], keys, audit, hostAccounts] = await Promise.all([
      this.ports.usage.usage(now, accountId, now - RECENT_WINDOW_MS),
      this.ports.keys.listApiKeys(accountId),
      this.audit.list(accountId, 200),
      this.ports.accounts.listHostAccounts(accountId),
    ]);
    if (!own) return undefined;
    const ownerAccount = account.ownerAccountId ? await this.ports.accounts.getAccount(account.ownerAccountId) : undefined;
    const related = async (other: Account): Promise<AccountSummary | null> => {
      const [[counts], otherKeys] = await Promise.all([
        this.ports.usage.usage(now, other.id, now - RECENT_WINDOW_MS),
        this.ports.keys.listApiKeys(other.id),
      ]);
      return counts ? this.summarize(other, counts, otherKeys, now) : null;
    };
    const hosts = (await Promise.all(hostAccounts.map(related))).filter((row): row is AccountSummary => row !== null);
    return {
      summary: await this.inFleet(this.summarize(account, own, keys, now), now),
      owner: ownerAccount ? await related(ownerAccount) : null,
      hosts,
      keys: keys.map((key) => ({
        keyId: key.id,
        scopes: key.scopes,
        appendOnly: key.appendOnly,
        createdAt: key.createdAt,
        expiresAt: key.expiresAt,
        revokedAt: key.revokedAt,
        status: keyStatus(key, now),
        label: key.label ?? null,
      })),
      audit,
    };
  }

  /** One account's summary as the overview shows it: a host account with its owner's quota, an owner with its fleet. */
  private async inFleet(summary: AccountSummary, now: number): Promise<AccountSummary> {
    const ownerId = summary.ownerAccountId ?? summary.accountId;
    if (summary.ownerAccountId) {
      const owner = await this.ports.accounts.getAccount(ownerId);
      if (!owner) return summary;
      return { ...summary, quotaBytes: effectiveQuota(owner.plan, owner.quotaOverride, this.planQuotas), quotaSource: 'owner' };
    }
    const hosts = await this.ports.accounts.listHostAccounts(ownerId);
    if (hosts.length === 0) return summary;
    const inFleet = (await Promise.all([ownerId, ...hosts.map((host) => host.id)].map((id) => this.ports.usage.usage(now, id)))).flat();
    const storedBytes = inFleet.reduce((sum, row) => sum + row.storedBytes, 0);
    return {
      ...summary,
      fleet: {
        accounts: inFleet.length,
        storedBytes,
        backups: inFleet.reduce((sum, row) => sum + row.backups, 0),
        atQuota: atQuota(summary.quotaBytes, storedBytes),
      },
    };
  }

  /**
   * Changes the plan of an account and of its host accounts (they are on their owner's plan); audited when it changed.
   * Undefined when there is no such account; refused for a host account itself.
   */
  async setPlan(accountId: string, plan: Plan, actor: AuditActor): Promise<{ before: Plan } | undefined> {
    const before = await this.ports.accounts.getAccount(accountId);
    if (before) refuseHostAccount(before, 'plan');
    if (!before || !(await this.ports.accounts.setPlan(accountId, plan))) return undefined;
    if (before.plan !== plan) {
      await this.audit.record({ accountId, action: 'account.plan', actor, address: null, detail: `${before.plan} → ${plan}` });
    }
    return { before: before.plan };
  }

  /** Sets the deletion grace (days, 0 to the maximum); audited. Undefined when there is no such account. */
  async setDeletionGrace(accountId: string, days: number, actor: AuditActor): Promise<{ before: number } | undefined> {
    if (!isDeletionGrace(days)) throw new RangeError('deletion grace out of range');
    const before = await this.ports.accounts.getAccount(accountId);
    if (!before || !(await this.ports.accounts.setDeletionGrace(accountId, days))) return undefined;
    const detail = `${before.deletionGraceDays ?? 0} → ${days} days`;
    await this.audit.record({ accountId, action: 'account.deletion-grace', actor, address: null, detail });
    return { before: before.deletionGraceDays ?? 0 };
  }

  /**
   * Sets the account's own quota (bytes, or null: none), or with undefined returns it to its plan's; audited when it
   * changed (`coffer admin accounts set-quota` runs this too). It is the fleet's: it covers the account's host accounts
   * too. Undefined when there is no such account; refused for a host account itself.
   */
  async setQuota(accountId: string, quota: QuotaOverride, actor: AuditActor): Promise<{ before: QuotaOverride } | undefined> {
    if (quota !== undefined && quota !== null && !(Number.isSafeInteger(quota) && quota >= 0)) throw new RangeError('quota out of range');
    const before = await this.ports.accounts.getAccount(accountId);
    if (before) refuseHostAccount(before, 'quota');
    if (!before || !(await this.ports.accounts.setQuota(accountId, quota))) return undefined;
    if (before.quotaOverride !== quota) {
      const detail = `${quotaWords(before.quotaOverride)} → ${quotaWords(quota)}`;
      await this.audit.record({ accountId, action: 'account.quota', actor, address: null, detail });
    }
    return { before: before.quotaOverride };
  }

  /**
   * Names the account for operators (`coffer admin accounts set-label`, the operator console), or with null removes
   * the name; audited when it changed. The rules of a key's label (keyLabelProblem): a RangeError names what is wrong.
   * Undefined when there is no such account.
   */
  async setLabel(accountId: string, label: string | null, actor: AuditActor): Promise<{ before: string | null } | undefined> {
    const problem = label === null ? null : keyLabelProblem(label);
    if (problem !== null) throw new RangeError(problem);
    const before = await this.ports.accounts.getAccount(accountId);
    if (!before || !(await this.ports.accounts.setOperatorLabel(accountId, label))) return undefined;
    const previous = before.operatorLabel ?? null;
    if (previous !== label) {
      const words = (value: string | null) => (value === null ? 'none' : JSON.stringify(value));
      await this.audit.record({ accountId, action: 'account.label', actor, address: null, detail: `${words(previous)} → ${words(label)}` });
    }
    return { before: previous };
  }

  /** A one-time console link for the account's owner (the owners' rules: sessions.ts); audited, never its token. */
  async ownerLoginLink(accountId: string, actor: AuditActor, ttlMs?: number): Promise<IssuedLoginLink | undefined> {
    const issued = await this.sessions.createLoginLink(accountId, ttlMs);
    if (issued) await this.audit.record({ accountId, action: 'account.login-link', actor, address: null, target: issued.link.id });
    return issued;
  }
}
