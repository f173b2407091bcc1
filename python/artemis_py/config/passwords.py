"""Masked and hashed passwords, as Apache Artemis's default codec writes them.

Artemis protects passwords with ``DefaultSensitiveStringCodec`` (Artemis "Masking Passwords"),
and an Artemis user's files must work here unchanged, so both of its algorithms are reproduced
bit for bit:

- two-way ("masked", for passwords the node itself must send: ``cluster-password``, key store
  passwords): Blowfish/ECB/PKCS5Padding under a key (default ``clusterpassword``, or the
  ``ARTEMIS_DEFAULT_SENSITIVE_STRING_CODEC_KEY`` environment variable, or ``key=`` of
  ``<password-codec>``), the cipher text written as Java's ``new BigInteger(bytes).toString(16)``
  writes it: the bytes read as a *signed* number, so a cipher text whose first bit is set prints
  as ``-`` and the magnitude, and leading zero digits are dropped. Unmasking turns the number back
  into Java's shortest two's-complement bytes and left-pads them with zero bytes to a multiple of
  the 8-byte block, exactly as Artemis does (for one cipher text in 512, starting ``ff`` then a
  byte >= ``80``, that padding is wrong and Artemis cannot unmask its own value; `mask` refuses
  those passwords instead of printing a value nothing can read).
- one-way ("hashed", for user passwords in ``artemis-users.properties``): PBKDF2WithHmacSHA1,
  1024 iterations, a random 32-byte salt and a 64-byte key, written as
  ``iterations:SALT:HASH`` in upper-case hex; verification takes the iteration count, salt and
  hash length from the stored value.

Strings are UTF-8 (Java's default charset since Java 18, and what its PBKDF2 uses).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from dataclasses import dataclass

from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
from cryptography.hazmat.primitives import padding
from cryptography.hazmat.primitives.ciphers import Cipher, modes

DEFAULT_KEY = "clusterpassword"
# Artemis reads this system property, then this environment variable (its name upper-cased with
# dots as underscores), when no key is given.
KEY_ENVIRONMENT = "ARTEMIS_DEFAULT_SENSITIVE_STRING_CODEC_KEY"
# The only codec class we can honour in <password-codec>.
DEFAULT_CODEC_CLASS = "org.apache.activemq.artemis.utils.DefaultSensitiveStringCodec"
ITERATIONS = 1024
SALT_LENGTH = 32
KEY_LENGTH = 64
BLOCK = 8

_SIGNED_HEX = re.compile(r"[+-]?[0-9a-fA-F]+")
_HASH = re.compile(r"(\d+):([0-9a-fA-F]*):([0-9a-fA-F]+)")


def is_enc(value: str) -> bool:
    """True for a value wrapped in ``ENC(...)`` (Artemis's PasswordMaskingUtil.isEncMasked)."""
    return value.startswith("ENC(") and value.endswith(")")


def unwrap(value: str) -> str:
    return value[4:-1] if is_enc(value) else value


def _key_bytes(key: str | None) -> bytes:
    if key is None:
        key = os.environ.get(KEY_ENVIRONMENT) or DEFAULT_KEY
    raw = key.encode()
    # Java's Blowfish takes keys of 32 to 448 bits.
    if not 4 <= len(raw) <= 56:
        raise ValueError(f"a Blowfish key must be 4 to 56 bytes long, not {len(raw)}")
    return raw


def _cipher(key: str | None) -> Cipher[modes.ECB]:
    return Cipher(Blowfish(_key_bytes(key)), modes.ECB())


def _java_hex(data: bytes) -> str:
    """``new BigInteger(data).toString(16)``: signed, lower case, no leading zeros."""
    return format(int.from_bytes(data, "big", signed=True), "x")


def _java_bytes(text: str) -> bytes:
    """``new BigInteger(text, 16).toByteArray()``: the shortest two's-complement bytes."""
    if not _SIGNED_HEX.fullmatch(text):
        raise ValueError("not a masked password (expected hexadecimal digits inside ENC(...))")
    number = int(text, 16)
    bits = number.bit_length() if number >= 0 else (-number - 1).bit_length()
    return number.to_bytes(bits // 8 + 1, "big", signed=True)


def reveal_bare(masked: str, key: str | None = None) -> str:
    """Unmask a two-way masked value given without ``ENC()``; ValueError if it is not one."""
    data = _java_bytes(masked.strip())
    if len(data) % BLOCK:
        # Artemis pads the front with zero bytes up to whole blocks.
        data = bytes(BLOCK - len(data) % BLOCK) + data
    decryptor = _cipher(key).decryptor()
    unpadder = padding.PKCS7(64).unpadder()
    try:
        plain = unpadder.update(decryptor.update(data) + decryptor.finalize()) + unpadder.finalize()
    except ValueError:
        raise ValueError(
            "cannot unmask it: it was not masked with this key (Artemis's default "
            "'clusterpassword', or the key= of <password-codec>) or it is damaged"
        ) from None
    # Java's new String(bytes) replaces undecodable bytes.
    return plain.decode("utf-8", errors="replace")


def reveal(value: str, key: str | None = None) -> str:
    """The plain password for a value as written in broker.xml.

    An ``ENC(...)`` value is unmasked with Artemis's default codec (two-way); anything else is
    returned unchanged. A malformed ``ENC`` value raises ValueError with a clear message.
    """
    stripped = value.strip()
    if not is_enc(stripped):
        return value
    return reveal_bare(unwrap(stripped), key)


def resolve_mask(value: str, mask_password: bool | None, codec: PasswordCodec | None = None) -> str:
    """A broker.xml password as Artemis's PasswordMaskingUtil.resolveMask reads it.

    ``mask_password`` is ``<mask-password>``: absent (None), an ``ENC(...)`` value is unmasked
    and anything else is plain; true, every value is masked (with or without ``ENC()``); false,
    every value is plain, ``ENC(...)`` included. ``codec`` is ``<password-codec>``.
    """
    key = codec.key if codec else None
    if mask_password is None:
        return reveal(value, key)
    if mask_password:
        # Artemis would try to unmask "ENC(...)" itself and fail; the wrapper is accepted.
        return reveal_bare(unwrap(value.strip()), key)
    return value


def mask_bare(plain: str, key: str | None = None) -> str:
    """The two-way masked value without ``ENC()``, as ``artemis mask`` prints it."""
    encryptor = _cipher(key).encryptor()
    padder = padding.PKCS7(64).padder()
    padded = padder.update(plain.encode()) + padder.finalize()
    masked = _java_hex(encryptor.update(padded) + encryptor.finalize())
    try:
        ok = reveal_bare(masked, key) == plain
    except ValueError:
        ok = False
    if not ok:
        # The 1-in-512 cipher text Artemis's hex round trip loses (see the module doc).
        raise ValueError(
            "Artemis's default codec cannot unmask its own masked value for this password "
            "and key (a quirk of its hex encoding): choose another password or key"
        )
    return masked


def mask(plain: str, key: str | None = None) -> str:
    """``ENC(...)`` of `plain` masked with Artemis's default codec (two-way)."""
    return f"ENC({mask_bare(plain, key)})"


def _pbkdf2(plain: str, salt: bytes, iterations: int, length: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha1", plain.encode(), salt, iterations, length)


def hash_bare(plain: str) -> str:
    """``iterations:SALT:HASH`` as ``artemis mask --hash`` prints it."""
    salt = secrets.token_bytes(SALT_LENGTH)
    digest = _pbkdf2(plain, salt, ITERATIONS, KEY_LENGTH)
    return f"{ITERATIONS}:{salt.hex().upper()}:{digest.hex().upper()}"


def hash_password(plain: str) -> str:
    """``ENC(iterations:SALT:HASH)``: the one-way value for ``artemis-users.properties``."""
    return f"ENC({hash_bare(plain)})"


def check_hash(stored: str) -> None:
    """ValueError unless `stored` (with or without ``ENC()``) is a one-way hash Artemis reads."""
    match = _HASH.fullmatch(unwrap(stored.strip()))
    if match is None:
        raise ValueError(
            "not a hashed password (expected ENC(iterations:salt:hash) as "
            "'artemis mask --hash' or 'artemis-py mask --hash' prints it)"
        )
    if int(match[1]) < 1 or len(match[2]) % 2 or len(match[3]) % 2:
        raise ValueError("damaged hashed password (iteration count or hex digits)")


def verify(stored: str, candidate: str) -> bool:
    """Does `candidate` match a password as stored in ``artemis-users.properties``?

    ``ENC(...)`` is a one-way hash (Artemis's SecureHashProcessor); anything else is the plain
    password (its NoHashProcessor). Both compare in constant time; a malformed hash matches
    nothing.
    """
    if not is_enc(stored):
        return hmac.compare_digest(stored.encode(), candidate.encode())
    try:
        check_hash(stored)
    except ValueError:
        return False
    iterations, salt, digest = unwrap(stored).split(":")
    expected = bytes.fromhex(digest)
    actual = _pbkdf2(candidate, bytes.fromhex(salt), int(iterations), len(expected))
    return hmac.compare_digest(actual, expected)


@dataclass(frozen=True, slots=True)
class PasswordCodec:
    """A ``<password-codec>`` value: Artemis's default codec and its ``key=`` parameter."""

    key: str | None = None


def parse_codec(description: str) -> PasswordCodec:
    """Read ``class;name=value;...`` (Artemis's PasswordMaskingUtil.getCodec format).

    Only Artemis's own DefaultSensitiveStringCodec can be honoured (any other names a Java
    class we cannot run); of its parameters, ``key`` sets the Blowfish key and ``algorithm``
    must be ``two-way``, the only one that can unmask.
    """
    name, *parameters = description.strip().split(";")
    if name.strip() != DEFAULT_CODEC_CLASS:
        raise ValueError(
            f"password codec '{name.strip()}' is a Java class artemis-py cannot run: only "
            f"Artemis's default {DEFAULT_CODEC_CLASS} (optionally with ;key=...) is supported"
        )
    key = None
    for parameter in parameters:
        pname, sep, pvalue = parameter.partition("=")
        if not sep or "=" in pvalue:
            raise ValueError(f"password codec parameter '{parameter}' is not name=value")
        if pname == "key":
            _key_bytes(pvalue)
            key = pvalue
        elif pname == "algorithm" and pvalue != "two-way":
            raise ValueError(
                f"password codec algorithm '{pvalue}' cannot unmask passwords (only two-way can)"
            )
        # Artemis's default codec ignores any other parameter, and so do we.
    return PasswordCodec(key)
