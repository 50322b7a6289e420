/**
 * Quotas and usage (docs/api-rules.md#quota): what an account's fleet stores against its quota, the reservation of an
 * upload's bytes, the refusals, and setting an account's own quota.
 */
import type { Clock } from '../domain/clock.js';
import type { Account } from '../domain/entities.js';
import { AppError } from '../domain/errors.js';
import type { Plan } from '../domain/plans.js';
import { atQuota, effectiveQuota, type PlanQuotas, type Quota } from '../domain/quotas.js';
import type { Stores } from '../store/ports/stores.js';
import type { ReserveResult, UploadReservation } from '../store/ports/usage.js';
import { refuseHostAccount } from './operator.js';
import { usageReport, type UsageReport } from './usage.js';

export class QuotaService {
  /** Refusals for the quota since start, by where (for /metrics). */
  readonly quotaRefusals = { create: 0, upload: 0 };

  constructor(
    private readonly ports: Pick<Stores, 'accounts' | 'usage'>,
    private readonly clock: Clock,
    /** Each plan's storage quota (absent: none); an account's own quota replaces it. */
    private readonly planQuotas: PlanQuotas = {},
    /** COFFER_DRILL_MAX_AGE, for the usage report's stale drills. */
    private readonly drillMaxAgeMs?: number,
  ) {}

  /** The quota an account stores under by itself: its own, else its plan's. */
  quotaOf(account: { plan: Plan; quotaOverride?: number | null }): Quota {
    return effectiveQuota(account.plan, account.quotaOverride, this.planQuotas);
  }

  /** Every account's storage and freshness, and the totals (src/services/usage.ts). */
  usage(): Promise<UsageReport> {
    return usageReport(this.ports.usage, this.clock.now(), this.planQuotas, this.drillMaxAgeMs);
  }

  /**
   * The quota the account stores under and what counts against it now: its fleet's (an owner's quota covers the owner
   * and every host account it made); undefined when there is no such account.
   */
  async quota(accountId: string): Promise<{ quota: Quota; usage: number } | undefined> {
    const fleet = await this.fleetQuota(accountId);
    return fleet && { quota: fleet.quota, usage: fleet.usage };
  }

  /** quota(), and how many accounts share it (the owner and its host accounts). */
  private async fleetQuota(accountId: string): Promise<{ quota: Quota; usage: number; accounts: number } | undefined> {
    const fleet = await this.ports.usage.fleetUsage(this.clock.now(), accountId);
    return fleet && { quota: this.quotaOf(fleet.owner), usage: fleet.storedBytes, accounts: fleet.accounts };
  }

  /** Refuses a new backup (409 quota_exceeded) while the account's fleet is at its quota. */
  async refuseCreateAtQuota(accountId: string): Promise<void> {
    // Usage is summed only for a fleet that has a quota (the owner's row is a cached read; the sums are not).
    const account = await this.ports.accounts.getAccount(accountId);
    const owner = account?.ownerAccountId ? await this.ports.accounts.getAccount(account.ownerAccountId) : account;
    const status = owner && this.quotaOf(owner) !== null ? await this.fleetQuota(accountId) : undefined;
    if (status && status.quota !== null && atQuota(status.quota, status.usage)) {
      throw this.quotaRefused('create', status.quota, status.usage, undefined, status.accounts);
    }
  }

  /**
   * Reserves an upload's bytes against its fleet's quota before any is stored (usage port: reserveUpload), `size`
   * deciding how many from the quota and usage.
   */
  reserveUpload(reservation: UploadReservation, size: (quota: Quota, usage: number) => number | null): Promise<ReserveResult> {
    return this.ports.usage.reserveUpload(reservation, this.clock.now(), size, (account: Account) => this.quotaOf(account));
  }

  /** Ends an upload's reservation. */
  releaseUpload(reservationId: string): Promise<void> {
    return this.ports.usage.releaseUpload(reservationId);
  }

  /** Sets an account's own quota (bytes, or null: none), or with undefined returns it to its plan's. */
  async setQuota(accountId: string, quota: Quota | undefined): Promise<void> {
    if (quota !== undefined && quota !== null && !(Number.isSafeInteger(quota) && quota >= 0)) {
      throw AppError.validation([{ path: 'quota', message: 'must be a whole number of bytes, or none' }]);
    }
    const account = await this.ports.accounts.getAccount(accountId);
    if (account) refuseHostAccount(account, 'quota');
    if (!(await this.ports.accounts.setQuota(accountId, quota))) throw new AppError('not_found', `No account ${accountId}.`);
  }

  /** The refusal of a create (409) or an upload (413) by the quota, counted for /metrics (the blob host's too). */
  quotaRefused(where: 'create' | 'upload', quota: number, usage: number, declared?: number, fleetAccounts = 1): AppError {
    this.quotaRefusals[where] += 1;
    const details = { quota, usage, ...(declared === undefined ? {} : { uploadBytes: declared }) };
    const stores =
      fleetAccounts > 1
        ? `The owner account and its ${fleetAccounts - 1} host account${fleetAccounts === 2 ? '' : 's'} store ${usage} bytes together; their quota is ${quota} bytes.`
        : `The account stores ${usage} bytes; its quota is ${quota} bytes.`;
    return where === 'create'
      ? new AppError('quota_exceeded', stores, details)
      : new AppError(
          'upload_exceeds_quota',
          `This upload does not fit in the quota: ${Math.max(0, quota - usage)} of ${quota} bytes are left.`,
          details,
        );
  }
}
