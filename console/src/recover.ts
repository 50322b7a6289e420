/**
 * Recovery with the kit in the page (docs/console.md "Recovery"), the rule of `coffer recover` (src/client/kit-core.ts
 * kitRefusal): the kit's words are decoded here (the CLI's own kit code), its keys must open the data key of every
 * READY backup, then the same keys are wrapped under the new passphrase and sent through rotate. Only the new
 * wrapping travels; the words, the keys and the new passphrase never leave the page.
 */
import { ApiError, api } from './api.js';

export interface Recovered {
  opened: number;
  checked: number;
  keys: number;
  /** The current key's recipient fingerprint (unchanged by a recovery). */
  fingerprint: string;
}

/** The kit does not fit this vault's backups: nothing was changed. */
export class KitRefused extends Error {
  override readonly name = 'KitRefused';
  constructor(
    readonly reason: 'foreign' | 'partial' | 'unchecked',
    readonly opened: number,
    readonly checked: number,
  ) {
    super(`the kit was refused (${reason}): it opens ${opened} of ${checked} backups`);
  }
}

/** The vault changed (another client rotated it) while the kit was being checked: nothing was changed. */
export class VaultChanged extends Error {
  override readonly name = 'VaultChanged';
}

export async function recoverWithKit(kitText: string, newPassphrase: string): Promise<Recovered> {
  const [crypto, kits] = await Promise.all([import('./crypto/envelope.js'), import('./crypto/kit.js')]);
  await crypto.ready;
  const kit = kits.parseKitOrWords(kitText);
  try {
    let etag = null as string | null;
    const account = await api('GET /api/backup-account', { onHeaders: (headers) => (etag = headers.get('etag')) });
    if (!account.initialized) throw new VaultChanged('this account has no vault: there is nothing to recover (coffer init)');
    const { backups } = await api('GET /console/api/backup-keys');
    // The account's own backups: a host account's vault may have been changed apart from this one.
    const ready = backups.filter((backup) => backup.status === 'READY' && backup.hostAccountId === null);
    let opened = 0;
    for (const backup of ready) {
      try {
        crypto.wipe(crypto.openDek(kit.material, backup.id, backup).dek);
        opened += 1;
      } catch (error) {
        if (!(error instanceof crypto.IntegrityError)) throw error;
      }
    }
    const refusal = kits.kitRefusal(opened, ready.length, false);
    if (refusal) throw new KitRefused(refusal, opened, ready.length);
    const envelope = await crypto.wrapMasterKey(kit.material, newPassphrase, crypto.newKdfParams(crypto.DEFAULT_KDF_PROFILE));
    // Only the vault the kit was checked against may be replaced: if another client changed it meanwhile (its keys
    // could be newer than the kit's), the server refuses the rotate (If-Match, 409 vault_changed), as `coffer recover` does.
    const changed = () => new VaultChanged('the vault was changed by another client during the recovery; nothing was changed, try again');
    if (etag === null) throw changed();
    try {
      await api('POST /api/backup-account/rotate', { body: envelope, headers: { 'if-match': etag } });
    } catch (error) {
      if (error instanceof ApiError && error.code === 'vault_changed') throw changed();
      throw error;
    }
    return { opened, checked: ready.length, keys: kit.keys, fingerprint: crypto.deriveRecipient(kit.material).fingerprint };
  } finally {
    crypto.wipe(kit.material);
  }
}
