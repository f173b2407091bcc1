"""message-expiry-scan-period and the expiry and dead-letter address settings: Artemis's
defaults, its validators (MINUS_ONE_OR_GT_ZERO for the period; a long for each delay),
errors with file, line and element, and no "not implemented" warning for any of them."""

from __future__ import annotations

import pytest

from artemis_py.config import ConfigFileError, parse_config
from artemis_py.config.address_settings import ADDRESS_SETTINGS_NOT_IMPLEMENTED


def core(body: str) -> str:
    """A broker.xml whose <core> holds ``body``, which starts on line 3."""
    return (
        '<configuration xmlns="urn:activemq">\n'
        '<core xmlns="urn:activemq:core">\n'
        f"{body}\n"
        "</core>\n"
        "</configuration>\n"
    )


def setting(body: str) -> str:
    """An address setting for ``orders.#`` holding ``body``, which starts on line 5."""
    return core(
        f"<address-settings>\n<address-setting match='orders.#'>\n{body}\n"
        "</address-setting>\n</address-settings>"
    )


def test_the_scan_period_defaults_to_artemis_30_seconds() -> None:
    assert parse_config(core(""), environ={}).message_expiry_scan_period == 30000


@pytest.mark.parametrize(("text", "period"), [("100", 100), ("-1", -1), ("${P:250}", 250)])
def test_scan_period_values(text: str, period: int) -> None:
    body = f"<message-expiry-scan-period>{text}</message-expiry-scan-period>"
    config = parse_config(core(body), environ={})
    assert config.message_expiry_scan_period == period
    assert config.warnings == ()  # implemented: never named as not implemented


@pytest.mark.parametrize("text", ["0", "-2", "30s", "1.5"])
def test_a_bad_scan_period_is_an_error_with_its_line(text: str) -> None:
    body = f"<message-expiry-scan-period>{text}</message-expiry-scan-period>"
    with pytest.raises(ConfigFileError) as info:
        parse_config(core(body), "broker.xml", environ={})
    (problem,) = info.value.problems
    assert (problem.line, problem.element) == (3, "message-expiry-scan-period")


def test_the_thread_priority_means_nothing_here_and_is_named() -> None:
    body = "<message-expiry-thread-priority>5</message-expiry-thread-priority>"
    (warning,) = parse_config(core(body), environ={}).warnings
    assert "message-expiry-thread-priority (line 3)" in warning.message


def test_expiry_and_dead_letter_settings_are_read_and_not_named() -> None:
    text = setting(
        "<expiry-address>EXP</expiry-address>\n"
        "<expiry-delay>1000</expiry-delay>\n"
        "<min-expiry-delay>10</min-expiry-delay>\n"
        "<max-expiry-delay>5000</max-expiry-delay>\n"
        "<no-expiry>true</no-expiry>\n"
        "<auto-create-expiry-resources>true</auto-create-expiry-resources>\n"
        "<expiry-queue-prefix>X.</expiry-queue-prefix>\n"
        "<expiry-queue-suffix>.x</expiry-queue-suffix>\n"
        "<dead-letter-address>DLA</dead-letter-address>\n"
        "<auto-create-dead-letter-resources>true</auto-create-dead-letter-resources>\n"
        "<dead-letter-queue-prefix>D.</dead-letter-queue-prefix>\n"
        "<dead-letter-queue-suffix>.d</dead-letter-queue-suffix>\n"
        "<send-to-dla-on-no-route>true</send-to-dla-on-no-route>"
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    s = config.address_settings_for("orders.eu")
    assert (s.expiry_address, s.expiry_delay, s.min_expiry_delay, s.max_expiry_delay) == (
        "EXP",
        1000,
        10,
        5000,
    )
    assert s.no_expiry
    assert s.auto_create_expiry_resources
    assert s.send_to_dla_on_no_route
    assert (s.expiry_queue_prefix, s.expiry_queue_suffix) == ("X.", ".x")
    assert s.dead_letter_address == "DLA"
    assert s.auto_create_dead_letter_resources
    assert (s.dead_letter_queue_prefix, s.dead_letter_queue_suffix) == ("D.", ".d")
    other = config.address_settings_for("invoices")
    assert (other.expiry_queue_prefix, other.dead_letter_queue_prefix) == ("EXP.", "DLQ.")
    assert not other.auto_create_expiry_resources
    assert not other.auto_create_dead_letter_resources


def test_none_of_them_is_listed_as_not_implemented() -> None:
    names = {
        "expiry-delay",
        "min-expiry-delay",
        "max-expiry-delay",
        "no-expiry",
        "auto-create-expiry-resources",
        "expiry-queue-prefix",
        "expiry-queue-suffix",
        "auto-create-dead-letter-resources",
        "dead-letter-queue-prefix",
        "dead-letter-queue-suffix",
        "send-to-dla-on-no-route",
    }
    assert not names & ADDRESS_SETTINGS_NOT_IMPLEMENTED


def test_bad_values_are_reported_together_with_their_lines() -> None:
    text = setting(
        "<expiry-delay>soon</expiry-delay>\n"
        "<no-expiry>perhaps</no-expiry>\n"
        "<max-expiry-delay>99999999999999999999</max-expiry-delay>"
    )
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    found = [(p.line, p.element) for p in info.value.problems]
    assert found == [(5, "expiry-delay"), (6, "no-expiry"), (7, "max-expiry-delay")]
