"""A small XML reader that remembers where everything came from.

``xml.etree`` drops line numbers, and good configuration errors need them, so this module builds
its own minimal tree with :mod:`xml.parsers.expat` (stdlib). Each :class:`XmlElement` knows its
namespace, local name, unqualified attributes, the line and column of its start tag, and its
direct text together with the line that text starts on (so a ``${name}`` on the third line of a
multi-line text can be reported on its own line).

Security: a DOCTYPE is refused outright, which rules out entity-expansion and external-entity
tricks; broker.xml never needs one.
"""

from __future__ import annotations

import xml.parsers.expat
from dataclasses import dataclass, field

__all__ = ["XmlElement", "XmlSyntaxError", "read_xml"]

# Expat reports a namespaced name as "<uri><separator><local>".
_SEPARATOR = " "


class XmlSyntaxError(Exception):
    """The text is not well-formed XML. ``line`` is 1-based, ``column`` 1-based."""

    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


@dataclass(eq=False, slots=True)
class XmlElement:
    """One element of the document.

    ``attributes`` holds only unqualified attributes (``name="..."``); namespaced ones such as
    ``xsi:schemaLocation`` are schema plumbing and are kept apart in ``qualified_attributes``.
    ``text`` is the element's own character data (not its descendants'), unstripped.
    """

    namespace: str
    tag: str
    attributes: dict[str, str]
    line: int
    column: int
    qualified_attributes: dict[str, str] = field(default_factory=dict)
    children: list[XmlElement] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    text_line: int = 0

    @property
    def text(self) -> str:
        return "".join(self.text_parts)


def _split_name(name: str) -> tuple[str, str]:
    uri, sep, local = name.rpartition(_SEPARATOR)
    if not sep:
        return "", name
    return uri, local


def read_xml(text: str | bytes) -> XmlElement:
    """Parse ``text`` and return its root element; raise :class:`XmlSyntaxError` if malformed."""
    parser = xml.parsers.expat.ParserCreate(namespace_separator=_SEPARATOR)
    stack: list[XmlElement] = []
    roots: list[XmlElement] = []

    def start(name: str, attrs: dict[str, str]) -> None:
        namespace, tag = _split_name(name)
        plain: dict[str, str] = {}
        qualified: dict[str, str] = {}
        for key, value in attrs.items():
            attr_ns, attr_name = _split_name(key)
            if attr_ns:
                qualified[f"{{{attr_ns}}}{attr_name}"] = value
            else:
                plain[attr_name] = value
        element = XmlElement(
            namespace=namespace,
            tag=tag,
            attributes=plain,
            qualified_attributes=qualified,
            line=parser.CurrentLineNumber,
            column=parser.CurrentColumnNumber + 1,
        )
        if stack:
            stack[-1].children.append(element)
        else:
            roots.append(element)
        stack.append(element)

    def end(name: str) -> None:
        stack.pop()

    def characters(data: str) -> None:
        if not stack:
            return
        element = stack[-1]
        if not element.text_parts:
            element.text_line = parser.CurrentLineNumber
        element.text_parts.append(data)

    def doctype(*args: object) -> None:
        raise XmlSyntaxError(
            "a DOCTYPE declaration is not allowed in broker.xml",
            parser.CurrentLineNumber,
            parser.CurrentColumnNumber + 1,
        )

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = characters
    parser.StartDoctypeDeclHandler = doctype
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as exc:
        raise XmlSyntaxError(
            xml.parsers.expat.ErrorString(exc.code), exc.lineno, exc.offset + 1
        ) from None
    if not roots:  # expat already rejects an empty document; kept for type narrowing
        raise XmlSyntaxError("no root element", 1, 1)
    return roots[0]
