"""Authentication of client connections.

With ``security-enabled`` false every connection is accepted. With it true, users come from
``artemis-users.properties`` beside ``broker.xml``: the file Artemis's default JAAS
PropertiesLoginModule reads, one ``user = password`` per line, ``#`` or ``!`` comments. A
password is either plain or ``ENC(iterations:salt:hash)``, hashed one-way as Artemis's
``artemis user add`` and ``artemis mask --hash`` write it (:mod:`artemis_py.config.passwords`);
both compare in constant time. Like Artemis's login module (``reload=true`` in the login.config
``artemis create`` writes) the file is read again when it changes, so ``artemis-py user add``
takes effect on a running node; the check is a ``stat`` at most once a second.

Checking a hash costs about a millisecond (1024 PBKDF2 rounds), so, like Artemis's
authentication cache, a successful login is remembered (as a keyed digest of the passcode,
never the passcode) until the file changes.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from artemis_py.config import passwords

log = logging.getLogger("artemis_py.security")

USERS_FILE = "artemis-users.properties"
ROLES_FILE = "artemis-roles.properties"
#: Seconds between two looks at the users file's modification time.
RELOAD_CHECK_INTERVAL = 1.0
#: Remembered successful logins (Artemis's authentication-cache-size default).
CACHE_SIZE = 1000


@dataclass(frozen=True, slots=True)
class Entry:
    """One ``key = value`` line of a properties file (1-based line number)."""

    line: int
    key: str
    value: str


def parse_line(raw: str) -> tuple[str, str] | None:
    """``(key, value)`` of one properties line, or None for a blank line or a comment.

    The key ends at the first ``=``, ``:`` or white space, as in java.util.Properties; the
    separator may be surrounded by white space. A line with no separator is a key with an
    empty value.
    """
    line = raw.strip()
    if not line or line.startswith(("#", "!")):
        return None
    end = len(line)
    for index, char in enumerate(line):
        if char in "=:" or char.isspace():
            end = index
            break
    key, rest = line[:end], line[end:].lstrip()
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip()
    return key, rest


def read_properties(path: Path) -> list[Entry]:
    """The entries of a properties file (UTF-8), in file order."""
    entries = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        parsed = parse_line(raw)
        if parsed is not None:
            entries.append(Entry(number, *parsed))
    return entries


def _load_users(path: Path) -> dict[str, str]:
    users: dict[str, str] = {}
    for entry in read_properties(path):
        where = f"{path}:{entry.line}"
        if not entry.key:
            log.warning("%s: not a 'user = password' line, ignored", where)
            continue
        if passwords.is_enc(entry.value):
            try:
                passwords.check_hash(entry.value)
            except ValueError as exc:
                log.warning("%s: user %r cannot log in: %s", where, entry.key, exc)
        users[entry.key] = entry.value
    return users


class Authenticator:
    """Checks login/passcode pairs."""

    def __init__(
        self, enabled: bool, users: dict[str, str] | None = None, path: Path | None = None
    ) -> None:
        self.enabled = enabled
        self.users = users or {}
        self.path = path
        self._stamp = self._file_stamp()
        self._checked_at = time.monotonic()
        self._cache_key = secrets.token_bytes(32)
        self._cache: dict[str, bytes] = {}
        self._decoy = passwords.hash_password(secrets.token_hex(16)) if enabled else ""

    @classmethod
    def from_directory(cls, enabled: bool, directory: Path | None) -> Authenticator:
        if not enabled:
            return cls(False)
        path = (directory or Path.cwd()) / USERS_FILE
        if not path.is_file():
            log.warning(
                "security-enabled is true but %s does not exist: no user can log in "
                "(create it with 'artemis-py user add', or set "
                "<security-enabled>false</security-enabled>)",
                path,
            )
            return cls(True, {}, path)
        return cls(True, _load_users(path), path)

    def _file_stamp(self) -> tuple[int, int] | None:
        try:
            status = os.stat(self.path) if self.path else None
        except OSError:
            return None
        return (status.st_mtime_ns, status.st_size) if status else None

    def _maybe_reload(self) -> None:
        now = time.monotonic()
        if self.path is None or now - self._checked_at < RELOAD_CHECK_INTERVAL:
            return
        self._checked_at = now
        stamp = self._file_stamp()
        if stamp == self._stamp:
            return
        self._stamp = stamp
        self._cache.clear()
        try:
            self.users = _load_users(self.path) if stamp else {}
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s, keeping the users read before: %s", self.path, exc)
            return
        log.info("%s changed: %d users", self.path, len(self.users))

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        if not self.enabled:
            return True
        self._maybe_reload()
        user, candidate = login or "", passcode or ""
        stored = self.users.get(user)
        if stored is None:
            # Check anyway, so that an unknown user takes as long as a wrong password.
            passwords.verify(self._decoy, candidate)
            return False
        digest = hmac.new(self._cache_key, candidate.encode(), hashlib.sha256).digest()
        remembered = self._cache.get(user)
        if remembered is not None and hmac.compare_digest(remembered, digest):
            return True
        if not passwords.verify(stored, candidate):
            return False
        if len(self._cache) >= CACHE_SIZE:
            self._cache.pop(next(iter(self._cache)))
        self._cache[user] = digest
        return True
