"""Filter expressions: queue ``<filter string="...">``, divert and bridge filters, selectors.

Artemis filters are JMS message selectors (a subset of the SQL-92 conditional expression)
over a message's properties and Artemis's special identifiers (Artemis user manual, "Filter
Expressions"). :meth:`Filter.parse` compiles the text once into a tree of closures;
:meth:`Filter.matches` runs per message per queue or consumer and asks a ``lookup`` callable
for each identifier's value, so the broker resolves only what a filter uses.

The package: :mod:`.lexer` (tokens), :mod:`.parser` (the grammar, static type checks,
constant folding), :mod:`.evaluate` (the closures a compiled filter runs), :mod:`.values`
(comparison, conversion and arithmetic in three-valued logic), :mod:`.like` (LIKE
patterns), :mod:`.identifiers` (Artemis's special identifiers and the JMS header names),
:mod:`.errors`. This module holds :class:`Filter`, the compiled filter callers use.

Semantics (JMS 2.0 ``javax.jms.Message`` "Message Selectors", Artemis where JMS is silent):

* Three-valued logic: a comparison, arithmetic, BETWEEN, IN or LIKE with a NULL (missing)
  operand is UNKNOWN; AND, OR and NOT follow the SQL truth tables; a message matches only
  when the whole expression is TRUE.
* Only like types compare: numbers with numbers (int and float promote), strings with strings,
  booleans with booleans; a comparison of unlike types is FALSE, never an error. Strings and
  booleans compare with ``=`` and ``<>`` only. Values are never converted from strings unless
  the filter starts with ``convert_string_expressions:`` (Artemis's switch for STOMP, whose
  header values are all strings): then a string compared with a number or boolean is parsed
  as one (an unparsable string compares FALSE) and arithmetic parses string operands.
* ``a BETWEEN x AND y`` is ``a >= x AND a <= y``; ``a NOT BETWEEN x AND y`` is
  ``a < x OR a > y`` (JMS defines both so).
* IN and LIKE apply to strings: a NULL operand gives UNKNOWN; another type gives UNKNOWN for
  IN and FALSE for LIKE (so NOT LIKE is TRUE), as Artemis does. LIKE's ``%`` matches any
  sequence, ``_`` one character; the ESCAPE character makes the next one literal.
* ``/`` always divides as floating point and ``%`` is the floating-point remainder (Artemis);
  ``+ - *`` on two integers stay exact integers (Python ints: no 32/64-bit wrap-around).
  Arithmetic on a non-number is UNKNOWN.
* An identifier used alone as a condition is its boolean value, FALSE for another type.
* Identifiers go to ``lookup`` unchanged except the JMS header names, which map onto
  Artemis's: JMSPriority -> AMQPriority, JMSTimestamp -> AMQTimestamp, JMSMessageID ->
  AMQUserID, JMSExpiration -> AMQExpiration, JMSXGroupID -> AMQGroupID, and JMSDeliveryMode
  reads AMQDurable ('DURABLE' / 'NON_DURABLE') as 'PERSISTENT' / 'NON_PERSISTENT' (what
  Artemis's SelectorTranslator does for JMS selectors). JMSCorrelationID and JMSType are
  ordinary properties of those names.

Deliberate differences from Artemis's selector code, where it departs from the JMS
specification: ``=`` and ``<>`` with a NULL operand are UNKNOWN (Artemis makes ``x = NULL``
FALSE, so ``color <> 'red'`` matches a message without ``color``, and ``NULL = NULL`` TRUE);
NOT binds looser than comparisons (Artemis parses ``NOT a = 1`` as ``(NOT a) = 1``);
comparisons do not chain; AND and OR use the full SQL truth tables (Artemis makes
``UNKNOWN AND FALSE`` UNKNOWN and ``UNKNOWN OR FALSE`` FALSE); ``+`` does not concatenate
strings. Beyond Artemis: identifiers may use any Unicode letter, float literals may carry the
Java F/D suffix, and a pattern ending in its ESCAPE character is an error.

An empty (or all-whitespace) filter is no filter: :meth:`Filter.parse` returns None, as
Artemis's ``FilterImpl.createFilter`` does. XPATH / XQUERY body filters are not supported.
"""

from __future__ import annotations

from artemis_py.broker.filter.errors import FilterSyntaxError
from artemis_py.broker.filter.identifiers import JMS_HEADER_ALIASES, SPECIAL_IDENTIFIERS
from artemis_py.broker.filter.lexer import WHITESPACE_CHARS
from artemis_py.broker.filter.parser import compile_filter
from artemis_py.broker.filter.values import Eval, Lookup

__all__ = [
    "JMS_HEADER_ALIASES",
    "SPECIAL_IDENTIFIERS",
    "Filter",
    "FilterSyntaxError",
    "Lookup",
]


class Filter:
    """A compiled filter expression; immutable, hashable and equal by its text."""

    __slots__ = ("_fn", "_identifiers", "_text")

    def __init__(self, text: str, fn: Eval, identifiers: frozenset[str]) -> None:
        self._text = text
        self._fn = fn
        self._identifiers = identifiers

    @classmethod
    def parse(cls, text: str | None) -> Filter | None:
        """Compile ``text``; None for None, empty or all-whitespace text (no filter).

        Raises :class:`FilterSyntaxError` if the text is not a valid filter expression.
        """
        if text is None or not text.strip(WHITESPACE_CHARS):
            return None
        pos = len(text) - len(text.lstrip(WHITESPACE_CHARS))
        fn, identifiers = compile_filter(text, pos)
        return cls(text, fn, identifiers)

    @property
    def text(self) -> str:
        """The text the filter was parsed from."""
        return self._text

    @property
    def identifiers(self) -> frozenset[str]:
        """The names :meth:`matches` may pass to ``lookup`` (after JMS header mapping)."""
        return self._identifiers

    def matches(self, lookup: Lookup) -> bool:
        """Whether the expression is TRUE for the message ``lookup`` describes.

        ``lookup(name)`` returns the identifier's value or None when the message has none; it
        may be called more than once per name, and not at all for names that cannot change
        the outcome.
        """
        return self._fn(lookup) is True

    def evaluate(self, lookup: Lookup) -> bool | None:
        """The three-valued result: True, False, or None for SQL UNKNOWN."""
        result = self._fn(lookup)
        return None if result is None else bool(result)

    def __repr__(self) -> str:
        return f"Filter({self._text!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Filter):
            return NotImplemented
        return self._text == other._text

    def __hash__(self) -> int:
        return hash(self._text)
