/**
 * /console/api/backup-keys: the wrapped data key of every visible backup of the session's account, then of its host
 * accounts' (which the Backups page lists with its own), in one answer. The page reads each key's form and recipient fingerprint from it (docs/console.md "Keys"), and a
 * recovery kit is checked against it in the page, and the sealed metadata is opened there once the vault is unlocked (each
 * backup's name and source); nothing readable without the vault is in it (the same fields as each backup's detail).
 */
import type { AppPlugin } from '../http/fastify.js';
import { type ConsoleContext, hidden } from './context.js';
import { BackupKeyList } from '../contract/console-schemas.js';
import { sessionPrincipal } from './session-http.js';

export const backupKeyRoutes: AppPlugin<ConsoleContext> = async (app, { backups, readPolicy, requireSession }) => {
  app.get(
    '/console/api/backup-keys',
    { schema: { ...hidden, response: { 200: BackupKeyList } }, onRequest: requireSession },
    async (request) => {
      const reader = sessionPrincipal(request.consoleSession);
      const hosts = await readPolicy.hostAccounts(reader);
      const list = [
        ...(await backups.list(reader.accountId)),
        ...(await Promise.all(hosts.map(({ account }) => readPolicy.listHost(reader, account.id)))).flat(),
      ];
      return {
        backups: list.map(({ id, accountId, status, wrappedDek, wrappedDekNonce, encryptedMetadata, encryptedMetadataNonce }) => ({
          id,
          status,
          wrappedDek,
          wrappedDekNonce,
          encryptedMetadata,
          encryptedMetadataNonce,
          hostAccountId: accountId === reader.accountId ? null : accountId,
        })),
      };
    },
  );
};
