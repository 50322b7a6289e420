"""Independent check of the docs/crypto.md test vectors against the system libsodium (ctypes, no Node), the restore
attestations of §7 included (their reading, steps 1 to 5 of "Verifying", written out here from the document).

Usage: python3 test/client/vectors_libsodium.py docs/crypto.md < english.txt   (prints "ok" and exits 0 when every value
matches; stdin is the BIP-39 English wordlist, 2048 words one a line, for the recovery kit's encoding)
"""
import base64
import ctypes
import ctypes.util
import datetime
import gzip
import hashlib
import hmac
import json
import re
import sys
import unicodedata

text = open(sys.argv[1], encoding="utf-8").read()
wordlist = sys.stdin.read().split()
assert len(wordlist) == 2048, "stdin must be the BIP-39 English wordlist (2048 words)"
block = re.search(r"<!-- test-vectors[^>]*-->\s*```json\n(.*?)\n```", text, re.S)
v = json.loads(block.group(1))

lib = ctypes.CDLL(ctypes.util.find_library("sodium") or "libsodium.so.23")
assert lib.sodium_init() >= 0
u64, size_t = ctypes.c_ulonglong, ctypes.c_size_t

password = unicodedata.normalize("NFC", v["passphrase"]).encode()
salt = base64.b64decode(v["kdf"]["salt"])
kek = ctypes.create_string_buffer(32)
assert lib.crypto_pwhash(kek, u64(32), password, u64(len(password)), salt, u64(v["kdf"]["opslimit"]),
                         size_t(v["kdf"]["memlimit"]), ctypes.c_int(2)) == 0
assert kek.raw.hex() == v["kek"], "kek"


def seal(key, message, ad, nonce):
    out = ctypes.create_string_buffer(len(message) + 16)
    out_len = u64()
    lib.crypto_aead_xchacha20poly1305_ietf_encrypt(out, ctypes.byref(out_len), message, u64(len(message)), ad,
                                                   u64(len(ad)), None, nonce, key)
    return base64.b64encode(out.raw).decode()


master, dek, backup_id = bytes.fromhex(v["masterKey"]), bytes.fromhex(v["dek"]), v["backupId"]
assert seal(kek.raw, master, b"coffer/v1/master", bytes.fromhex(v["wrappedMasterKeyNonce"])) == v["vault"]["wrappedMasterKey"]
assert seal(master, dek, ("coffer/v1/dek/" + backup_id).encode(), bytes.fromhex(v["wrappedDekNonce"])) == v["finalize"]["wrappedDek"]
assert seal(dek, v["metadataJson"].encode(), ("coffer/v1/metadata/" + backup_id).encode(),
            bytes.fromhex(v["encryptedMetadataNonce"])) == v["finalize"]["encryptedMetadata"]

# Keyring (§1b): "ckr1" ‖ n ‖ keys newest first, wrapped exactly as a single master key; DEKs from the current key.
ring = v["keyring"]
ring_plain = bytes.fromhex(ring["plaintext"])
assert ring_plain == b"ckr1" + bytes([len(ring["keys"])]) + b"".join(bytes.fromhex(k) for k in ring["keys"]), "keyring layout"
assert bytes.fromhex(ring["keys"][1]) == master
assert seal(kek.raw, ring_plain, b"coffer/v1/master", bytes.fromhex(ring["wrappedMasterKeyNonce"])) == ring["vault"]["wrappedMasterKey"]
assert seal(bytes.fromhex(ring["keys"][0]), dek, ("coffer/v1/dek/" + backup_id).encode(),
            base64.b64decode(ring["finalize"]["wrappedDekNonce"])) == ring["finalize"]["wrappedDek"]

# Recipient (X-Wing itself is checked against the draft's vectors in envelope.test.ts): the seed, the Bech32m
# string (BIP-350, written out here) and the fingerprint; then the sealed DEK's layout and its AEAD box.
seed = ctypes.create_string_buffer(32)
assert lib.crypto_kdf_derive_from_key(seed, size_t(32), u64(1), b"cofferxw", master) == 0
assert seed.raw.hex() == v["recipient"]["seed"], "recipient seed"
public_key = bytes.fromhex(v["recipient"]["publicKey"])
assert len(public_key) == 1216
fp = hashlib.sha256(public_key).digest()[:8]
assert v["recipient"]["fingerprint"] == "-".join(fp.hex()[i:i + 4] for i in range(0, 16, 4)), "fingerprint"


