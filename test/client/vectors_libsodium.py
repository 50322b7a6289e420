"""Independent check of the docs/crypto.md test vectors against the system libsodium (ctypes, no Node).

Usage: python3 test/client/vectors_libsodium.py docs/crypto.md   (prints "ok" and exits 0 when every value matches)
"""
import base64
import ctypes
import ctypes.util
import gzip
import hashlib
import json
import re
import sys
import unicodedata

text = open(sys.argv[1], encoding="utf-8").read()
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
print("ok")
