/** `coffer admin accounts …`: create, change (plan, deletion grace, quota), add a host to, and list accounts. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { MAX_DELETION_GRACE_DAYS, isDeletionGrace } from '../../domain/backups.js';
import { AppError } from '../../domain/errors.js';
import { KEY_LABEL_MAX, keyLabelProblem } from '../../domain/keys.js';
import { PLANS } from '../../domain/plans.js';
import { effectiveQuota, parseQuota } from '../../domain/quotas.js';
import { iso, isoOrNull } from '../../domain/time.js';
import { formatBytes } from '../../domain/words.js';
import { CliError, emit, usageError } from '../output.js';
import { expiresIn, operator, plan, quoted, textTable, withServices } from './frame.js';

export function registerAccountCommands(admin: Command): void {
  const accounts = admin.command('accounts').description('manage accounts');
  registerCreate(accounts);
  registerSetPlan(accounts);
  registerSetDeletionGrace(accounts);
  registerSetQuota(accounts);
  registerAddHost(accounts);
  registerSetLabel(accounts);
  registerList(accounts);
}

/** `accounts create --plan <plan>`. */
function registerCreate(accounts: Command): void {
  accounts
    .command('create')
    .description('create an account')
    .requiredOption('--plan <plan>', `plan: ${PLANS.join(' | ')}`)
    .option('--json', 'print JSON')
    .action(async (opts: { plan: string; json?: boolean }) => {
      const chosen = plan(opts.plan);
      const account = await withServices(({ keys }) => keys.createAccount(chosen));
      emit(!!opts.json, { accountId: account.id, plan: account.plan }, () => `account ${account.id} (${account.plan})`);
    });
}

/** `accounts set-plan <accountId> <plan>`. */
function registerSetPlan(accounts: Command): void {
  accounts
    .command('set-plan <accountId> <plan>')
    .description("change an account's plan")
    .option('--json', 'print JSON')
    .action(async (accountId: string, planName: string, opts: { json?: boolean }) => {
      const chosen = plan(planName);
      const changed = await withServices(({ operator: service }) => service.setPlan(accountId, chosen, operator().actor));
      if (!changed) throw new CliError(`no account ${accountId}`);
      emit(!!opts.json, { accountId, plan: chosen }, () => `account ${accountId} is now on the ${chosen} plan`);
    });
}

/** `accounts set-deletion-grace <accountId> <days>`. */
function registerSetDeletionGrace(accounts: Command): void {
  accounts
    .command('set-deletion-grace <accountId> <days>')
    .description(`days a deleted backup (and a replaced vault envelope) stays restorable: 0 (delete at once) to ${MAX_DELETION_GRACE_DAYS}`)
    .option('--json', 'print JSON')
    .action(async (accountId: string, daysText: string, opts: { json?: boolean }) => {
      const days = /^\d{1,3}$/.test(daysText) ? Number(daysText) : NaN;
      if (!isDeletionGrace(days)) throw usageError(`days must be a whole number from 0 to ${MAX_DELETION_GRACE_DAYS}, got "${daysText}"`);
      const changed = await withServices(({ operator: service }) => service.setDeletionGrace(accountId, days, operator().actor));
      if (!changed) throw new CliError(`no account ${accountId}`);
      emit(!!opts.json, { accountId, deletionGraceDays: days }, () =>
        days === 0
          ? `account ${accountId}: deletes now remove backups at once`
          : `account ${accountId}: deleted backups and replaced vault envelopes stay restorable for ${days} day${days === 1 ? '' : 's'}`,
      );
    });
}

/** `accounts set-quota <accountId> <quota>`: bytes, none, or plan. */
function registerSetQuota(accounts: Command): void {
  accounts
    .command('set-quota <accountId> <quota>')
    .description("set an account's storage quota: bytes, none (no quota), or plan (its plan's, COFFER_QUOTA_<PLAN>)")
    .option('--json', 'print JSON')
    .action(async (accountId: string, quotaText: string, opts: { json?: boolean }) => {
      const quota = quotaText === 'plan' ? undefined : parseQuota(quotaText);
      if (quota === undefined && quotaText !== 'plan') {
        throw usageError(`quota must be a whole number of bytes, none or plan, got "${quotaText}"`);
      }
      const config = loadConfig();
      const changed = await withServices(async ({ stores, operator: service }) => {
        if (!(await service.setQuota(accountId, quota, operator().actor))) return undefined;
        const account = await stores.accounts.getAccount(accountId);
        return account ? effectiveQuota(account.plan, quota, config.planQuotas) : undefined;
      }, config);
      if (changed === undefined) throw new CliError(`no account ${accountId}`);
      const source = quota === undefined ? 'plan' : 'account';
      emit(
        !!opts.json,
        { accountId, quotaBytes: changed, quotaSource: source },
        () =>
          `account ${accountId}: ${changed === null ? 'no storage quota' : `storage quota ${formatBytes(changed)} (${changed} bytes)`}${source === 'plan' ? " (its plan's)" : ''}`,
      );
    });
}

