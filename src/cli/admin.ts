/** `coffer admin …`: operator commands that talk to the configured database directly (README.md#operator-commands). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Command } from 'commander';
import { loadConfig, parseDuration } from '../config.js';
import { MAX_DELETION_GRACE_DAYS, isDeletionGrace } from '../domain/backups.js';
import { systemClock } from '../domain/clock.js';
import { AppError } from '../domain/errors.js';
import { KEY_LABEL_MAX, keyLabelProblem } from '../domain/keys.js';
import { PLANS, isPlan, type Plan } from '../domain/plans.js';
import { SCOPES, isScope, type Scope } from '../domain/scopes.js';
import { effectiveQuota, parseQuota, quotaWords } from '../domain/quotas.js';
import { iso, isoOrNull } from '../domain/time.js';
import type { UsageReport } from '../services/usage.js';
import { AuditTrail, operatorActor } from '../services/audit.js';
import { type ChangedBy, KeyService, keyView } from '../services/keys.js';
import { LOGIN_LINK_MAX_TTL_MS, LOGIN_LINK_TTL_MS, SessionService } from '../services/sessions.js';
import type { Store } from '../store/store.js';
import { CliError, emit, usageError } from './output.js';


function plan(value: string): Plan {
  if (!isPlan(value)) throw usageError(`unknown plan "${value}" (expected ${PLANS.join(', ')})`);
  return value;
}

function scopes(value: string): Scope[] {
  const list = value.split(',').map((s) => s.trim()).filter(Boolean);
  const unknown = list.filter((s) => !isScope(s));
  if (list.length === 0 || unknown.length > 0) {
    throw usageError(`unknown scope "${unknown[0] ?? value}" (expected a comma list of ${SCOPES.join(', ')})`);
  }
  return [...new Set(list)] as Scope[];
}

function expiresIn(value: string): number {
  const ms = parseDuration(value);
  if (ms === null || ms <= 0) throw usageError(`--expires-in expects a duration like 30d or 12h, got "${value}"`);
  return ms;
}

/** The operator as the audit trail names them: the OS user running `coffer admin`, no address. */
function operator(): ChangedBy {
  let user: string | undefined;
  try {
    user = os.userInfo().username;
  } catch {
    user = undefined;
  }
  return { actor: operatorActor(user), address: null };
}

async function withStore<T>(work: (store: Store, keys: KeyService) => Promise<T>, config = loadConfig()): Promise<T> {
  // Loaded on demand so that `coffer --help` and the client commands do not pay for the server's modules.
  const { openStore } = await import('../store/open.js');
  const store = await openStore(config);
  try {
    return await work(store, new KeyService(store, systemClock));
  } finally {
    await store.close();
  }
}

/** `coffer admin usage` as text: one line per account, overdue first, then the totals per plan. */
function usageTable(report: UsageReport): string {
  const rows = [...report.accounts].sort((a, b) => Number(b.overdue) - Number(a.overdue));
  const quota = (q: number | null) => (q === null ? '-' : String(q));
  const lines = [['ACCOUNT', 'PLAN', 'STORED', 'QUOTA', 'BACKUPS', 'LAST READY', 'OVERDUE']];
  for (const a of rows) {
    lines.push([a.accountId, a.plan, String(a.storedBytes), quota(a.quotaBytes), String(a.backups), a.lastReadyAt ?? 'never', a.overdue ? 'yes' : 'no']);
  }
  const widths = lines[0]!.map((_, i) => Math.max(...lines.map((l) => l[i]!.length)));
  const text = lines.map((l) => l.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd());
  const { totals } = report;
  text.push('', `total: ${totals.accounts} accounts, ${totals.storedBytes} bytes stored, ${totals.backups} backups, ${totals.overdue} overdue`);
  for (const [name, plan] of Object.entries(totals.plans)) {
    text.push(`  ${name}: ${plan.accounts} accounts, ${plan.storedBytes} bytes, ${plan.backups} backups, ${plan.overdue} overdue`);
  }
  return text.join('\n');
}