def bech32m(hrp, data):
    charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
    words, acc, bits = [], 0, 0
    for byte in data:
        acc, bits = (acc << 8) | byte, bits + 8
        while bits >= 5:
            bits -= 5
            words.append((acc >> bits) & 31)
    if bits:
        words.append((acc << (5 - bits)) & 31)

    def polymod(values):
        chk = 1
        for value in values:
            top = chk >> 25
            chk = (chk & 0x1ffffff) << 5 ^ value
            for i, g in enumerate([0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3]):
                chk ^= g if (top >> i) & 1 else 0
        return chk

    expanded = [ord(c) >> 5 for c in hrp] + [0] + [ord(c) & 31 for c in hrp]
    mod = polymod(expanded + words + [0] * 6) ^ 0x2bc830a3
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(charset[w] for w in words + checksum)


assert bech32m("coffer", public_key) == v["recipient"]["text"], "recipient string"
sealed = base64.b64decode(v["sealedDek"]["wrappedDek"])
assert len(sealed) == 1180 and sealed[:4] == b"cxw1" and sealed[4:12] == fp, "sealed DEK header"
assert sealed[12:1132].hex() == v["sealedDek"]["xwingCiphertext"], "X-Wing ciphertext"
ad = ("coffer/v1/sealed-dek/" + backup_id + "/" + v["recipient"]["fingerprint"]).encode()
assert ad.decode() == v["sealedDek"]["ad"]
box = seal(bytes.fromhex(v["sealedDek"]["sharedSecret"]), dek, ad, base64.b64decode(v["sealedDek"]["wrappedDekNonce"]))
assert base64.b64decode(box) == sealed[1132:], "sealed DEK box"

# Recovery kit (§1c): each key is its BIP-39 mnemonic (256 key bits ‖ first 8 bits of SHA-256(key), 24 × 11 bits,
# big-endian), written out here; the kit's non-comment lines are exactly these, and the words give the keys back.
def mnemonic(key):
    bits = int.from_bytes(key + hashlib.sha256(key).digest()[:1], "big")
    return " ".join(wordlist[(bits >> (11 * (23 - i))) & 2047] for i in range(24))


def key_of(words):
    bits = 0
    for word in words.split(" "):
        bits = (bits << 11) | wordlist.index(word)
    key = (bits >> 8).to_bytes(32, "big")
    assert bits & 0xFF == hashlib.sha256(key).digest()[0], "kit word checksum"
    return key


kit = v["kit"]
kit_lines = [line for line in kit["text"].split("\n") if line.strip() and not line.startswith("#")]
assert kit_lines == ["coffer recovery kit v1", "server: " + kit["server"], "recipient: " + ring["recipientFingerprint"]] + [
    "key %d: %s" % (i + 1, mnemonic(bytes.fromhex(k))) for i, k in enumerate(ring["keys"])
], "kit lines"
kit_keys = [key_of(line.split(": ", 1)[1]) for line in kit_lines[3:]]
assert b"ckr1" + bytes([len(kit_keys)]) + b"".join(kit_keys) == ring_plain, "kit words give the keyring back"

ciphertext = base64.b64decode(v["archive"]["ciphertext"])
state = ctypes.create_string_buffer(lib.crypto_secretstream_xchacha20poly1305_statebytes())
assert lib.crypto_secretstream_xchacha20poly1305_init_pull(state, ciphertext[:24], dek) == 0
frame = ciphertext[24:]
assert len(frame) <= 65536 + 17
plain = ctypes.create_string_buffer(len(frame) - 17)
plain_len, tag = u64(), ctypes.c_ubyte()
assert lib.crypto_secretstream_xchacha20poly1305_pull(state, plain, ctypes.byref(plain_len), ctypes.byref(tag), frame,
                                                      u64(len(frame)), None, u64(0)) == 0
assert tag.value == 3, "TAG_FINAL"
tar = gzip.decompress(plain.raw[: plain_len.value])
assert len(tar) == v["archive"]["plaintextSizeBytes"] and hashlib.sha256(tar).hexdigest() == v["archive"]["plaintextSha256"]
assert tar[512:512 + 14] == v["archive"]["files"]["hello.txt"].encode()
# Restore attestations (§7): the attestation key (libsodium's KDF, context "cofferat"), vaultKey, HMAC-SHA-256 (Python's
# hmac), and the reader's five steps written out from the document: forged / malformed / mismatch / verified.
attest = json.loads(re.search(r"<!-- attestation-vectors[^>]*-->\s*```json\n(.*?)\n```", text, re.S).group(1))


def attestation_key(master_key):
    out = ctypes.create_string_buffer(32)
    assert lib.crypto_kdf_derive_from_key(out, size_t(32), u64(1), b"cofferat", master_key) == 0
    return out.raw


def sodium_sha256(message):
    out = ctypes.create_string_buffer(32)
    assert lib.crypto_hash_sha256(out, message, u64(len(message))) == 0
    return out.raw


def vault_key(key):
    return sodium_sha256(key)[:8].hex()


