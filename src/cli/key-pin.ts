/**
 * The newest vault key this machine has seen, per server and vault (docs/crypto.md §1b, "rollback to an older
 * envelope"). After `coffer rekey`, a server (or a key allowed to rotate) could serve the envelope from before it:
 * backups made then would use the old key, which the old kit and the old passphrase open, and `coffer recipient`
 * would hand hosts the old recipient. Every key ring this client opens (vault, kit) must therefore hold the newest
 * key it has seen; one that lacks it is refused unless the user returns to it on purpose (COFFER_ACCEPT_OLDER_KEYS).
 *
 * The file is `<state dir>/keys.json` (mode 0600): per "<server URL> <fingerprint of the vault's first key>" (the
 * oldest key of a ring never changes, so it names the vault without knowing the account), the recipient fingerprint
 * of the newest current key seen, and when.
 */
import fsp from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { deriveRecipient, fsReason, IntegrityError, keyMaterialOf, masterKeys, wipe } from '../client/index.js';

/** A vault, keyring or kit without the newest key this machine has seen for its vault: exit 4. */
export class OlderKeyError extends IntegrityError {
  override readonly name = 'OlderKeyError';
}

const PinsSchema = z.object({
  version: z.literal(1),
  vaults: z.record(z.string(), z.object({ newest: z.string(), seenAt: z.string() })),
});
type Pins = z.output<typeof PinsSchema>;

export const keyPinFile = (stateDir: string): string => path.join(stateDir, 'keys.json');

/** The recipient fingerprints of a key ring, current key first (as masterKeys orders them). */
export function ringFingerprints(material: Uint8Array): string[] {
  return masterKeys(material).map((key) => {
    const single = keyMaterialOf([key]);
    try {
      return deriveRecipient(single).fingerprint;
    } finally {
      wipe(single);
    }
  });
}

async function readPins(file: string): Promise<Pins> {
  let text: string;
  try {
    text = await fsp.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { version: 1, vaults: {} };
    throw error;
  }
  const parsed = PinsSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${file} is not a key record this coffer wrote: remove it to start afresh`);
  return parsed.data;
}

async function writePins(file: string, pins: Pins): Promise<void> {
  await fsp.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const temp = `${file}.${process.pid}.tmp`;
  await fsp.writeFile(temp, `${JSON.stringify(pins, null, 2)}\n`, { mode: 0o600 });
  await fsp.rename(temp, file);
}

/**
 * Checks that the key ring `material` (a vault's, or a kit's) holds the newest key seen for its vault on `server`,
 * and records its current key as the newest from now on. `acceptOlder`: the user returns to an older envelope on
 * purpose; it becomes the newest. `what` names the ring in the refusal ("the vault the server sent", "the kit") and
 * `olderMeans` says what an older ring is; `onOlder: 'report'` returns an older ring's pin instead of refusing.
 */
export async function checkKeyPin(
  stateDir: string,
  server: string,
  material: Uint8Array,
  options: { acceptOlder: boolean; what: string; onOlder?: 'refuse' | 'report'; olderMeans?: string },
): Promise<{ fingerprints: string[]; unrecorded?: string; older?: { newest: string; seenAt: string } }> {
  const fingerprints = ringFingerprints(material);
  const file = keyPinFile(stateDir);
  let pins: Pins;
  try {
    pins = await readPins(file);
  } catch (error) {
    // A state directory this user cannot read (a command run as another user): nothing to compare with, say so.
    if ((error as NodeJS.ErrnoException).code !== 'EACCES') throw error;
    return { fingerprints, unrecorded: `cannot read ${file}: ${fsReason(error)}` };
  }
  const id = `${server} ${fingerprints.at(-1)}`;
  const pinned = pins.vaults[id];
  if (pinned && !fingerprints.includes(pinned.newest) && !options.acceptOlder) {
    // A ring only read from (a kit restoring backups) changes nothing, so an older one is reported, not recorded.
    if (options.onOlder === 'report') return { fingerprints, older: pinned };
    throw new OlderKeyError(
      `${options.what} lacks the newest vault key this machine has seen (recipient ${pinned.newest}, since ${pinned.seenAt}): ` +
        `it holds only ${fingerprints.join(', ')}, ${options.olderMeans ?? 'an envelope from before a rekey. The server may have put an old copy back.'} ` +
        "Nothing was changed. If you returned to this older envelope on purpose (the console's vault history), set " +
        'COFFER_ACCEPT_OLDER_KEYS=1 for one command.',
    );
  }
  if (pinned?.newest !== fingerprints[0]) {
    pins.vaults[id] = { newest: fingerprints[0]!, seenAt: new Date().toISOString() };
    try {
      await writePins(file, pins);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EACCES' && code !== 'EROFS' && code !== 'EPERM') throw error;
      return { fingerprints, unrecorded: `cannot write ${file}: ${fsReason(error)}` };
    }
  }
  return { fingerprints };
}
