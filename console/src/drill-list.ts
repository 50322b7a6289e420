/** The drill attestations the server shows the signed-in owner (GET /api/attestations), read before the vault is unlocked. */
import { ApiError, api } from './api.js';
import { isRecord, type ShownAttestations } from './drill-check.js';

const MAX_SHOWN = 1000;

export async function readAttestations(): Promise<ShownAttestations> {
  try {
    const [{ attestations }, session] = await Promise.all([
      api('GET /api/attestations?limit=:limit', { params: { limit: String(MAX_SHOWN) } }),
      api('GET /console/api/session'),
    ]);
    if (!Array.isArray(attestations)) return { failure: 'the server answered something that is not a list of attestations' };
    return { attestations: attestations.slice(0, MAX_SHOWN).filter(isRecord), accountId: session.accountId };
  } catch (caught) {
    if (!(caught instanceof ApiError)) throw caught;
    return { failure: `${caught.message} ${caught.resolution}`.trim() };
  }
}
