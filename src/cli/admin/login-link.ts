/** `coffer admin login-link`: a one-time sign-in link to an owner's console, or to the operator console. */
import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { iso } from '../../domain/time.js';
import { LOGIN_LINK_MAX_TTL_MS, LOGIN_LINK_TTL_MS } from '../../services/sessions.js';
import { CliError, emit, note, usageError } from '../output.js';
import { expiresIn, operator, withServices } from './frame.js';

export function registerLoginLinkCommand(admin: Command): void {
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
        const [issued, base] = await withServices(
          async ({ sessions, publicUrl }) => [await sessions.createOperatorLink(by, lifetime), await publicUrl()] as const,
          config,
        );
        noteUnrecorded(base);
        // The token travels in the fragment, as for owners' links: never sent to a server, a proxy log or a Referer.
        const url = `${base.url}/admin/login#token=${issued.token}`;
        const result = { operator: by, url, expiresAt: iso(issued.link.expiresAt) };
        emit(!!opts.json, result, () => [`Operator console sign-in link (works once, until ${result.expiresAt}):`, url].join('\n'));
        return;
      }
      const owner = accountId!;
      const [issued, base] = await withServices(
        async ({ sessions, publicUrl }) => [await sessions.createLoginLink(owner, lifetime), await publicUrl()] as const,
        config,
      );
      if (!issued) throw new CliError(`no account ${owner}`);
      noteUnrecorded(base);
      // The token travels in the fragment: browsers never send it to a server, a proxy log or a Referer.
      const url = `${base.url}/console/login#token=${issued.token}`;
      const result = { accountId: owner, url, expiresAt: iso(issued.link.expiresAt) };
      emit(!!opts.json, result, () => [`Sign-in link for account ${owner} (works once, until ${result.expiresAt}):`, url].join('\n'));
    });
}

/** A link on a guessed address says so: no server has started on this database yet to record its own. */
function noteUnrecorded(base: { url: string; recorded: boolean }): void {
  if (!base.recorded) {
    note(`coffer: no server has recorded its public URL in this database yet: the link assumes ${base.url} (set COFFER_PUBLIC_URL)`);
  }
}