assert [k["masterKey"] for k in attest["keys"]] == [ring["keys"][0], v["masterKey"]]
for k in attest["keys"]:
    derived = attestation_key(bytes.fromhex(k["masterKey"]))
    assert derived.hex() == k["attestationKey"], "attestation key"
    assert vault_key(derived) == k["vaultKey"] == hashlib.sha256(derived).hexdigest()[:16], "vaultKey"

UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TIME_RE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]{1,9})?Z")


def canonical_b64(value):
    if not isinstance(value, str) or not re.fullmatch(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?", value):
        return None
    raw = base64.b64decode(value, validate=True)
    return raw if base64.b64encode(raw).decode() == value else None


def instant_ms(value):
    match = TIME_RE.fullmatch(value) if isinstance(value, str) else None
    if not match:
        return None
    y, mo, d, h, mi, s = (int(g) for g in match.groups()[:6])
    try:
        moment = datetime.datetime(y, mo, d, h, mi, s, tzinfo=datetime.timezone.utc)
    except ValueError:
        return None
    fraction = (match.group(7) or ".0")[1:]
    return int(moment.timestamp()) * 1000 + int((fraction + "00")[:3])


def is_count_or_null(value):
    return value is None or (type(value) is int and 0 <= value <= 2**53 - 1)


def payload_problem(p, key_vault_key):
    if not isinstance(p, dict) or p.get("format") != "coffer-attestation/v1":
        return "format"
    machine = p.get("drilledBy", {}).get("machine") if isinstance(p.get("drilledBy"), dict) else None
    client = p.get("drilledBy", {}).get("client") if isinstance(p.get("drilledBy"), dict) else None
    utf16 = lambda t: len(t.encode("utf-16-le")) // 2
    rules = [
        isinstance(p.get("accountId"), str) and UUID_RE.fullmatch(p["accountId"]),
        isinstance(p.get("backupId"), str) and UUID_RE.fullmatch(p["backupId"]),
        instant_ms(p.get("checkedAt")) is not None,
        p.get("result") in ("passed", "failed"),
        p.get("failure", 0) is None or (isinstance(p.get("failure"), str) and 1 <= utf16(p["failure"]) <= 500),
        (p.get("result") == "passed") == (p.get("failure", 0) is None),
        isinstance(p.get("checks"), list) and len(p["checks"]) <= 16
        and all(isinstance(c, str) and re.fullmatch(r"[a-z0-9-]{1,32}", c) for c in p["checks"]),
        all(m in p and is_count_or_null(p[m]) for m in ("ciphertextSizeBytes", "plaintextSizeBytes", "fileCount")),
        "ciphertextSha256" in p and (p["ciphertextSha256"] is None
                                     or (isinstance(p["ciphertextSha256"], str) and re.fullmatch(r"[0-9a-f]{64}", p["ciphertextSha256"]))),
        isinstance(machine, str) and utf16(machine) <= 255 and isinstance(client, str) and utf16(client) <= 64,
        p.get("vaultKey") == key_vault_key,
    ]
    return None if all(rules) else "members"


def read_attestation(keys, shown):
    payload, mac = canonical_b64(shown.get("payload")), canonical_b64(shown.get("mac"))
    if payload is None or mac is None or len(mac) != 32:
        return "forged", None
    for index, master_key in enumerate(keys):
        key = attestation_key(master_key)
        if hmac.compare_digest(hmac.new(key, payload, hashlib.sha256).digest(), mac):
            break
    else:
        return "forged", None
    try:
        p = json.loads(payload.decode("utf-8"))
    except ValueError:
        return "malformed", index
    if payload_problem(p, vault_key(key)):
        return "malformed", index
    same = (shown.get("accountId") == p["accountId"]
            and shown.get("backupId") == p["backupId"]
            and instant_ms(shown.get("checkedAt")) == instant_ms(p["checkedAt"])
            and shown.get("result") == p["result"])
    return ("verified" if same else "mismatch"), index


for a in attest["attestations"]:
    shown = a["shown"]
    assert base64.b64decode(shown["payload"]) == a["payloadText"].encode("utf-8"), a["name"] + ": payloadText"
    assert base64.b64decode(shown["mac"]).hex() == a["macHex"], a["name"] + ": macHex"
    verdict, index = read_attestation([bytes.fromhex(k) for k in a["ring"]], shown)
    assert verdict == a["verdict"], "%s: %s, not %s" % (a["name"], verdict, a["verdict"])
    if verdict == "verified":
        assert index == a["signedBy"], a["name"] + ": signedBy"
        signer = attestation_key(bytes.fromhex(a["ring"][index]))
        assert hmac.new(signer, a["payloadText"].encode("utf-8"), hashlib.sha256).hexdigest() == a["macHex"], a["name"] + ": mac"
assert [a["verdict"] for a in attest["attestations"]] == ["verified", "verified", "forged", "mismatch"]
print("ok")
