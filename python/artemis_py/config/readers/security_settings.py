"""``<security-settings>``: ``<security-setting match>`` with its ``<permission type roles>``,
and ``<role-mapping from to>`` (Artemis "Authentication & Authorization").

As Artemis reads them: ``roles`` is a comma-separated list (each name trimmed); a role-mapping
lets the external role ``from`` hold every permission granted to any role in ``to``, whatever
the order of the elements; the old names ``createTempQueue`` / ``deleteTempQueue`` mean the
non-durable queue permissions. Unlike Artemis (which logs and ignores it), an unknown
permission type is an error with a suggestion, as every misspelled name in broker.xml is.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader
from ..permissions import FQQN_SEPARATOR, Permission, SecuritySettingConfig
from ..vocabulary import suggest
from ..wildcards import WildcardSyntax
from ..xmlreader import XmlElement
from .addresses import check_match

__all__ = ["read_security_settings"]

_LEGACY = {
    "createTempQueue": Permission.CREATE_NON_DURABLE_QUEUE,
    "deleteTempQueue": Permission.DELETE_NON_DURABLE_QUEUE,
}
_TYPES = {p.value: p for p in Permission} | _LEGACY
# Only meaningful with management-message-rbac, which artemis-py does not implement.
_NOT_IMPLEMENTED = frozenset({Permission.VIEW, Permission.EDIT})


def read_security_settings(
    reader: ElementReader, kids: Children, wildcards: WildcardSyntax
) -> tuple[SecuritySettingConfig, ...]:
    if "security-settings" not in kids:
        return ()
    section = reader.children(kids["security-settings"][0])
    mappings = _role_mappings(reader, section.get("role-mapping", []))
    settings: dict[str, SecuritySettingConfig] = {}
    for element in section.get("security-setting", []):
        match = reader.attribute(element, "match")
        setting_kids = reader.children(element)
        if match is None or not _check(reader, element, match, wildcards):
            continue
        grants = _grants(reader, setting_kids.get("permission", []), mappings)
        if match in settings:
            reader.error(
                element,
                f"another security-setting already matches '{match}' (line {settings[match].line})",
                label="security-setting@match",
            )
            continue
        settings[match] = SecuritySettingConfig(match, grants, element.line)
    return tuple(settings.values())


def _check(reader: ElementReader, element: XmlElement, match: str, syntax: WildcardSyntax) -> bool:
    if FQQN_SEPARATOR in match and (syntax.any_words in match or syntax.single_word in match):
        # Artemis: a fully qualified queue name match is exact; wildcards do not apply.
        reader.error(
            element,
            f"a fully qualified queue name match ('{match}') cannot use wildcards",
            label="security-setting@match",
        )
        return False
    return check_match(reader, element, match, syntax, "security-setting")


def _role_mappings(reader: ElementReader, elements: list[XmlElement]) -> dict[str, set[str]]:
    """Internal role -> the external roles that hold whatever it is granted."""
    mapped: dict[str, set[str]] = {}
    for element in elements:
        reader.children(element)
        external = reader.attribute(element, "from")
        internal = reader.attribute(element, "to")
        if external is None or internal is None:
            continue
        for role in _split(internal):
            mapped.setdefault(role, set()).add(external)
    return mapped


def _grants(
    reader: ElementReader, elements: list[XmlElement], mappings: dict[str, set[str]]
) -> tuple[tuple[Permission, frozenset[str]], ...]:
    grants: dict[Permission, set[str]] = {}
    for element in elements:
        reader.children(element)
        name = reader.attribute(element, "type")
        roles = reader.attribute(element, "roles")
        if name is None or roles is None:
            continue
        permission = _TYPES.get(name)
        if permission is None:
            hint = suggest(name, frozenset(p.value for p in Permission))
            reader.error(
                element,
                f"unknown permission type '{name}'"
                + (f"; did you mean '{hint}'?" if hint else f" (one of {_known()})"),
                label="permission@type",
            )
            continue
        if name in _LEGACY:
            reader.warn(element, f"'{name}' is deprecated; use '{permission.value}'")
        if permission in _NOT_IMPLEMENTED:
            reader.not_implemented(f"permission type={permission.value}", element.line)
        granted = grants.setdefault(permission, set())
        for role in _split(roles):
            granted.add(role)
            granted.update(mappings.get(role, ()))
    return tuple((p, frozenset(r)) for p, r in grants.items())


def _split(roles: str) -> list[str]:
    return [role for role in (r.strip() for r in roles.split(",")) if role]


def _known() -> str:
    return ", ".join(p.value for p in Permission)
