"""Encrypted payloads: AES-256-GCM over every payload golem's client and workers write.

    key = EncryptionCodec.new_key()      # 32 random bytes: keep them in your secret store
    plugin = GolemPlugin(agent, encryption_key=key)
    client = await Client.connect("localhost:7233", plugins=[plugin])

Or set ``GOLEM_ENCRYPTION_KEY`` (``id:base64key``, several separated by commas; the first
encrypts, all decrypt, so a key can be rotated while old histories stay readable). Each
payload names its key id in its metadata; the id is bound to the ciphertext as associated
data, so relabelling a payload fails as surely as a wrong key. A payload that is not
encrypted (written before encryption was turned on) passes through untouched.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from golem.wire.converter import ENCRYPTED as ENCODING
from golem.wire.converter import ENV_VAR, KEY_ID, UNDECRYPTED, DecryptionError

_NONCE = 12
#: What ``GOLEM_ENCRYPTION_KEY`` holds, as its errors say.
KEY_FORMAT = (
    "id:base64key[,id:base64key...], each key 32 random bytes in base64, e.g. "
    "2026-11:$(python3 -c 'import os,base64;print(base64.b64encode(os.urandom(32)).decode())')"
)


class EncryptionCodec(PayloadCodec):
    """AES-256-GCM payload codec holding named keys; ``key_id`` names the one that encrypts."""

    def __init__(self, keys: Mapping[str, bytes], key_id: str | None = None) -> None:
        if not keys:
            raise ValueError("EncryptionCodec needs at least one key")
        for name, key in keys.items():
            if not name or "," in name or ":" in name:
                raise ValueError(f"encryption key id {name!r}: use a non-empty id without , or :")
            if len(key) != 32:
                raise ValueError(
                    f"encryption key {name!r} is {len(key)} bytes; AES-256 needs exactly 32"
                )
        self.key_id = key_id if key_id is not None else next(iter(keys))
        if self.key_id not in keys:
            raise ValueError(f"key_id {self.key_id!r} is not among the keys {sorted(keys)}")
        self._ciphers = {name: AESGCM(bytes(key)) for name, key in keys.items()}
        self._metadata = {"encoding": ENCODING, KEY_ID: self.key_id.encode()}

    @staticmethod
    def new_key() -> bytes:
        """32 random bytes: a fresh AES-256 key."""
        return AESGCM.generate_key(bit_length=256)

    @staticmethod
    def key_fingerprint(key: bytes) -> str:
        """The id a key gets when none is given: a short hash that does not reveal the key."""
        return "k-" + hashlib.sha256(key).hexdigest()[:12]

    @classmethod
    def parse(cls, spec: str | bytes) -> EncryptionCodec:
        """Keys from raw bytes or from ``"id:base64,id2:base64"`` (the first encrypts);
        a bare base64 key gets its fingerprint as id."""
        if isinstance(spec, bytes):
            return cls({cls.key_fingerprint(spec): spec})
        keys: dict[str, bytes] = {}
        for item in (part.strip() for part in spec.split(",")):
            if not item:
                continue
            name, sep, encoded = item.rpartition(":")
            key = _decode_key(encoded)
            if len(key) != 32:
                raise ValueError(
                    f"{ENV_VAR}: key {name or '(no id)'!r} is {len(key)} bytes once "
                    f"base64-decoded, not 32; expected {KEY_FORMAT}"
                )
            keys[name if sep else cls.key_fingerprint(key)] = key
        if not keys:
            raise ValueError(f"{ENV_VAR}: no key given; expected {KEY_FORMAT}")
        return cls(keys)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> EncryptionCodec | None:
        """The codec ``GOLEM_ENCRYPTION_KEY`` describes, or ``None`` when it is unset or empty."""
        spec = (os.environ if environ is None else environ).get(ENV_VAR, "").strip()
        return cls.parse(spec) if spec else None

    @property
    def key_ids(self) -> list[str]:
        return list(self._ciphers)

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        """``payloads`` decrypted; one this codec cannot decrypt stays sealed, marked with why,
        and its reader (golem's converter) raises ``DecryptionError``. So a workflow task
        fails in the workflow's code, where golem can end a run cleanly even mid-replay
        (golem.worker.unreadable), not while the SDK decodes the task."""
        return [self._decrypt_or_mark(p) for p in payloads]

    def _decrypt_or_mark(self, payload: Payload) -> Payload:
        try:
            return self.decrypt(payload)
        except DecryptionError as exc:
            marked = Payload()
            marked.CopyFrom(payload)
            marked.metadata[UNDECRYPTED] = exc.message.encode()
            return marked

    def encrypt(self, payload: Payload) -> Payload:
        nonce = os.urandom(_NONCE)
        sealed = self._ciphers[self.key_id].encrypt(
            nonce, payload.SerializeToString(), self._metadata[KEY_ID]
        )
        return Payload(metadata=self._metadata, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload  # written before encryption was on: readable as it is
        raw_id = payload.metadata.get(KEY_ID, b"")
        key_id = raw_id.decode(errors="replace")
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise DecryptionError(
                f"cannot decrypt: key id {key_id!r} is not among this client's keys "
                f"({', '.join(self._ciphers)}); add that key to {ENV_VAR} or "
                "GolemPlugin(encryption_key=...)"
            )
        data = payload.data
        try:
            plain = cipher.decrypt(data[:_NONCE], data[_NONCE:], raw_id)
        except InvalidTag:
            raise DecryptionError(
                f"cannot decrypt: the payload with key id {key_id!r} failed to decrypt: the "
                "key held under that id is not the one it was encrypted with, or the payload "
                "was altered"
            ) from None
        return Payload.FromString(plain)


def _decode_key(encoded: str) -> bytes:
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(
            f"{ENV_VAR}: a key is not valid base64 ({exc}); expected {KEY_FORMAT}"
        ) from None
