"""A broadcast or discovery group's ``jgroups-file``: the one discovery protocol artemis-py
takes from a JGroups stack.

artemis-py has no JGroups (no JVM). Of a stack file it reads the protocol that finds the
members, when that protocol needs no service of its own:

* ``FILE_PING`` (``location``: a directory all nodes share; relative to the stack file's
  directory; JGroups's default is ``<temp dir>/jgroups``);
* ``DNS_PING`` (``dns_query``: a name whose addresses are the members, as a Kubernetes
  headless service gives them; ``dns_record_type`` ``A`` or ``AAAA``).

Any other discovery protocol (``TCPPING``, ``KUBE_PING``, ``JDBC_PING``, ...) is an error
naming it. The rest of the stack (transport, failure detection, merging, flow control)
has no meaning without JGroups: one warning lists it as ignored. ``${name}`` /
``${name:default}`` in attribute values are substituted like broker.xml's. Problems name
the stack file and its lines.
"""

from __future__ import annotations

import os
import tempfile

from ..element_reader import Children, ElementReader
from ..model import JGroupsStack
from ..problems import ConfigProblem
from ..values import substitute
from ..xmlreader import XmlElement, XmlSyntaxError, read_xml

__all__ = ["SUPPORTED", "read_jgroups"]

SUPPORTED = ("FILE_PING", "DNS_PING")
# Read by DNS_PING; its other attributes tune JGroups's own discovery rounds.
_DNS_RECORD_TYPES = ("A", "AAAA")


def _is_discovery(name: str) -> bool:
    # JGroups's discovery protocols are its *PING ones (PING, MPING, TCPPING, FILE_PING,
    # JDBC_PING, S3_PING, KUBE_PING, DNS_PING, ...) and TCPGOSSIP.
    return name.endswith("PING") or name == "TCPGOSSIP"


def read_jgroups(reader: ElementReader, group: XmlElement, gkids: Children) -> JGroupsStack | None:
    """The stack of ``group``'s ``<jgroups-file>`` (None when it cannot be used: reported)."""
    file_element = gkids["jgroups-file"][0]
    name = reader.text(file_element)
    if "jgroups-channel" not in gkids:
        reader.error(group, f"{group.tag} with <jgroups-file> needs <jgroups-channel>")
    if not name or not name.strip():
        return None
    base = os.path.dirname(reader.problems.file) if os.path.isfile(reader.problems.file) else ""
    path = os.path.abspath(os.path.join(base, name.strip()))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        reader.error(file_element, f"cannot read JGroups file {path}: {exc.strerror or exc}")
        return None
    return _Stack(reader, path).read(data)


class _Stack:
    def __init__(self, reader: ElementReader, path: str) -> None:
        self.reader, self.path = reader, path
        self.ok = True

    def error(self, line: int | None, element: str, message: str) -> None:
        self.ok = False
        problem = ConfigProblem(self.path, line, element, message)
        if problem not in self.reader.problems.errors:  # a file two groups use
            self.reader.problems.errors.append(problem)

    def value(self, element: XmlElement, attribute: str) -> str | None:
        raw = element.attributes.get(attribute)
        if raw is None:
            return None
        value, errors = substitute(raw, self.reader.environ)
        for err in errors:
            self.error(element.line, f"{element.tag}@{attribute}", str(err))
        return None if errors else value.strip()

    def read(self, data: bytes) -> JGroupsStack | None:
        try:
            root = read_xml(data)
        except XmlSyntaxError as exc:
            self.error(exc.line, "", f"malformed XML: {exc.message} (column {exc.column})")
            return None
        if root.tag != "config":
            self.error(root.line, root.tag, "a JGroups stack file has <config> as its root")
            return None
        found: list[XmlElement] = []
        ignored: list[str] = []
        for element in root.children:
            short = element.tag.rpartition(".")[2]  # pbcast.GMS, org.jgroups.protocols.X
            if short in SUPPORTED:
                found.append(element)
            elif _is_discovery(short):
                self.error(
                    element.line,
                    element.tag,
                    f"discovery protocol {element.tag} is not supported: artemis-py reads "
                    f"{' or '.join(SUPPORTED)} (docs/clustering.md)",
                )
            else:
                ignored.append(element.tag)
        if len(found) > 1:
            self.error(found[1].line, found[1].tag, "one discovery protocol per stack")
        if not found and self.ok:
            self.error(root.line, "config", f"no discovery protocol ({' or '.join(SUPPORTED)})")
        if not found or not self.ok:
            return None
        element = found[0]
        protocol = element.tag.rpartition(".")[2]
        read = self._file_ping if protocol == "FILE_PING" else self._dns_ping
        stack = read(element, tuple(ignored))
        if stack is not None and ignored:
            warning = ConfigProblem(
                self.path,
                None,
                "",
                "JGroups protocols ignored (artemis-py has no JGroups and only reads the "
                f"discovery protocol {protocol}): {', '.join(ignored)}",
            )
            if warning not in self.reader.problems.warnings:  # a file two groups use
                self.reader.problems.warnings.append(warning)
        return stack if self.ok else None

    def _file_ping(self, element: XmlElement, ignored: tuple[str, ...]) -> JGroupsStack | None:
        location = self.value(element, "location")
        if location is None:
            location = os.path.join(tempfile.gettempdir(), "jgroups")
        elif not location:
            self.error(element.line, "FILE_PING@location", "empty location")
            return None
        location = os.path.abspath(os.path.join(os.path.dirname(self.path), location))
        return JGroupsStack(self.path, "FILE_PING", location=location, ignored=ignored)

    def _dns_ping(self, element: XmlElement, ignored: tuple[str, ...]) -> JGroupsStack | None:
        query = self.value(element, "dns_query")
        if not query:
            self.error(element.line, "DNS_PING", "needs dns_query (the name to resolve)")
            return None
        record_type = (self.value(element, "dns_record_type") or "A").upper()
        if record_type not in _DNS_RECORD_TYPES:
            self.error(
                element.line,
                "DNS_PING@dns_record_type",
                f"record type {record_type} is not supported (A or AAAA)",
            )
            return None
        if element.attributes.get("dns_address"):
            warning = ConfigProblem(
                self.path,
                element.line,
                "DNS_PING@dns_address",
                "ignored: names are resolved with the system's resolver",
            )
            if warning not in self.reader.problems.warnings:
                self.reader.problems.warnings.append(warning)
        return JGroupsStack(
            self.path, "DNS_PING", dns_query=query, dns_record_type=record_type, ignored=ignored
        )
