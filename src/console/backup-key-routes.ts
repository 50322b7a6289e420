/**
 * /console/api/backup-keys: the wrapped data key of every visible backup of the session's account, newest first, in
 * one answer. The page reads each key's form and recipient fingerprint from it (docs/console.md "Keys"), and a
 * recovery kit is checked against it in the page, and the sealed metadata is opened there once the vault is unlocked (each
 * backup's name and source); nothing readable without the vault is in it (the same fields as each backup's detail).
 */
import type { AppPlugin } from '../http/fastify.js';
import { type ConsoleContext, hidden } from './context.js';
import { BackupKeyList } from '../contract/console-schemas.js';

export const backupKeyRoutes: AppPlugin<ConsoleContext> = async (app, { backups, requireSession }) => {
  app.get(
    '/console/api/backup-keys',
    { schema: { ...hidden, response: { 200: BackupKeyList } }, onRequest: requireSession },
    async (request) => {
      const list = await backups.list(request.consoleSession.accountId);
      return {
        backups: list.map(({ id, status, wrappedDek, wrappedDekNonce, encryptedMetadata, encryptedMetadataNonce }) => ({
          id,
          status,
          wrappedDek,
          wrappedDekNonce,
          encryptedMetadata,
          encryptedMetadataNonce,
        })),
      };
    },
  );
};
