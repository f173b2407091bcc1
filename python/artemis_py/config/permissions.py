"""``<security-settings>`` as data: the permissions and which roles hold them where.

Artemis "Authentication & Authorization", role-based security for addresses: each
``<security-setting match="...">`` lists, per permission, the roles granted it on the
addresses its match covers. The most specific matching setting applies *alone*: unlike
address-settings, settings are not merged, so a more specific match that omits a permission
denies it. Matching and enforcement live in :mod:`artemis_py.broker.authorization`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["FQQN_SEPARATOR", "Permission", "SecuritySettingConfig"]

#: Between address and queue in a fully qualified queue name (``address::queue``).
FQQN_SEPARATOR = "::"


class Permission(enum.StrEnum):
    """A permission, spelled as ``<permission type="...">`` spells it."""

    SEND = "send"
    CONSUME = "consume"
    BROWSE = "browse"
    CREATE_ADDRESS = "createAddress"
    DELETE_ADDRESS = "deleteAddress"
    CREATE_DURABLE_QUEUE = "createDurableQueue"
    DELETE_DURABLE_QUEUE = "deleteDurableQueue"
    CREATE_NON_DURABLE_QUEUE = "createNonDurableQueue"
    DELETE_NON_DURABLE_QUEUE = "deleteNonDurableQueue"
    MANAGE = "manage"
    # Newer Artemis: read-only and mutating management operations, only with
    # management-message-rbac (not implemented: parsed, named in the start-up warning).
    VIEW = "view"
    EDIT = "edit"


@dataclass(frozen=True, slots=True)
class SecuritySettingConfig:
    """One ``<security-setting>``: ``grants`` maps each permission it lists to the roles
    holding it (``<role-mapping>`` already applied). A permission it does not list is held by
    nobody on the addresses it is the most specific match for."""

    match: str
    grants: tuple[tuple[Permission, frozenset[str]], ...] = ()
    line: int = 0

    def roles(self, permission: Permission) -> frozenset[str]:
        for granted, roles in self.grants:
            if granted is permission:
                return roles
        return frozenset()
