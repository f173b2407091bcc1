"""Authorization: which authenticated user may do what on which address.

Theory of operation
-------------------
Artemis "Authentication & Authorization", role-based security for addresses:

* a user has roles: ``artemis-roles.properties`` beside ``broker.xml``, one
  ``role = user1,user2`` per line (the file Artemis's PropertiesLoginModule reads);
* a ``<security-setting match="...">`` grants each permission to roles
  (:mod:`artemis_py.config.permissions`). For an address, the *most specific* matching setting
  applies alone (exact beats wildcard, then the precedence of
  :func:`~artemis_py.config.wildcards.precedence_key`, the one address-settings use); its
  permissions are not merged with less specific ones, so omitting a permission denies it;
* with a queue (consume, browse, creating or deleting a queue, a send to ``address::queue``),
  a setting whose match is exactly the fully qualified queue name ``address::queue`` replaces
  the address's (Artemis SecurityStoreImpl; wildcards do not apply to FQQNs);
* no matching setting: nothing is allowed (Artemis's empty default). With
  ``security-enabled`` false nothing is checked at all.

An operation is allowed when the user holds one of the roles its permission is granted to.
A :class:`Subject` is one authenticated user with its roles (the JAAS word); sessions check
every operation with :meth:`Subject.check` before doing anything, so a refused operation
creates and stores nothing. Settings are read at start; the roles file again when it
changes (a connection keeps the roles it logged in with).

Cluster links (node to node, authenticated with cluster-user / cluster-password) are a
protocol of their own and never come here.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path

from artemis_py.broker.authentication import RELOAD_CHECK_INTERVAL, ROLES_FILE, read_properties
from artemis_py.broker.broker import Broker, BrokerError
from artemis_py.broker.queue import Queue
from artemis_py.config import BrokerConfig, RoutingType
from artemis_py.config.permissions import FQQN_SEPARATOR, Permission, SecuritySettingConfig
from artemis_py.config.wildcards import (
    DEFAULT_WILDCARDS,
    AddressMatcher,
    WildcardSyntax,
    precedence_key,
)

__all__ = [
    "ROLES_FILE",
    "AuthorizationError",
    "Authorizer",
    "Permission",
    "Subject",
    "read_roles",
    "send_creates",
]

log = logging.getLogger("artemis_py.security")


class AuthorizationError(BrokerError):
    """A user lacks a permission; the text names the user, the permission and the address."""


def _stamp(path: Path | None) -> tuple[int, int] | None:
    try:
        status = os.stat(path) if path else None
    except OSError:
        return None
    return (status.st_mtime_ns, status.st_size) if status else None


class Authorizer:
    """The node's security-settings and users' roles; answers "may these roles do that?"."""

    def __init__(
        self,
        enabled: bool,
        settings: Iterable[SecuritySettingConfig] = (),
        roles: Mapping[str, frozenset[str]] | None = None,
        wildcards: WildcardSyntax = DEFAULT_WILDCARDS,
        path: Path | None = None,
    ) -> None:
        self.enabled = enabled
        self.settings = tuple(settings)
        self.roles = dict(roles or {})
        self.path = path  # the roles file, read again when it changes
        self._stamp = _stamp(path)
        self._checked_at = time.monotonic()
        self._syntax = wildcards
        self._compiled = tuple((AddressMatcher(s.match, wildcards), s) for s in self.settings)
        self._exact = {s.match: s for s in self.settings}
        self._fqqn = any(FQQN_SEPARATOR in s.match for s in self.settings)
        self._for_address = lru_cache(maxsize=4096)(self._most_specific)

    @classmethod
    def from_config(cls, config: BrokerConfig, directory: Path | None) -> Authorizer:
        """The node's authorizer: settings from ``config``, roles from ``ROLES_FILE`` in
        ``directory`` (warnings for what would refuse everything, and for bad lines)."""
        if not config.security_enabled:
            return cls(False)
        path = (directory or Path.cwd()) / ROLES_FILE
        if not config.security_settings:
            log.warning(
                "security-enabled is true and there are no <security-settings>: every "
                "operation is refused (Artemis's default); grant permissions to roles with "
                '<security-setting match="#">, see docs/security.md'
            )
        if not path.is_file():
            log.warning(
                "security-enabled is true but %s does not exist: no user has a role, so "
                "every operation is refused (one 'role = user1,user2' per line)",
                path,
            )
            return cls(True, config.security_settings, {}, config.wildcards, path)
        return cls(True, config.security_settings, read_roles(path), config.wildcards, path)

    def subject(self, user: str | None) -> Subject:
        """The authenticated ``user`` with its roles (as the roles file says now)."""
        self._maybe_reload()
        return Subject(self, user, self.roles.get(user or "", frozenset()))

    def _maybe_reload(self) -> None:
        # Like the users file (broker/authentication.py): a stat at most once a second, so that
        # `artemis-py user add --role` takes effect on a running node, for new connections.
        now = time.monotonic()
        if self.path is None or now - self._checked_at < RELOAD_CHECK_INTERVAL:
            return
        self._checked_at = now
        stamp = _stamp(self.path)
        if stamp == self._stamp:
            return
        self._stamp = stamp
        try:
            self.roles = read_roles(self.path) if stamp else {}
        except (OSError, UnicodeDecodeError) as exc:
            log.warning("cannot read %s, keeping the roles read before: %s", self.path, exc)
            return
        log.info("%s changed: %d users with roles", self.path, len(self.roles))

    def setting(self, address: str, queue: str | None = None) -> SecuritySettingConfig | None:
        """The one security-setting that applies (see the module doc), or None."""
        if queue is not None and self._fqqn:
            exact = self._exact.get(f"{address}{FQQN_SEPARATOR}{queue}")
            if exact is not None:
                return exact
        return self._for_address(address)

    def _most_specific(self, address: str) -> SecuritySettingConfig | None:
        found = [s for matcher, s in self._compiled if matcher.matches(address)]
        return min(found, key=lambda s: precedence_key(s.match, self._syntax), default=None)

    def allowed(
        self, roles: frozenset[str], permission: Permission, address: str, queue: str | None
    ) -> bool:
        if not self.enabled:
            return True
        setting = self.setting(address, queue)
        return setting is not None and not roles.isdisjoint(setting.roles(permission))


class Subject:
    """One authenticated user and its roles: what its session may do."""

    __slots__ = ("authorizer", "roles", "user")

    def __init__(self, authorizer: Authorizer, user: str | None, roles: frozenset[str]) -> None:
        self.authorizer = authorizer
        self.user = user
        self.roles = roles

    @property
    def checked(self) -> bool:
        """False with security off: every check passes."""
        return self.authorizer.enabled

    def allowed(self, permission: Permission, address: str, queue: str | None = None) -> bool:
        return self.authorizer.allowed(self.roles, permission, address, queue)

    def check(self, permission: Permission, address: str, queue: str | None = None) -> None:
        """Raise :class:`AuthorizationError` unless the user holds ``permission`` there."""
        if self.allowed(permission, address, queue):
            return
        where = (
            f"address '{address}'" if queue is None else f"queue '{queue}' of address '{address}'"
        )
        raise AuthorizationError(
            f"Security Error: user '{self.user}' does not have permission "
            f"'{permission.value}' on {where}"
        )


#: A subject for sessions that are never checked (security off).
UNCHECKED = Subject(Authorizer(False), None, frozenset())


def send_creates(
    broker: Broker, address: str, routing_type: RoutingType | None
) -> list[tuple[Permission, str, str | None]]:
    """What a send to ``address`` (not a FQQN) would auto-create, as the permissions that
    needs (the checks Artemis's STOMP send makes before routing): the address when it does
    not exist (createAddress), and the anycast queue named like it when routing would create
    one (createDurableQueue: auto-created queues are durable). Mirrors
    :meth:`Broker.resolve_address` and :meth:`Broker.route`."""
    settings = broker.address_settings(address)
    existing = broker.post_office.address(address)
    needed: list[tuple[Permission, str, str | None]] = []
    if existing is None:
        if not settings.auto_create_addresses:
            return needed  # the send is refused anyway: the address does not exist
        needed.append((Permission.CREATE_ADDRESS, address, None))
        types = {routing_type or settings.default_address_routing_type}
        queues: Sequence[Queue] = ()
    else:
        types = set(existing.routing_types)
        if routing_type is not None and settings.auto_create_addresses:
            types.add(routing_type)
        queues = tuple(existing.queues)
    if (
        routing_type is not RoutingType.MULTICAST
        and RoutingType.ANYCAST in types
        and settings.auto_create_queues
        and not any(q.routing_type is RoutingType.ANYCAST for q in queues)
        and (routing_type is RoutingType.ANYCAST or not queues)
        and not broker.remote_bindings(address)  # routed to the cluster instead
    ):
        needed.append((Permission.CREATE_DURABLE_QUEUE, address, address))
    return needed


def read_roles(path: Path) -> dict[str, frozenset[str]]:
    """User -> roles from an ``artemis-roles.properties`` file (``role = user1,user2``)."""
    roles: dict[str, set[str]] = {}
    for entry in read_properties(path):
        users = [u.strip() for u in entry.value.split(",") if u.strip()]
        if not entry.key or not users:
            log.warning("%s:%d: not a 'role = user1,user2' line, ignored", path, entry.line)
            continue
        for user in users:
            roles.setdefault(user, set()).add(entry.key)
    return {user: frozenset(r) for user, r in roles.items()}
