"""``<diverts>``: each ``<divert name=...>`` (Artemis's ``divertType``), and the checks that
need every divert at once (unique names, loops).

Theory of operation
-------------------
A divert routes a copy of what is sent to its ``address`` to each of its forwarding
addresses, and the copy is routed there like any send, through that address's own diverts
(:mod:`artemis_py.broker.diverting`). So the diverts form a graph: an edge from divert D to
divert E when one of D's forwarding addresses is E's address, or matches E's address when
that is a wildcard pattern. A cycle in it means a message can be copied round forever;
Artemis follows it until its stack overflows. We refuse such a file at start, naming the
diverts of the cycle, even where the filters might keep some messages from going round
(whether they do depends on messages, which the file cannot tell).

Transformers are Java classes; a divert that names one is refused rather than run without
it, since its copies would not be what the user configured.
"""

from __future__ import annotations

from ..element_reader import Children, ElementReader, Invalid
from ..enums import ComponentRoutingType
from ..model import DivertConfig
from ..values import non_empty, parse_bool, parse_enum
from ..wildcards import AddressMatcher, WildcardSyntax, is_wildcard, malformed
from ..xmlreader import XmlElement

__all__ = ["read_diverts"]

_FQQN = "::"


def read_diverts(
    reader: ElementReader, kids: Children, wildcards: WildcardSyntax | None, queues: set[str]
) -> tuple[DivertConfig, ...]:
    """Every ``<divert>``. ``wildcards``: the pattern syntax when wildcard routing is on;
    ``queues``: the names of the queues declared under ``<addresses>`` (a divert shares
    their namespace: Artemis binds both by name)."""
    if "diverts" not in kids:
        return ()
    diverts: list[tuple[DivertConfig, XmlElement]] = []
    lines: dict[str, int] = {}
    for element in reader.children(kids["diverts"][0]).get("divert", []):
        divert = _divert(reader, element, wildcards)
        if divert is None or reader.duplicate(element, divert.name, lines, "divert"):
            continue
        if divert.name in queues:
            reader.error(
                element,
                f"divert '{divert.name}' has the name of a queue; Artemis binds diverts and "
                "queues by name, so the names must differ",
                label="divert@name",
            )
            continue
        diverts.append((divert, element))
    _check_loops(reader, diverts, wildcards)
    return tuple(divert for divert, _ in diverts)


def _divert(
    reader: ElementReader, element: XmlElement, wildcards: WildcardSyntax | None
) -> DivertConfig | None:
    name = reader.attribute(element, "name")
    dkids = reader.children(element)
    label = f"divert '{name}'" if name else "divert"
    for java in ("transformer-class-name", "transformer"):
        if java in dkids:
            reader.error(
                dkids[java][0],
                f"{label}: transformers are Java classes, which artemis-py cannot run; "
                "remove the transformer (its copies would not be what it configures)",
            )
    address = _address(reader, element, dkids, label, wildcards)
    forwarding = _forwarding(reader, element, dkids, label, wildcards)
    filter_string = None
    if "filter" in dkids:
        filter_element = dkids["filter"][0]
        reader.children(filter_element)
        filter_string = reader.attribute(filter_element, "string", required=False)
    routing_name = reader.optional(dkids, "routing-name")
    routing_type = reader.scalar(
        dkids,
        "routing-type",
        lambda text: parse_enum(text, ComponentRoutingType),
        ComponentRoutingType.STRIP,
    )
    exclusive = reader.scalar(dkids, "exclusive", parse_bool, False)
    if name is None or address is None or forwarding is None:
        return None
    if dkids.keys() & {"transformer-class-name", "transformer"}:
        return None
    return DivertConfig(
        name=name,
        address=address,
        forwarding_addresses=forwarding,
        exclusive=exclusive,
        filter=filter_string or None,
        routing_name=routing_name,
        routing_type=routing_type,
        line=element.line,
    )


def _address(
    reader: ElementReader,
    element: XmlElement,
    dkids: Children,
    label: str,
    wildcards: WildcardSyntax | None,
) -> str | None:
    """The address diverted from: a concrete address, or a pattern with routing on."""
    if "address" not in dkids:
        reader.error(element, f"{label} needs an <address> (the address it diverts from)")
        return None
    address = reader.convert(dkids["address"][0], non_empty)
    if isinstance(address, Invalid):
        return None
    problem = None if wildcards is None else malformed(address, wildcards)
    if _FQQN in address:
        problem = f"{label}: <address> is an address, not a queue ('{address}' has '::')"
    if problem is not None:
        reader.error(dkids["address"][0], problem)
        return None
    return address


def _forwarding(
    reader: ElementReader,
    element: XmlElement,
    dkids: Children,
    label: str,
    wildcards: WildcardSyntax | None,
) -> tuple[str, ...] | None:
    """The comma-separated ``<forwarding-address>`` (Artemis's composite divert); each a
    concrete address (copies are sent, and a send goes to a concrete address) or an
    ``address::queue``."""
    if "forwarding-address" not in dkids:
        reader.error(element, f"{label} needs a <forwarding-address> (where it sends the copies)")
        return None
    forwarding_element = dkids["forwarding-address"][0]
    text = reader.convert(forwarding_element, non_empty)
    if isinstance(text, Invalid):
        return None
    names = tuple(part.strip() for part in text.split(","))
    for name in names:
        address = name.partition(_FQQN)[0]
        if not address:
            reader.error(forwarding_element, f"{label}: empty address in '{text}'")
            return None
        if wildcards is not None and is_wildcard(address, wildcards):
            reader.error(
                forwarding_element,
                f"{label}: cannot forward to the wildcard address '{address}' "
                "(copies are sent, and a send goes to a concrete address)",
            )
            return None
    return names


def _check_loops(
    reader: ElementReader,
    diverts: list[tuple[DivertConfig, XmlElement]],
    wildcards: WildcardSyntax | None,
) -> None:
    """Report every cycle of the divert graph once (see the module docstring)."""
    matchers = {
        d.name: AddressMatcher(d.address, wildcards) if wildcards is not None else None
        for d, _ in diverts
    }

    def reaches(target: DivertConfig, forwarded_to: str) -> bool:
        matcher = matchers[target.name]
        address = forwarded_to.partition(_FQQN)[0]
        return address == target.address or (matcher is not None and matcher.matches(address))

    edges = {
        d.name: [e.name for e, _ in diverts if any(reaches(e, f) for f in d.forwarding_addresses)]
        for d, _ in diverts
    }
    elements = {d.name: element for d, element in diverts}
    reported: set[frozenset[str]] = set()
    done: set[str] = set()
    for start, _ in diverts:
        path: list[str] = []
        on_path: set[str] = set()
        # Depth-first, iteratively: (divert, index of its next edge to follow).
        stack = [(start.name, 0)]
        while stack:
            name, index = stack.pop()
            if index == 0:
                if name in done:
                    continue
                path.append(name)
                on_path.add(name)
            targets = edges[name]
            if index < len(targets):
                stack.append((name, index + 1))
                target = targets[index]
                if target in on_path:
                    cycle = path[path.index(target) :]
                    if frozenset(cycle) not in reported:
                        reported.add(frozenset(cycle))
                        route = " -> ".join([*cycle, target])
                        reader.error(
                            elements[target],
                            f"divert loop: {route}; a message would be copied round forever",
                            label="divert",
                        )
                elif target not in done:
                    stack.append((target, 0))
            else:
                path.pop()
                on_path.discard(name)
                done.add(name)
