"""Authentication of client connections.

With ``security-enabled`` false every connection is accepted. With it true, users come from
``artemis-users.properties`` beside ``broker.xml`` (the file Artemis's default JAAS
PropertiesLoginModule reads: one ``user = password`` per line, ``#`` comments). Hashed
``ENC(...)`` passwords are not supported yet; such users cannot log in and a warning says so.
"""

from __future__ import annotations

import hmac
import logging
from pathlib import Path

log = logging.getLogger("artemis_py.security")

USERS_FILE = "artemis-users.properties"


class Authenticator:
    """Checks login/passcode pairs."""

    def __init__(self, enabled: bool, users: dict[str, str] | None = None) -> None:
        self.enabled = enabled
        self.users = users or {}

    @classmethod
    def from_directory(cls, enabled: bool, directory: Path | None) -> Authenticator:
        if not enabled:
            return cls(False)
        users: dict[str, str] = {}
        path = (directory or Path.cwd()) / USERS_FILE
        if not path.is_file():
            log.warning(
                "security-enabled is true but %s does not exist: no user can log in "
                "(create it, or set <security-enabled>false</security-enabled>)",
                path,
            )
            return cls(True, users)
        for number, raw in enumerate(path.read_text().splitlines(), 1):
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            user, sep, password = line.partition("=")
            if not sep:
                user, sep, password = line.partition(":")
            if not sep:
                log.warning("%s:%d: not a 'user = password' line, ignored", path, number)
                continue
            password = password.strip()
            if password.startswith("ENC("):
                log.warning("%s:%d: hashed passwords are not supported yet", path, number)
                continue
            users[user.strip()] = password
        return cls(True, users)

    def authenticate(self, login: str | None, passcode: str | None) -> bool:
        if not self.enabled:
            return True
        expected = self.users.get(login or "")
        if expected is None:
            return False
        return hmac.compare_digest(expected.encode(), (passcode or "").encode())