export function registerAdminCommands(program: Command): void {
  const admin = program.command('admin').description('operator commands (use the server database directly)');
  const accounts = admin.command('accounts').description('manage accounts');

  accounts
    .command('create')
    .description('create an account')
    .requiredOption('--plan <plan>', `plan: ${PLANS.join(' | ')}`)
    .option('--json', 'print JSON')
    .action(async (opts: { plan: string; json?: boolean }) => {
      const chosen = plan(opts.plan);
      const account = await withStore((_store, keys) => keys.createAccount(chosen));
      emit(!!opts.json, { accountId: account.id, plan: account.plan }, () => `account ${account.id} (${account.plan})`);
    });

  accounts
    .command('set-plan <accountId> <plan>')
    .description("change an account's plan")
    .option('--json', 'print JSON')
    .action(async (accountId: string, planName: string, opts: { json?: boolean }) => {
      const chosen = plan(planName);
      const changed = await withStore(async (store) => {
        const before = await store.getAccount(accountId);
        if (!before || !(await store.setPlan(accountId, chosen))) return false;
        if (before.plan !== chosen) {
          await new AuditTrail(store, systemClock).record({ accountId, action: 'account.plan', ...operator(), detail: `${before.plan} → ${chosen}` });
        }
        return true;
      });
      if (!changed) throw new CliError(`no account ${accountId}`);
      emit(!!opts.json, { accountId, plan: chosen }, () => `account ${accountId} is now on the ${chosen} plan`);
    });

  accounts
    .command('set-deletion-grace <accountId> <days>')
    .description(`days a deleted backup (and a replaced vault envelope) stays restorable: 0 (delete at once) to ${MAX_DELETION_GRACE_DAYS}`)
    .option('--json', 'print JSON')
    .action(async (accountId: string, daysText: string, opts: { json?: boolean }) => {
      const days = /^\d{1,3}$/.test(daysText) ? Number(daysText) : NaN;
      if (!isDeletionGrace(days)) throw usageError(`days must be a whole number from 0 to ${MAX_DELETION_GRACE_DAYS}, got "${daysText}"`);
      const changed = await withStore(async (store) => {
        const before = await store.getAccount(accountId);
        if (!before || !(await store.setDeletionGrace(accountId, days))) return false;
        const detail = `${before.deletionGraceDays ?? 0} → ${days} days`;
        await new AuditTrail(store, systemClock).record({ accountId, action: 'account.deletion-grace', ...operator(), detail });
        return true;
      });
      if (!changed) throw new CliError(`no account ${accountId}`);
      emit(!!opts.json, { accountId, deletionGraceDays: days }, () =>
        days === 0
          ? `account ${accountId}: deletes now remove backups at once`
          : `account ${accountId}: deleted backups and replaced vault envelopes stay restorable for ${days} day${days === 1 ? '' : 's'}`,
      );
    });

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
      const changed = await withStore(async (store) => {
        const before = await store.getAccount(accountId);
        if (!before || !(await store.setQuota(accountId, quota))) return undefined;
        const detail = `${quotaWords(before.quotaOverride)} → ${quotaWords(quota)}`;
        await new AuditTrail(store, systemClock).record({ accountId, action: 'account.quota', ...operator(), detail });
        return effectiveQuota(before.plan, quota, config.planQuotas);
      }, config);
      if (changed === undefined) throw new CliError(`no account ${accountId}`);
      const source = quota === undefined ? 'plan' : 'account';
      emit(!!opts.json, { accountId, quotaBytes: changed, quotaSource: source }, () =>
        `account ${accountId}: ${changed === null ? 'no storage quota' : `storage quota ${changed} bytes`}${source === 'plan' ? " (its plan's)" : ''}`,
      );
    });

  admin
    .command('usage')
    .description('storage and freshness per account (plan, stored bytes, backups, last READY, overdue) and totals')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const config = loadConfig();
      const { usageReport } = await import('../services/usage.js');
      const report = await withStore((store) => usageReport(store, systemClock.now(), config.planQuotas), config);
      emit(!!opts.json, report, () => usageTable(report));
    });

  accounts
    .command('add-host <ownerAccountId>')
    .description(
      "add a host account: its own schedule (the owner's plan), a copy of the owner's vault (same passphrase and recipient), " +
        'an append-only write-only key; the owner reads its backups',
    )
    .requiredOption('--label <name>', 'the host\'s name, e.g. web (1-40 letters, digits, spaces, dots, dashes, underscores)')
    .option('--expires-in <duration>', "lifetime of the host's key, e.g. 365d (default: no expiry)")
    .option('--json', 'print JSON')
    .action(async (ownerAccountId: string, opts: { label: string; expiresIn?: string; json?: boolean }) => {
      const lifetime = opts.expiresIn === undefined ? null : expiresIn(opts.expiresIn);
      const issued = await withStore(async (_store, keys) => {
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
          `host account ${result.accountId} "${result.label}" of account ${ownerAccountId} (${result.plan} plan: its own schedule)`,
          `key ${result.keyId}: backups:write, append-only; expires: ${result.expiresAt ?? 'never'}`,
          "The host account holds a copy of the owner's vault: give the host the owner's recipient (coffer recipient).",
          "The owner's keys list and restore its backups (coffer list, coffer restore <id>); the host cannot read any.",
        ].join('\n'),
      );
    });

  accounts
    .command('list')
    .description('list accounts')
    .option('--json', 'print JSON')
    .action(async (opts: { json?: boolean }) => {
      const list = await withStore((store) => store.listAccounts());
      const rows = list.map((a) => ({
        accountId: a.id,
        plan: a.plan,
        createdAt: iso(a.createdAt),
        ownerAccountId: a.ownerAccountId ?? null,
        label: a.label ?? null,
      }));
      emit(!!opts.json, { accounts: rows }, () =>
        rows.length === 0
          ? 'no accounts'
          : rows
              .map((r) => `${r.accountId}  ${r.plan}  ${r.createdAt}${r.ownerAccountId ? `  host "${r.label ?? ''}" of ${r.ownerAccountId}` : ''}`)
              .join('\n'),
      );
    });

  admin
    .command('snapshot <file>')
    .description('write a consistent copy of the SQLite database to <file> while the server runs')
    .option('--json', 'print JSON')
    .action(async (file: string, opts: { json?: boolean }) => {
      const config = loadConfig();
      if (config.databaseUrl !== null) {
        throw new CliError('snapshot copies the embedded SQLite database; for PostgreSQL use pg_dump');
      }
      const target = path.resolve(file);
      if (fs.existsSync(target)) throw new CliError(`${target} already exists; choose a new file`);
      const { snapshotSqlite } = await import('../store/sqlite.js');
      const { pages } = await snapshotSqlite(config.dataDir, target, config.sqliteDriver);
      const { size } = fs.statSync(target);
      emit(!!opts.json, { file: target, bytes: size, pages }, () => `snapshot written to ${target} (${size} bytes)`);
    });

  admin
    .command('login-link [accountId]')
    .description("print a one-time link that signs the account's owner in to the web console (with --operator: the operator console)")
    .option('--operator', 'a link to the operator console at /admin instead (no account)')
    .option('--expires-in <duration>', 'how long the link works if unused, e.g. 10m (default 15m, at most 24h)')
    .option('--json', 'print JSON')
    .action(async (accountId: string | undefined, opts: { operator?: boolean; expiresIn?: string; json?: boolean }) => {
      if (opts.operator && accountId !== undefined) throw usageError('--operator makes a link to the operator console: give no account id');
      if (!opts.operator && accountId === undefined) throw usageError('give an account id (or --operator for the operator console)');
      const lifetime = opts.expiresIn === undefined ? LOGIN_LINK_TTL_MS : expiresIn(opts.expiresIn);
      if (lifetime > LOGIN_LINK_MAX_TTL_MS) throw usageError('--expires-in may be at most 24h');
      const config = loadConfig();
      if (opts.operator) {
        const by = operator().actor.id;
        const issued = await withStore((store, keys) => new SessionService(store, keys, systemClock).createOperatorLink(by, lifetime), config);
        // The token travels in the fragment, as for owners' links: never sent to a server, a proxy log or a Referer.
        const url = `${config.publicUrl}/admin/login#token=${issued.token}`;
        const result = { operator: by, url, expiresAt: iso(issued.link.expiresAt) };
        emit(!!opts.json, result, () => [`Operator console sign-in link (works once, until ${result.expiresAt}):`, url].join('\n'));
        return;
      }
      const owner = accountId!;
      const issued = await withStore(
        (store, keys) => new SessionService(store, keys, systemClock).createLoginLink(owner, lifetime),
        config,
      );
      if (!issued) throw new CliError(`no account ${owner}`);
      // The token travels in the fragment: browsers never send it to a server, a proxy log or a Referer.
      const url = `${config.publicUrl}/console/login#token=${issued.token}`;
      const result = { accountId: owner, url, expiresAt: iso(issued.link.expiresAt) };
      emit(!!opts.json, result, () =>
        [`Sign-in link for account ${owner} (works once, until ${result.expiresAt}):`, url].join('\n'),
      );
    });

  admin
    .command('backups')
    .description('act on backups')
    .command('undelete <backupId>')
    .description('return a backup scheduled for deletion (within its deletion grace) to READY')
    .option('--json', 'print JSON')
    .action(async (backupId: string, opts: { json?: boolean }) => {
      const config = loadConfig();
      const backup = await withStore(async (store) => {
        const [{ openBlobStore }, { BackupService }, { LocalStatusBus }] = await Promise.all([
          import('../server/compose.js'),
          import('../services/backups.js'),
          import('../events/status-bus.js'),
        ]);
        const service = new BackupService(store, await openBlobStore(config), new LocalStatusBus(), systemClock, {
          maxArchiveBytes: config.maxArchiveBytes,
          uploadWindowMs: config.uploadWindowMs,
        });
        try {
          const restored = await service.undelete(null, backupId);
          await new AuditTrail(store, systemClock).record({ accountId: restored.accountId, action: 'backup.undelete', ...operator(), target: restored.id });
          return restored;
        } catch (error) {
          if (error instanceof AppError && error.code === 'backup_not_found') {
            throw new CliError(`no backup ${backupId} is scheduled for deletion (unknown, never deleted, or its grace has ended)`);
          }
          throw error;
        }
      }, config);
      const result = { backupId: backup.id, accountId: backup.accountId, status: backup.status, expiresAt: iso(backup.expiresAt) };
      emit(!!opts.json, result, () => `backup ${backup.id} of account ${backup.accountId} is READY again (expires ${result.expiresAt})`);
    });

  const keysCommand = admin.command('keys').description('manage API keys');

  keysCommand
    .command('create')
    .description('issue an API key (creates an account unless --account is given)')
    .option('--account <id>', 'existing account to issue the key for')
    .option('--plan <plan>', `plan of the new account: ${PLANS.join(' | ')}`)
    .option('--scopes <list>', `comma list of ${SCOPES.join(', ')}`, SCOPES.join(','))
    .option('--expires-in <duration>', 'lifetime, e.g. 30d')
    .option('--append-only', "the key may add backups but never delete them, reset, rotate or replace the vault (a host's key)")
    .option('--label <text>', `your name for the key, shown in key lists and the audit trail (e.g. "laptop"; at most ${KEY_LABEL_MAX} characters)`)
    .option('--json', 'print JSON')
    .action(
      async (opts: { account?: string; plan?: string; scopes: string; expiresIn?: string; appendOnly?: boolean; label?: string; json?: boolean }) => {
        const labelProblem = opts.label === undefined ? null : keyLabelProblem(opts.label);
        if (labelProblem !== null) throw usageError(`--label: ${labelProblem}, got ${JSON.stringify(opts.label)}`);
        const chosenScopes = scopes(opts.scopes);
        const lifetime = opts.expiresIn === undefined ? null : expiresIn(opts.expiresIn);
        const chosenPlan = opts.plan === undefined ? undefined : plan(opts.plan);
        if (opts.appendOnly === true && opts.account === undefined) {
          // A host's key belongs to the account that holds the vault: a new account would have no vault at all.
          throw usageError(
            "--append-only needs --account <id>: a host's key must belong to the account whose vault it backs up into " +
              '(coffer admin accounts list shows the ids); nothing was created',
          );
        }
        let createdAccount = false;
        const issued = await withStore(async (store, keys) => {
          let account;
          if (opts.account !== undefined) {
            account = await store.getAccount(opts.account);
            if (!account) throw new CliError(`no account ${opts.account}`);
            if (chosenPlan !== undefined && chosenPlan !== account.plan) {
              throw usageError(
                `--plan ${chosenPlan} conflicts with account ${account.id} on the ${account.plan} plan (use admin accounts set-plan)`,
              );
            }
          } else {
            account = await keys.createAccount(chosenPlan ?? 'free');
            createdAccount = true;
          }
          return keys.issueKey(account, {
            scopes: chosenScopes,
            expiresInMs: lifetime,
            appendOnly: opts.appendOnly === true,
            label: opts.label ?? null,
            by: operator(),
          });
        });
        const result = {
          accountId: issued.account.id,
          keyId: issued.key.id,
          apiKey: issued.apiKey,
          plan: issued.account.plan,
          scopes: issued.key.scopes,
          appendOnly: issued.key.appendOnly,
          label: issued.key.label ?? null,
          expiresAt: isoOrNull(issued.key.expiresAt),
        };
        if (createdAccount) {
          process.stderr.write(
            `created a new account ${result.accountId} (${result.plan} plan) for this key; ` +
              'to issue a key for an existing account, pass --account <id>\n',
          );
        }
        emit(!!opts.json, result, () =>
          [
            `API key (shown once, store it now): ${result.apiKey}`,
            `key ${result.keyId}${result.label ? ` “${result.label}”` : ''} for account ${result.accountId} (${result.plan} plan)`,
            `scopes: ${result.scopes.join(', ')}${result.appendOnly ? ' (append-only: cannot delete, reset or rotate)' : ''}; expires: ${result.expiresAt ?? 'never'}`,
          ].join('\n'),
        );
      },
    );

  keysCommand
    .command('list')
    .description('list API keys (never their secrets)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; json?: boolean }) => {
      const list = await withStore(async (_store, keys) => (await keys.list(opts.account)).map((key) => keyView(key, systemClock.now())));
      emit(!!opts.json, { keys: list }, () =>
        list.length === 0
          ? 'no keys'
          : list
              .map(
                (k) =>
                  `${k.keyId}${k.label ? `  “${k.label}”` : ''}  account ${k.accountId}  ${k.scopes.join(',')}${k.appendOnly ? '  append-only' : ''}  ${k.revokedAt ? 'revoked' : k.expiresAt ? `expires ${k.expiresAt}` : 'no expiry'}`,
              )
              .join('\n'),
      );
    });

  keysCommand
    .command('revoke <keyId>')
    .description('revoke an API key')
    .option('--json', 'print JSON')
    .action(async (keyId: string, opts: { json?: boolean }) => {
      const outcome = await withStore((_store, keys) => keys.revoke(keyId, undefined, operator()));
      if (!outcome?.revoked) throw new CliError(`no active key ${keyId}`);
      emit(!!opts.json, { keyId, revoked: true }, () => `key ${keyId} revoked`);
    });

  admin
    .command('audit <accountId>')
    .description("print an account's audit trail, newest first (destructive and key-changing actions; never secrets)")
    .option('--json', 'print JSON')
    .action(async (accountId: string, opts: { json?: boolean }) => {
      const { events, labels } = await withStore(async (store) => {
        if (!(await store.getAccount(accountId))) throw new CliError(`no account ${accountId}`);
        const keyLabels = new Map((await store.listApiKeys(accountId)).flatMap((key) => (key.label ? [[key.id, key.label] as const] : [])));
        return { events: await new AuditTrail(store, systemClock).list(accountId), labels: keyLabels };
      });
      const rows = events.map((e) => ({
        at: iso(e.at),
        action: e.action,
        outcome: e.outcome,
        actor: e.actor,
        /** The label of the key that acted, as the owner named it (the key's current label). */
        actorLabel: e.actor.kind === 'key' && e.actor.id !== null ? (labels.get(e.actor.id) ?? null) : null,
        address: e.address,
        target: e.target,
        detail: e.detail,
      }));
      emit(!!opts.json, { accountId, events: rows }, () =>
        rows.length === 0
          ? 'no recorded actions'
          : rows
              .map(
                (r) =>
                  `${r.at}  ${r.action}${r.outcome === 'refused' ? ' (refused)' : ''}  by ${r.actor.kind}${r.actor.id ? ` ${r.actor.id}` : ''}${r.actorLabel ? ` “${r.actorLabel}”` : ''}` +
                  `${r.address ? ` from ${r.address}` : ''}${r.target ? `  on ${r.target}` : ''}${r.detail ? `  ${r.detail}` : ''}`,
              )
              .join('\n'),
      );
    });
}
