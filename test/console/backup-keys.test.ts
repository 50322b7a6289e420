/**
 * GET /console/api/backup-keys over HTTP: every visible backup's wrapped data key for the session's account only
 * (the page reads key forms and checks a recovery kit with it); the session cookie only, never an API key.
 */
import { describe, expect, it } from 'vitest';
import { finalizeBody } from '../helpers/api.js';
import { ManualClock } from '../helpers/clock.js';
import { createSlot, readyBackup, useServer } from '../helpers/fixture.js';
import { signInWithKey } from './helpers.js';

describe('GET /console/api/backup-keys', () => {
  const clock = new ManualClock();
  const fixture = useServer({ clock });

  const signIn = async (apiKey: string) => (await signInWithKey(fixture.server.url, apiKey)).cookie;
  const keys = (headers: Record<string, string>) => fetch(`${fixture.server.url}/console/api/backup-keys`, { headers });

  it("answers the session's account's backups only, newest first, with their wrapped keys; a slot not finalized has none", async () => {
    const mine = await fixture.account();
    const theirs = await fixture.account();
    const first = await readyBackup(mine.call);
    const { id: foreign } = await readyBackup(theirs.call);
    clock.advance(31 * 60_000); // pro plan: one backup per 30 minutes
    const pending = await createSlot(mine.call);
    const cookie = await signIn(mine.apiKey);

    const response = await keys({ cookie });
    expect(response.status).toBe(200);
    expect(response.headers.get('cache-control')).toBe('no-store');
    const { backups } = (await response.json()) as {
      backups: { id: string; status: string; wrappedDek: string | null; wrappedDekNonce: string | null }[];
    };
    const { wrappedDek, wrappedDekNonce, encryptedMetadata, encryptedMetadataNonce } = finalizeBody(1000);
    expect(backups).toEqual([
      {
        id: pending,
        status: 'PENDING_UPLOAD',
        wrappedDek: null,
        wrappedDekNonce: null,
        encryptedMetadata: null,
        encryptedMetadataNonce: null,
        hostAccountId: null,
      },
      { id: first.id, status: 'READY', wrappedDek, wrappedDekNonce, encryptedMetadata, encryptedMetadataNonce, hostAccountId: null },
    ]);
    expect(JSON.stringify(backups)).not.toContain(foreign);
  });

  it('refuses a request without a session, and an API key instead of one (401, nothing listed)', async () => {
    const { apiKey } = await fixture.account();
    for (const headers of [{}, { authorization: `Bearer ${apiKey}` }, { cookie: 'coffer_session=cfs_forged' }] as Record<
      string,
      string
    >[]) {
      const response = await keys(headers);
      expect(response.status).toBe(401);
      expect(((await response.json()) as { code: string }).code).toBe('authentication_required');
    }
  });
});
