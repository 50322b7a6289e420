/**
 * Crypto envelope v1 (docs/crypto.md), written once against a small set of libsodium primitives. The CLI binds it
 * to sodium-native (src/client/envelope.ts), the console page to libsodium in WebAssembly
 * (console/src/crypto/envelope.ts); this module imports neither, nor any Node or DOM API.
 *
 *   KEK         = Argon2id13(passphrase NFC UTF-8, salt 16 B, opslimit, memlimit) → 32 B
 *   master key  = 32 random bytes, XChaCha20-Poly1305-IETF(KEK, nonce 24 B, AD "coffer/v1/master"); after
 *                 `coffer rekey` the plaintext is a keyring "ckr1" ‖ n ‖ n × 32 B keys, current first. The core's
 *                 `masterKey` arguments are that plaintext (either form): new material uses the current key,
 *                 reading tries every key
 *   DEK         = 32 random bytes per backup, XChaCha20-Poly1305-IETF(master, nonce, AD "coffer/v1/dek/<id>")
 *   metadata    = JSON, XChaCha20-Poly1305-IETF(DEK, nonce, AD "coffer/v1/metadata/<id>")
 *   archive     = secretstream XChaCha20-Poly1305(DEK): 24 B header, then 64 KiB plaintext chunks, each
 *                 + 17 B; every chunk TAG_MESSAGE except the last, TAG_FINAL (truncation is detected)
 *   recipient   = X-Wing key pair from seed crypto_kdf_derive_from_key(32, 1, "cofferxw", master key);
 *                 a DEK sealed to it: "cxw1" ‖ fingerprint 8 B ‖ X-Wing ct 1120 B ‖ XChaCha20-Poly1305(ss, nonce,
 *                 AD "coffer/v1/sealed-dek/<id>/<fingerprint>") 48 B
 *
 * Binary values travel as standard padded base64. X-Wing (@noble/post-quantum) and Bech32m (@scure/base) are
 * pure JavaScript, the same code on both providers.
 *
 * One module per part, each a set of operations on the provider's primitives: ./envelope-primitives.ts (the
 * primitives, the AEAD box), ./envelope-vault.ts (KEK, master key, keyring), ./envelope-dek.ts (wrap, seal, open),
 * ./envelope-recipient.ts (X-Wing), ./envelope-metadata.ts; the archive stream is here.
 */
import { CHUNK_BYTES, IntegrityError } from './envelope-format.js';
import { basicOperations, type Primitives, type StreamState } from './envelope-primitives.js';
import { dekOperations } from './envelope-dek.js';
import { metadataOperations } from './envelope-metadata.js';
import { recipientOperations } from './envelope-recipient.js';
import { vaultOperations } from './envelope-vault.js';

export { dekForm, type DekForm, fingerprintText, keyUse, type KeyUse } from './key-usage.js';
export {
  AD,
  KEYRING,
  RECIPIENT,
  type BackupMetadata,
  CHUNK_BYTES,
  CRYPTO_VERSION,
  DEFAULT_KDF_PROFILE,
  IntegrityError,
  KDF_ACCEPTED_MAX,
  type KdfProfile,
  NewerFormatError,
  requireRequestedBackup,
  WrongPassphraseError,
} from './envelope-format.js';

export const STREAM_HEADER_BYTES = 24; // crypto_secretstream_xchacha20poly1305_HEADERBYTES
export const STREAM_ABYTES = 17; // crypto_secretstream_xchacha20poly1305_ABYTES
export const TAG_MESSAGE = 0; // crypto_secretstream_xchacha20poly1305_TAG_MESSAGE
export const TAG_FINAL = 3; // crypto_secretstream_xchacha20poly1305_TAG_FINAL
const FRAME_BYTES = CHUNK_BYTES + STREAM_ABYTES;

/** Exact ciphertext size for `plainBytes` of stream input: header + one 17-byte overhead per chunk (≥ 1 chunk). */
export function ciphertextSize(plainBytes: number): number {
  const chunks = Math.max(1, Math.ceil(plainBytes / CHUNK_BYTES));
  return STREAM_HEADER_BYTES + plainBytes + chunks * STREAM_ABYTES;
}

/** The envelope's operations on one provider's primitives. */
export function createEnvelope<B extends Uint8Array>(p: Primitives<B>) {
  return { ...basicOperations(p), ...vaultOperations(p), ...dekOperations(p), ...recipientOperations(p), ...metadataOperations(p) };
}

/** Receives each piece of output as soon as it is complete (a Node stream's push, a TransformStream's enqueue). */
export type Emit<B> = (bytes: B) => void;

/**
 * Encrypts a byte stream fed in pieces of any size: the header first, then one sealed chunk per 64 KiB, the last one
 * TAG_FINAL. The chunks a push seals are emitted together, in one buffer (one allocation per push, not per 64 KiB);
 * a whole chunk of the input is sealed where it lies, without a copy into the pending chunk.
 */
export class SecretStreamWriter<B extends Uint8Array> {
  private state: StreamState | undefined;
  private readonly pending = new Uint8Array(CHUNK_BYTES);
  private filled = 0;

  constructor(
    private readonly p: Primitives<B>,
    private readonly key: Uint8Array,
  ) {}

  private start(emit: Emit<B>): void {
    if (this.state !== undefined) return;
    const header = this.p.alloc(STREAM_HEADER_BYTES);
    this.state = this.p.streamInitPush(header, this.key);
    emit(header);
  }

