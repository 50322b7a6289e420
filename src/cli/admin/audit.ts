/** `coffer admin audit <accountId>`: an account's audit trail, newest first. */
import type { Command } from 'commander';
import { iso } from '../../domain/time.js';
import { CliError, emit } from '../output.js';
import { actorWords, textTable, withServices } from './frame.js';

export function registerAuditCommand(admin: Command): void {
  admin
    .command('audit <accountId>')
    .description("print an account's audit trail, newest first (destructive and key-changing actions; never secrets)")
    .option('--json', 'print JSON')
    .action(async (accountId: string, opts: { json?: boolean }) => {
      const { events, labels } = await withServices(async ({ stores, audit }) => {
        if (!(await stores.accounts.getAccount(accountId))) throw new CliError(`no account ${accountId}`);
        const keyLabels = new Map(
          (await stores.keys.listApiKeys(accountId)).flatMap((key) => (key.label ? [[key.id, key.label] as const] : [])),
        );
        return { events: await audit.list(accountId), labels: keyLabels };
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
          : textTable(
              ['AT', 'ACTION', 'BY', 'FROM', 'ON', 'DETAIL'],
              rows.map((r) => [
                r.at,
                `${r.action}${r.outcome === 'refused' ? ' (refused)' : ''}`,
                actorWords(r.actor, r.actorLabel),
                r.address ?? '',
                r.target ?? '',
                r.detail ?? '',
              ]),
            ),
      );
    });
}
