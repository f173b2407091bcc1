"""Reading ``<diverts>``: Artemis's defaults, every element, and the errors (with lines) of
what artemis-py refuses: no forwarding address, transformers, unknown routing types,
duplicate names, names shared with queues, wildcard forwarding addresses, loops."""

from __future__ import annotations

import pytest

from artemis_py.config import (
    ComponentRoutingType,
    ConfigFileError,
    ConfigProblem,
    DivertConfig,
    parse_config,
)


def diverts(*items: str, addresses: str = "") -> str:
    """A broker.xml with ``<diverts>`` holding ``items``, one per line from line 5."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{addresses}\n"
        "<diverts>\n" + "".join(f"{item}\n" for item in items) + "</diverts>\n"
        "</core>\n"
        "</configuration>\n"
    )


def divert(name: str, address: str = "orders", to: str | None = "audit", body: str = "") -> str:
    forwarding = "" if to is None else f"<forwarding-address>{to}</forwarding-address>"
    return f'<divert name="{name}"><address>{address}</address>{forwarding}{body}</divert>'


def problems_of(text: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    return list(info.value.problems)


def test_defaults_are_artemis_s() -> None:
    (d,) = parse_config(diverts(divert("spy")), environ={}).diverts
    assert d == DivertConfig(name="spy", address="orders", forwarding_addresses=("audit",))
    assert d.exclusive is False
    assert d.filter is None
    assert d.routing_name is None  # Artemis: a random name, a group of its own
    assert d.routing_type is ComponentRoutingType.STRIP
    assert d.line == 5


def test_every_element_is_read() -> None:
    body = (
        "<exclusive>true</exclusive><filter string=\"office = 'NY'\"/>"
        "<routing-name>prices</routing-name><routing-type>ANYCAST</routing-type>"
    )
    text = diverts(divert("ny", "prices", " dallas, chicago ,denver::q1", body))
    (d,) = parse_config(text, environ={}).diverts
    assert d.forwarding_addresses == ("dallas", "chicago", "denver::q1")  # composite
    assert d.exclusive is True
    assert d.filter == "office = 'NY'"
    assert d.routing_name == "prices"
    assert d.routing_type is ComponentRoutingType.ANYCAST


def test_diverts_are_no_longer_named_as_not_implemented() -> None:
    config = parse_config(diverts(divert("spy")), environ={})
    assert not any("diverts" in w.message for w in config.warnings)


def test_a_wildcard_address_is_a_pattern_and_literal_with_routing_off() -> None:
    (d,) = parse_config(diverts(divert("news", "news.#", "archive")), environ={}).diverts
    assert d.address == "news.#"
    off = diverts(divert("news", "news.#", "news.eu")).replace(
        "<diverts>",
        "<wildcard-addresses><routing-enabled>false</routing-enabled></wildcard-addresses>\n"
        "<diverts>",
    )
    # With routing off 'news.#' is a plain address: forwarding to news.eu is no loop.
    assert parse_config(off, environ={}).diverts[0].forwarding_addresses == ("news.eu",)


@pytest.mark.parametrize(
    ("item", "element", "message"),
    [
        (divert("d", to=None), "divert", "divert 'd' needs a <forwarding-address>"),
        ('<divert name="d"><forwarding-address>x</forwarding-address></divert>', "divert", "needs an <address>"),
        (divert("d", body="<transformer-class-name>org.Example</transformer-class-name>"),
         "transformer-class-name", "divert 'd': transformers are Java classes"),
        (divert("d", body="<transformer><class-name>org.Example</class-name></transformer>"),
         "transformer", "divert 'd': transformers are Java classes"),
        (divert("d", body="<routing-type>BOTH</routing-type>"), "routing-type",
         "expected one of ANYCAST, MULTICAST, STRIP, PASS, got 'BOTH'"),
        (divert("d", body="<routing-type>pass</routing-type>"), "routing-type", "upper case: PASS"),
        (divert("d", body="<exclusive>yes</exclusive>"), "exclusive", ""),
        (divert("d", to="news.*"), "forwarding-address", "cannot forward to the wildcard address"),
        (divert("d", to="a,,b"), "forwarding-address", "empty address in 'a,,b'"),
        (divert("d", address="orders::q"), "address", "an address, not a queue"),
        (divert("d", address="news#"), "address", ""),
        (divert("d", body="<transformr/>"), "transformr", "did you mean <transformer>?"),
        ('<divert><address>a</address><forwarding-address>b</forwarding-address></divert>',
         "divert@name", "missing required attribute 'name'"),
    ],
)  # fmt: skip
def test_bad_divert(item: str, element: str, message: str) -> None:
    (problem,) = problems_of(diverts(item))
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 5, element)
    assert message in problem.message


def test_duplicate_names_and_a_queue_s_name_are_refused() -> None:
    queues = (
        '<addresses><address name="orders"><anycast><queue name="orders"/></anycast>'
        "</address></addresses>"
    )
    problems = problems_of(
        diverts(divert("spy"), divert("spy", to="other"), divert("orders"), addresses=queues)
    )
    assert [(p.line, p.element) for p in problems] == [(6, "divert"), (7, "divert@name")]
    assert "duplicate divert name 'spy' (first at line 5)" in problems[0].message
    assert "divert 'orders' has the name of a queue" in problems[1].message


def test_loops_are_refused_once_each_with_their_route() -> None:
    problems = problems_of(
        diverts(
            divert("a", "orders", "audit"),
            divert("b", "audit", "billing, orders"),  # back to a
            divert("c", "billing", "sink"),  # a branch out of the loop
            divert("self", "sink", "sink"),  # its own address
            divert("news", "news.#", "news.archive"),  # a pattern that matches its target
            divert("fine", "news.eu", "archive"),
        )
    )
    assert [(p.line, p.message.split(";")[0]) for p in problems] == [
        (5, "divert loop: a -> b -> a"),
        (8, "divert loop: self -> self"),
        (9, "divert loop: news -> news"),
    ]
    assert all(p.element == "divert" for p in problems)


def test_a_chain_without_a_loop_is_fine() -> None:
    text = diverts(
        divert("a", "orders", "audit, billing"),
        divert("b", "audit", "billing"),
        divert("c", "billing", "archive"),
        divert("d", "news.#", "archive"),
    )
    assert [d.name for d in parse_config(text, environ={}).diverts] == ["a", "b", "c", "d"]
