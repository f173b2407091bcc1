"""address-queue-scan-period and the auto-delete address settings: Artemis's defaults, its
validators (MINUS_ONE_OR_GT_ZERO for the period, GE_ZERO for the delays,
MINUS_ONE_OR_GE_ZERO for the message count), errors with line and element, and no "not
implemented" warning for any of them."""

from __future__ import annotations

import pytest

from artemis_py.config import ConfigFileError, parse_config


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


def test_the_defaults_are_artemis() -> None:
    config = parse_config(core(""), environ={})
    assert config.address_queue_scan_period == 30000
    s = config.address_settings_for("orders.x")
    assert (s.auto_delete_queues, s.auto_delete_created_queues, s.auto_delete_addresses) == (
        True,
        False,
        True,
    )
    assert (s.auto_delete_queues_delay, s.auto_delete_addresses_delay) == (0, 0)
    assert s.auto_delete_queues_message_count == 0
    assert not s.auto_delete_queues_skip_usage_check
    assert not s.auto_delete_addresses_skip_usage_check


@pytest.mark.parametrize(("text", "period"), [("100", 100), ("-1", -1), ("${P:250}", 250)])
def test_scan_period_values(text: str, period: int) -> None:
    body = f"<address-queue-scan-period>{text}</address-queue-scan-period>"
    config = parse_config(core(body), environ={})
    assert config.address_queue_scan_period == period
    assert config.warnings == ()  # implemented: never named as not implemented


@pytest.mark.parametrize("text", ["0", "-2", "30s"])
def test_a_bad_scan_period_is_an_error_with_its_line(text: str) -> None:
    body = f"<address-queue-scan-period>{text}</address-queue-scan-period>"
    with pytest.raises(ConfigFileError) as info:
        parse_config(core(body), "broker.xml", environ={})
    (problem,) = info.value.problems
    assert (problem.line, problem.element) == (3, "address-queue-scan-period")


def test_the_auto_delete_settings_are_read_and_not_named() -> None:
    text = setting(
        "<auto-delete-created-queues>true</auto-delete-created-queues>\n"
        "<auto-delete-queues-delay>5000</auto-delete-queues-delay>\n"
        "<auto-delete-queues-message-count>-1</auto-delete-queues-message-count>\n"
        "<auto-delete-queues-skip-usage-check>true</auto-delete-queues-skip-usage-check>\n"
        "<auto-delete-addresses-delay>7000</auto-delete-addresses-delay>\n"
        "<auto-delete-addresses-skip-usage-check>true</auto-delete-addresses-skip-usage-check>"
    )
    config = parse_config(text, environ={})
    assert config.warnings == ()
    s = config.address_settings_for("orders.x")
    assert s.auto_delete_created_queues
    assert (s.auto_delete_queues_delay, s.auto_delete_addresses_delay) == (5000, 7000)
    assert s.auto_delete_queues_message_count == -1
    assert s.auto_delete_queues_skip_usage_check
    assert s.auto_delete_addresses_skip_usage_check


@pytest.mark.parametrize(
    ("element", "text"),
    [
        ("auto-delete-queues-delay", "-1"),
        ("auto-delete-addresses-delay", "-1"),
        ("auto-delete-queues-message-count", "-2"),
    ],
)
def test_bad_values_are_errors_with_their_line(element: str, text: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_config(setting(f"<{element}>{text}</{element}>"), "broker.xml", environ={})
    (problem,) = info.value.problems
    assert (problem.line, problem.element) == (5, element)