/** `accounts add-host <ownerAccountId>`: a host account with a copy of the owner's vault and an append-only key. */
function registerAddHost(accounts: Command): void {
  accounts
    .command('add-host <ownerAccountId>')
    .description(
      "add a host account: its own schedule (the owner's plan), a copy of the owner's vault (same passphrase and recipient), " +
        'an append-only write-only key; the owner reads its backups',
    )
    .requiredOption('--label <name>', "the host's name, e.g. web (1-40 letters, digits, spaces, dots, dashes, underscores)")
    .option('--expires-in <duration>', "lifetime of the host's key, e.g. 365d (default: no expiry)")
    .option('--json', 'print JSON')
    .action(async (ownerAccountId: string, opts: { label: string; expiresIn?: string; json?: boolean }) => {
      const lifetime = opts.expiresIn === undefined ? null : expiresIn(opts.expiresIn);
      const issued = await withServices(async ({ keys }) => {
        try {
          return await keys.addHost(ownerAccountId, { label: opts.label, expiresInMs: lifetime, by: operator() });
        } catch (error) {
          if (!(error instanceof AppError)) throw error;
          if (error.code === 'validation_failed') {
            const issue = (error.details?.issues as { message: string }[] | undefined)?.[0];
            throw usageError(`--label ${issue?.message ?? 'is not valid'}`);
          }
          if (error.code === 'not_found') throw new CliError(`no account ${ownerAccountId}`);
          if (error.code === 'vault_not_initialized') {
            throw new CliError(`account ${ownerAccountId} has no vault yet: its owner runs coffer init first, then add the host`);
          }
          throw new CliError(error.message);
        }
      });
      const result = {
        accountId: issued.account.id,
        ownerAccountId,
        label: issued.account.label ?? opts.label,
        plan: issued.account.plan,
        keyId: issued.key.id,
        apiKey: issued.apiKey,
        scopes: issued.key.scopes,
        appendOnly: issued.key.appendOnly,
        expiresAt: isoOrNull(issued.key.expiresAt),
      };
      emit(!!opts.json, result, () =>
        [
          `API key for the host (shown once, store it now): ${result.apiKey}`,
          `host account ${result.accountId} ${quoted(result.label)} of account ${ownerAccountId} (${result.plan} plan: its own schedule)`,
          `key ${result.keyId}: backups:write, append-only; expires: ${result.expiresAt ?? 'never'}`,
          "The host account holds a copy of the owner's vault: give the host the owner's recipient (coffer recipient).",
          "The owner's keys list and restore its backups (coffer list, coffer restore <id>); the host cannot read any.",
        ].join('\n'),
      );
    });
}

/** `accounts set-label <accountId> <label>`: the operator's name for the account. */
function registerSetLabel(accounts: Command): void {
  accounts
    .command('set-label <accountId> <label>')
    .description(
      `name an account for operators, shown and searched in both consoles and these lists ("" removes it; at most ${KEY_LABEL_MAX} ` +
        "letters, digits, spaces and . _ - @ : / ( ) # + , ')",
    )
    .option('--json', 'print JSON')
    .action(async (accountId: string, labelText: string, opts: { json?: boolean }) => {
      const label = labelText.trim() === '' ? null : labelText;
      const problem = label === null ? null : keyLabelProblem(label);
      if (problem !== null) throw usageError(`label: ${problem}, got ${JSON.stringify(labelText)}; nothing was changed`);
      const changed = await withServices(({ operator: service }) => service.setLabel(accountId, label, operator().actor));
      if (!changed) throw new CliError(`no account ${accountId}`);
      emit(!!opts.json, { accountId, label }, () =>
        label === null ? `account ${accountId} has no label now` : `account ${accountId} is now labelled ${quoted(label)}`,
      );
    });
}

/** `accounts list [--search <text>]`. */
function registerList(accounts: Command): void {
  accounts
    .command('list')
    .description('list accounts: id, label, plan, created, and for a host account its owner')
    .option('--search <text>', "only accounts whose id, label, host name or owner's label holds this text (any case)")
    .option('--json', 'print JSON')
    .action(async (opts: { search?: string; json?: boolean }) => {
      const list = await withServices(({ stores }) => stores.accounts.listAccounts());
      const byId = new Map(list.map((a) => [a.id, a]));
      const wanted = opts.search?.trim().toLowerCase() ?? '';
      const found = list.filter(
        (a) =>
          wanted === '' ||
          [
            a.id,
            a.operatorLabel,
            a.ownerAccountId ? a.label : undefined,
            a.ownerAccountId,
            byId.get(a.ownerAccountId ?? '')?.operatorLabel,
          ].some((field) => field?.toLowerCase().includes(wanted)),
      );
      const rows = found.map((a) => ({
        accountId: a.id,
        label: a.operatorLabel ?? null,
        plan: a.plan,
        createdAt: iso(a.createdAt),
        ownerAccountId: a.ownerAccountId ?? null,
        hostLabel: a.ownerAccountId ? (a.label ?? null) : null,
      }));
      emit(!!opts.json, { accounts: rows }, () =>
        rows.length === 0
          ? wanted === ''
            ? 'no accounts'
            : `no account matches ${JSON.stringify(opts.search)}`
          : textTable(
              ['ACCOUNT', 'LABEL', 'PLAN', 'CREATED', 'HOST OF'],
              rows.map((r) => [
                r.accountId,
                r.label === null ? '' : quoted(r.label),
                r.plan,
                r.createdAt,
                r.ownerAccountId === null ? '' : `${quoted(r.hostLabel ?? '')} of ${r.ownerAccountId}`,
              ]),
            ),
      );
    });
}