  private seal(length: number, tag: number, emit: Emit<B>): void {
    const sealed = this.p.alloc(length + STREAM_ABYTES);
    this.p.streamPush(this.state, sealed, this.pending.subarray(0, length), tag);
    this.filled = 0;
    emit(sealed);
  }

  push(chunk: Uint8Array, emit: Emit<B>): void {
    this.start(emit);
    // A full chunk is only sealed once more data shows it is not the last one: of `total` bytes, all but the last
    // (1 to CHUNK_BYTES) are sealed now.
    const total = this.filled + chunk.length;
    const frames = total > 0 ? Math.ceil(total / CHUNK_BYTES) - 1 : 0;
    const out = frames > 0 ? this.p.alloc(frames * FRAME_BYTES) : undefined;
    let offset = 0;
    for (let frame = 0; frame < frames; frame++) {
      const into = out!.subarray(frame * FRAME_BYTES, (frame + 1) * FRAME_BYTES) as B;
      if (this.filled === 0) {
        this.p.streamPush(this.state, into, chunk.subarray(offset, offset + CHUNK_BYTES), TAG_MESSAGE);
        offset += CHUNK_BYTES;
      } else {
        const take = CHUNK_BYTES - this.filled;
        this.pending.set(chunk.subarray(offset, offset + take), this.filled);
        offset += take;
        this.p.streamPush(this.state, into, this.pending, TAG_MESSAGE);
        this.filled = 0;
      }
    }
    this.pending.set(chunk.subarray(offset), this.filled);
    this.filled += chunk.length - offset;
    if (out) emit(out);
  }

  /** The last chunk (TAG_FINAL), also for an empty stream. */
  finish(emit: Emit<B>): void {
    this.start(emit);
    this.seal(this.filled, TAG_FINAL, emit);
    this.dispose();
  }

  /** Zeroes the state and the pending plaintext. */
  dispose(): void {
    if (this.state !== undefined) this.p.streamWipe(this.state);
    this.p.wipe(this.pending);
  }
}

/**
 * Decrypts and authenticates a secretstream fed in pieces of any size: every frame must verify, the last one must
 * carry TAG_FINAL and nothing may follow it. Plaintext comes out frame by frame (bounded memory) and is
 * unconfirmed until finish() returned without throwing.
 */
export class SecretStreamReader<B extends Uint8Array> {
  private state: StreamState | undefined;
  private readonly header = new Uint8Array(STREAM_HEADER_BYTES);
  private headerFilled = 0;
  private readonly frame = new Uint8Array(FRAME_BYTES);
  private filled = 0;
  private frames = 0;
  private finished = false;
  /** Ciphertext bytes seen so far. */
  bytesIn = 0;

  constructor(
    private readonly p: Primitives<B>,
    private readonly key: Uint8Array,
  ) {}

  private pull(length: number, emit: Emit<B>): void {
    if (length < STREAM_ABYTES) throw new IntegrityError('the archive is truncated (partial chunk)');
    const plain = this.p.alloc(length - STREAM_ABYTES);
    const tag = this.p.streamPull(this.state, plain, this.frame.subarray(0, length));
    if (tag === undefined) {
      throw new IntegrityError(`archive chunk ${this.frames} failed authentication (tampered, truncated or wrong key)`);
    }
    this.frames += 1;
    if (tag === TAG_FINAL) this.finished = true;
    else if (tag !== TAG_MESSAGE) throw new IntegrityError(`archive chunk ${this.frames - 1} has an unexpected tag`);
    this.filled = 0;
    if (plain.length > 0) emit(plain);
  }

  /** Feeds ciphertext; emits the plaintext of every frame it completes. */
  push(chunk: Uint8Array, emit: Emit<B>): void {
    this.bytesIn += chunk.length;
    let offset = 0;
    if (this.headerFilled < STREAM_HEADER_BYTES) {
      const take = Math.min(STREAM_HEADER_BYTES - this.headerFilled, chunk.length);
      this.header.set(chunk.subarray(0, take), this.headerFilled);
      this.headerFilled += take;
      offset = take;
      if (this.headerFilled === STREAM_HEADER_BYTES) this.state = this.p.streamInitPull(this.header, this.key);
    }
    while (offset < chunk.length) {
      if (this.finished) throw new IntegrityError('the archive has data after its final chunk');
      const take = Math.min(FRAME_BYTES - this.filled, chunk.length - offset);
      this.frame.set(chunk.subarray(offset, offset + take), this.filled);
      this.filled += take;
      offset += take;
      if (this.filled === FRAME_BYTES) this.pull(FRAME_BYTES, emit);
    }
  }

  /** Ends the stream: the last (short) frame, and the proof that the final tag was seen. */
  finish(emit: Emit<B>): void {
    if (this.headerFilled < STREAM_HEADER_BYTES) throw new IntegrityError('the archive is truncated (no header)');
    if (!this.finished && this.filled > 0) this.pull(this.filled, emit);
    if (!this.finished) throw new IntegrityError('the archive is truncated (final chunk missing)');
    this.dispose();
  }

  /** Zeroes the state and the buffered ciphertext. */
  dispose(): void {
    if (this.state !== undefined) this.p.streamWipe(this.state);
    this.p.wipe(this.frame);
  }
}
