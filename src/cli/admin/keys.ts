/** `coffer admin keys …`: issue, list and revoke API keys. */
import type { Command } from 'commander';
import { KEY_LABEL_MAX, keyLabelProblem } from '../../domain/keys.js';
import { PLANS } from '../../domain/plans.js';
import { SCOPES } from '../../domain/scopes.js';
import { isoOrNull } from '../../domain/time.js';
import { keyView } from '../../services/keys.js';
import { CliError, emit, usageError } from '../output.js';
import { expiresIn, operator, plan, quoted, scopes, textTable, withServices } from './frame.js';

export function registerKeyCommands(admin: Command): void {
  const keysCommand = admin.command('keys').description('manage API keys');
  registerCreate(keysCommand);
  registerList(keysCommand);
  registerRevoke(keysCommand);
}

interface CreateOptions {
  account?: string;
  plan?: string;
  scopes: string;
  expiresIn?: string;
  appendOnly?: boolean;
  label?: string;
  json?: boolean;
}

/** `keys create`: issues a key for an account, or for a new one. */
function registerCreate(keysCommand: Command): void {
  keysCommand
    .command('create')
    .description('issue an API key (creates an account unless --account is given)')
    .option('--account <id>', 'existing account to issue the key for')
    .option('--plan <plan>', `plan of the new account: ${PLANS.join(' | ')}`)
    .option('--scopes <list>', `comma list of ${SCOPES.join(', ')}`, SCOPES.join(','))
    .option('--expires-in <duration>', 'lifetime, e.g. 30d')
    .option('--append-only', "the key may add backups but never delete them, reset, rotate or replace the vault (a host's key)")
    .option(
      '--label <text>',
      `your name for the key, shown in key lists and the audit trail (e.g. "laptop"; at most ${KEY_LABEL_MAX} characters)`,
    )
    .option('--json', 'print JSON')
    .action(createKey);
}

async function createKey(opts: CreateOptions): Promise<void> {
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
  const issued = await withServices(async ({ stores, keys }) => {
    let account;
    if (opts.account !== undefined) {
      account = await stores.accounts.getAccount(opts.account);
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
      `key ${result.keyId}${result.label ? ` ${quoted(result.label)}` : ''} for account ${result.accountId} (${result.plan} plan)`,
      `scopes: ${result.scopes.join(', ')}${result.appendOnly ? ' (append-only: cannot delete, reset or rotate)' : ''}; expires: ${result.expiresAt ?? 'never'}`,
    ].join('\n'),
  );
}

/** `keys list`: every key (or one account's), never a secret. */
function registerList(keysCommand: Command): void {
  keysCommand
    .command('list')
    .description('list API keys (never their secrets)')
    .option('--account <id>', 'only this account')
    .option('--json', 'print JSON')
    .action(async (opts: { account?: string; json?: boolean }) => {
      const { list, accountLabels } = await withServices(async ({ keys, clock, stores }) => ({
        list: (await keys.list(opts.account)).map((key) => keyView(key, clock.now())),
        accountLabels: new Map(
          (await stores.accounts.listAccounts()).flatMap((a) => (a.operatorLabel ? [[a.id, a.operatorLabel] as const] : [])),
        ),
      }));
      emit(!!opts.json, { keys: list }, () =>
        list.length === 0
          ? 'no keys'
          : textTable(
              ['KEY', 'LABEL', 'ACCOUNT', 'SCOPES', 'STATUS'],
              list.map((k) => {
                const accountLabel = accountLabels.get(k.accountId);
                return [
                  k.keyId,
                  k.label ? quoted(k.label) : '',
                  `${k.accountId}${accountLabel ? ` ${quoted(accountLabel)}` : ''}`,
                  `${k.scopes.join(',')}${k.appendOnly ? ' append-only' : ''}`,
                  k.status === 'active' ? (k.expiresAt ? `active, expires ${k.expiresAt}` : 'active, no expiry') : k.status,
                ];
              }),
            ),
      );
    });
}

/** `keys revoke <keyId>`. */
function registerRevoke(keysCommand: Command): void {
  keysCommand
    .command('revoke <keyId>')
    .description('revoke an API key')
    .option('--json', 'print JSON')
    .action(async (keyId: string, opts: { json?: boolean }) => {
      const outcome = await withServices(({ keys }) => keys.revoke(keyId, undefined, operator()));
      if (!outcome?.revoked) throw new CliError(`no active key ${keyId}`);
      emit(!!opts.json, { keyId, revoked: true }, () => `key ${keyId} revoked`);
    });
}
