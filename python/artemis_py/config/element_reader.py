"""The generic machinery for reading broker.xml elements, whatever section they belong to.

:class:`ElementReader` holds the state of one read (the problems found so far, the environment
for ``${...}``, the valid-but-unimplemented names seen) and the operations every section reader
(:mod:`.readers`) is built from:

* :meth:`~ElementReader.children` checks an element's children against its vocabulary
  (:mod:`.vocabulary`) and groups the implemented ones by name;
* :meth:`~ElementReader.text`, :meth:`~ElementReader.attribute`,
  :meth:`~ElementReader.convert` and :meth:`~ElementReader.scalar` substitute ``${...}`` and
  convert values, reporting a bad one with its line and returning a default or
  :data:`INVALID` so reading goes on;
* :meth:`~ElementReader.references`, :meth:`~ElementReader.duplicate` check names across
  elements;
* :meth:`~ElementReader.unimplemented_warning` turns everything noted as valid Artemis but not
  implemented into the one summary warning.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar

from .problems import ConfigProblem, ProblemCollector
from .values import non_empty, substitute
from .vocabulary import VOCABULARIES, Vocabulary, suggest
from .xmlreader import XmlElement

__all__ = [
    "INVALID",
    "NS_CONFIGURATION",
    "NS_CORE",
    "NS_JMS",
    "NS_XINCLUDE",
    "Children",
    "ElementReader",
    "Invalid",
    "value_line",
]

T = TypeVar("T")

NS_CONFIGURATION = "urn:activemq"
NS_CORE = "urn:activemq:core"
NS_JMS = "urn:activemq:jms"
NS_XINCLUDE = "http://www.w3.org/2001/XInclude"

#: The implemented children of an element, by name, in file order.
Children = dict[str, list[XmlElement]]


class Invalid:
    """Marker for "this value was wrong and has been reported"."""


INVALID = Invalid()


class ElementReader:
    """Reads elements of one file, collecting problems instead of stopping at the first."""

    def __init__(self, filename: str, environ: Mapping[str, str]) -> None:
        self.problems = ProblemCollector(filename)
        self.environ = environ
        # (element name, line) of every valid Artemis setting artemis-py ignores.
        self.unimplemented: list[tuple[str, int]] = []

    # --- problems ------------------------------------------------------------------------------

    def error(self, element: XmlElement, message: str, *, label: str | None = None) -> None:
        self.problems.error(element.line, label or element.tag, message)

    def warn(self, element: XmlElement, message: str, *, label: str | None = None) -> None:
        self.problems.warn(element.line, label or element.tag, message)

    def not_implemented(self, name: str, line: int) -> None:
        """Note a valid Artemis setting that artemis-py ignores (for the summary warning)."""
        self.unimplemented.append((name, line))

    def not_implemented_unless_default(
        self, kids: Children, fields: Mapping[str, str], value: object, default: object
    ) -> None:
        """Note each element of ``fields`` (element name -> attribute of ``value``) that
        ``kids`` holds and that made ``value`` differ from ``default``.

        For settings that are parsed into the model but not acted upon: one set to its
        Artemis default changes nothing, so only other values are worth a warning.
        """
        for name, attr in fields.items():
            if name in kids and getattr(value, attr) != getattr(default, attr):
                self.not_implemented(name, kids[name][0].line)

    def unimplemented_warning(self) -> ConfigProblem | None:
        """One warning listing every setting noted by :meth:`not_implemented`, if any, in
        file order."""
        if not self.unimplemented:
            return None
        noted = sorted(self.unimplemented, key=lambda item: item[1])
        items = ", ".join(f"{name} (line {line})" for name, line in noted)
        return ConfigProblem(
            self.problems.file,
            noted[0][1],
            "core",
            f"valid Artemis settings that artemis-py does not implement and ignores: {items}",
        )

    # --- structure -----------------------------------------------------------------------------

    def children(self, element: XmlElement, context: str | None = None) -> Children:
        """Check ``element``'s children against its vocabulary; group the implemented ones."""
        vocab = VOCABULARIES[context or element.tag]
        self.check_attributes(element, vocab)
        self.check_no_text(element)
        found: Children = {}
        for child in element.children:
            if not self.check_namespace(element, child):
                continue
            name = child.tag
            if name in vocab.implemented:
                previous = found.setdefault(name, [])
                if previous and name not in vocab.repeatable:
                    self.error(
                        child,
                        f"may appear only once in <{element.tag}> (first at line {previous[0].line})",
                    )
                    continue
                previous.append(child)
            elif name in vocab.unimplemented:
                self.not_implemented(name, child.line)
            else:
                self.error(child, self.unknown_message(name, element.tag, vocab.known))
        return found

    def check_no_text(self, element: XmlElement) -> None:
        """A container element may hold only whitespace (after substitution, as in Artemis,
        where ``${name}`` is replaced in the raw file before parsing)."""
        if not element.text.strip():
            return
        start = element.text_line or element.line
        value = self.substituted(element.text, start, element.tag)
        if value is not None and value.strip():
            message = f"unexpected text {_excerpt(value)}"
            if "<" in value:
                message += " (a ${...} value cannot add XML elements)"
            self.problems.error(value_line(element), element.tag, message)

    def check_attributes(self, element: XmlElement, vocab: Vocabulary) -> None:
        for attr in element.attributes:
            if attr in vocab.attributes:
                continue
            label = f"{element.tag}@{attr}"
            if attr in vocab.unimplemented_attributes:
                self.not_implemented(label, element.line)
                continue
            known = vocab.attributes | vocab.unimplemented_attributes
            hint = suggest(attr, known)
            message = f"unknown attribute '{attr}'"
            message += f"; did you mean '{hint}'?" if hint else f" on <{element.tag}>"
            self.error(element, message, label=label)

    def check_namespace(self, parent: XmlElement, child: XmlElement) -> bool:
        if child.namespace == parent.namespace:
            return True
        if child.namespace == NS_XINCLUDE:
            self.error(child, "XInclude is not supported; put the included content in this file")
        else:
            self.error(
                child,
                f"element in namespace '{child.namespace or '(none)'}' inside <{parent.tag}>, "
                f"which is in '{parent.namespace or '(none)'}'",
            )
        return False

    @staticmethod
    def unknown_message(name: str, parent: str, known: frozenset[str]) -> str:
        hint = suggest(name, known)
        if hint:
            return f"unknown element; did you mean <{hint}>?"
        return f"unknown element: not an Artemis <{parent}> element"

    # --- values --------------------------------------------------------------------------------

    def substituted(self, raw: str, start_line: int, label: str) -> str | None:
        """``raw`` with ``${...}`` replaced (``None`` if a variable was unset, reported)."""
        value, errors = substitute(raw, self.environ)
        for err in errors:
            self.problems.error(start_line + raw[: err.offset].count("\n"), label, str(err))
        return None if errors else value

    def text(self, element: XmlElement) -> str | None:
        """The substituted text of a leaf element (``None`` if it had errors)."""
        for child in element.children:
            self.error(child, f"unexpected element inside <{element.tag}>, which takes a value")
        start = element.text_line or element.line
        return self.substituted(element.text, start, element.tag)

    def attribute(self, element: XmlElement, name: str, *, required: bool = True) -> str | None:
        raw = element.attributes.get(name)
        label = f"{element.tag}@{name}"
        if raw is None:
            if required:
                self.error(element, f"missing required attribute '{name}'", label=label)
            return None
        value = self.substituted(raw, element.line, label)
        if value is None:
            return None
        value = value.strip()
        if required and not value:
            self.error(element, f"attribute '{name}' must not be empty", label=label)
            return None
        return value

    def convert(self, element: XmlElement, convert: Callable[[str], T]) -> T | Invalid:
        """A leaf element's stripped text through ``convert`` (:data:`INVALID` if reported)."""
        for attr in element.attributes:
            self.error(
                element,
                f"unexpected attribute '{attr}' on <{element.tag}>, which takes only a value",
                label=f"{element.tag}@{attr}",
            )
        text = self.text(element)
        if text is None:
            return INVALID
        text = text.strip()
        try:
            return convert(text)
        except ValueError as exc:
            self.problems.error(value_line(element), element.tag, str(exc))
            return INVALID

    def convert_attribute(
        self, element: XmlElement, name: str, convert: Callable[[str], T]
    ) -> T | None:
        text = self.attribute(element, name, required=False)
        if text is None:
            return None
        try:
            return convert(text)
        except ValueError as exc:
            self.error(element, str(exc), label=f"{element.tag}@{name}")
            return None

    def scalar(self, kids: Children, name: str, convert: Callable[[str], T], default: T) -> T:
        """The converted value of child ``name``, or ``default`` if absent or invalid."""
        elements = kids.get(name)
        if not elements:
            return default
        value = self.convert(elements[0], convert)
        return default if isinstance(value, Invalid) else value

    def optional(self, kids: Children, name: str) -> str | None:
        """A child's text if present and non-empty, else ``None``."""
        value = self.scalar(kids, name, str.strip, "")
        return value or None

    # --- names across elements -----------------------------------------------------------------

    def duplicate(self, element: XmlElement, name: str, lines: dict[str, int], what: str) -> bool:
        """Whether ``name`` was already defined (reported); else remember its line."""
        if name in lines:
            self.error(element, f"duplicate {what} name '{name}' (first at line {lines[name]})")
            return True
        lines[name] = element.line
        return False

    def references(
        self, elements: Iterable[XmlElement], defined: set[str], what: str
    ) -> tuple[str, ...]:
        """The names in ``elements`` (``<connector-ref>``...) that refer to a defined ``what``."""
        refs: list[str] = []
        for ref in elements:
            name = self.convert(ref, non_empty)
            if isinstance(name, Invalid):
                continue
            if name not in defined:
                self.error(ref, self.undefined(what, name, defined))
                continue
            refs.append(name)
        return tuple(refs)

    @staticmethod
    def undefined(what: str, name: str, defined: set[str]) -> str:
        message = f"no {what} named '{name}' is defined"
        hint = suggest(name, frozenset(defined))
        if hint:
            message += f"; did you mean '{hint}'?"
        elif not defined:
            message += f" (there are no <{what}>s)"
        return message


def value_line(element: XmlElement) -> int:
    """The line of the first non-blank character of ``element``'s text."""
    text = element.text
    stripped = text.lstrip()
    if not stripped or not element.text_line:
        return element.line
    return element.text_line + text[: len(text) - len(stripped)].count("\n")


def _excerpt(text: str, limit: int = 40) -> str:
    first = text.strip().splitlines()[0].strip()
    return repr(first if len(first) <= limit else first[: limit - 3] + "...")
