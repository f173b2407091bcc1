"""Which wildcard addresses a concrete address belongs to (Artemis's wildcard routing).

A queue bound to a wildcard address (``news.#``, ``news.*``) receives what is sent to every
address its pattern matches (``news.eu``, ``news.eu.sport``), beside those addresses' own
queues. Wildcard addresses exist because something is bound to them: a local queue (a
subscription on the pattern), or a queue on another node that a cluster link told us of.
Messages are sent to concrete addresses only: sending to a pattern is refused (as Artemis
refuses it to producers), so a pattern is never routed by itself.

:class:`WildcardLinks` keeps the patterns present and, per concrete address routed to, the
patterns that match it. That answer is cached until the set of patterns changes, which
happens when a subscription on a pattern comes or goes, not per message; with no pattern
present (the usual case) routing pays one truth test.

``<wildcard-addresses><routing-enabled>false`` turns this off (``syntax=None``): a name with
``#`` or ``*`` is then an ordinary address.
"""

from __future__ import annotations

from collections import Counter

from artemis_py.config import AddressMatcher, WildcardSyntax, malformed


class WildcardLinks:
    """The wildcard patterns bound on this node or learned from others, and their matches."""

    __slots__ = ("_links", "_sources", "matchers", "syntax")

    def __init__(self, syntax: WildcardSyntax | None) -> None:
        self.syntax = syntax
        self._sources: Counter[str] = Counter()  # pattern -> how many things keep it present
        # The patterns present (empty: routing has nothing to add; tested per message).
        self.matchers: dict[str, AddressMatcher] = {}
        self._links: dict[str, tuple[str, ...]] = {}  # concrete address -> its patterns

    def is_wildcard(self, name: str) -> bool:
        """Whether ``name`` is a pattern: it has a wildcard character (as Artemis decides;
        always False with wildcard routing off)."""
        syntax = self.syntax
        return syntax is not None and (syntax.any_words in name or syntax.single_word in name)

    def problem(self, name: str) -> str | None:
        """Why ``name`` is not a well-formed pattern (a wildcard inside a word), else None."""
        return None if self.syntax is None else malformed(name, self.syntax)

    def hold(self, name: str) -> None:
        """An address or a remote binding named ``name`` appeared (a no-op unless a pattern)."""
        if not self.is_wildcard(name):
            return
        self._sources[name] += 1
        if name not in self.matchers:
            assert self.syntax is not None
            self.matchers[name] = AddressMatcher(name, self.syntax)
            self._links.clear()

    def release(self, name: str) -> None:
        """What :meth:`hold` counted for ``name`` went away."""
        if name not in self._sources:
            return
        self._sources[name] -= 1
        if self._sources[name] <= 0:
            del self._sources[name]
            del self.matchers[name]
            self._links.clear()

    def forget(self, address: str) -> None:
        """A concrete address was removed: drop its cached answer."""
        self._links.pop(address, None)

    def links(self, address: str) -> tuple[str, ...]:
        """The patterns present that match the concrete ``address``."""
        found = self._links.get(address)
        if found is None:
            found = self._links[address] = tuple(
                name for name, matcher in self.matchers.items() if matcher.matches(address)
            )
        return found
