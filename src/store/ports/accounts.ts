/** Accounts, their plans, labels, deletion grace and quota settings. */
import type { Account } from '../../domain/entities.js';
import type { Plan } from '../../domain/plans.js';

export interface AccountStore {
  /**
   * Stores a new account. A host account (ownerAccountId set) takes its owner's plan, read under the owner's row lock
   * in the same transaction, so a plan change of the owner made meanwhile reaches it too; the stored account is returned.
   */
  createAccount(account: Account): Promise<Account>;
  getAccount(id: string): Promise<Account | undefined>;
  listAccounts(): Promise<Account[]>;
  /** The host accounts linked to `ownerAccountId`, oldest first. */
  listHostAccounts(ownerAccountId: string): Promise<Account[]>;
  /**
   * Sets the account's plan and its host accounts' (one transaction, the owner's row locked first, so a host account
   * added meanwhile is on the new plan too); false when there is no such account.
   */
  setPlan(accountId: string, plan: Plan): Promise<boolean>;
  /** Sets (or with null clears) the operator's name for the account; false when there is no such account. */
  setOperatorLabel(accountId: string, label: string | null): Promise<boolean>;
  /** Sets the account's deletion grace (days); false when there is no such account. */
  setDeletionGrace(accountId: string, days: number): Promise<boolean>;
  /** Sets the account's own quota (bytes, or null: none), or with undefined returns it to its plan's; false: no such account. */
  setQuota(accountId: string, quota: number | null | undefined): Promise<boolean>;
}
