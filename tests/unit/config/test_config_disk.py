"""max-disk-usage, min-disk-free and disk-scan-period: Artemis's defaults, its byte notation
and its validators (PERCENTAGE_OR_MINUS_ONE, MINUS_ONE_OR_GT_ZERO), errors with their lines."""

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


def test_artemis_defaults_and_no_warning() -> None:
    config = parse_config(core(""), environ={})
    assert (config.max_disk_usage, config.min_disk_free, config.disk_scan_period) == (90, -1, 5000)
    set_to_defaults = core(
        "<max-disk-usage>90</max-disk-usage>\n<disk-scan-period>5000</disk-scan-period>"
    )
    assert parse_config(set_to_defaults, environ={}).warnings == ()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("<max-disk-usage>0</max-disk-usage>", (0, -1, 5000)),
        ("<max-disk-usage>100</max-disk-usage>", (100, -1, 5000)),
        ("<max-disk-usage>-1</max-disk-usage>", (-1, -1, 5000)),
        ("<min-disk-free>10MiB</min-disk-free>", (90, 10 * 1024**2, 5000)),
        ("<min-disk-free>10M</min-disk-free>", (90, 10 * 1024**2, 5000)),
        ("<min-disk-free> 2 GB </min-disk-free>", (90, 2 * 1024**3, 5000)),
        ("<min-disk-free>1</min-disk-free>", (90, 1, 5000)),
        ("<min-disk-free>-1</min-disk-free>", (90, -1, 5000)),
        ("<disk-scan-period>100</disk-scan-period>", (90, -1, 100)),
        ("<disk-scan-period>-1</disk-scan-period>", (90, -1, -1)),
    ],
)
def test_values(body: str, expected: tuple[int, int, int]) -> None:
    config = parse_config(core(body), environ={})
    assert (config.max_disk_usage, config.min_disk_free, config.disk_scan_period) == expected
    assert config.warnings == ()  # implemented: never named in the "not implemented" warning


def test_substitution() -> None:
    text = core("<min-disk-free>${FREE:512K}</min-disk-free>")
    assert parse_config(text, environ={}).min_disk_free == 512 * 1024
    assert parse_config(text, environ={"FREE": "3G"}).min_disk_free == 3 * 1024**3


def test_every_bad_value_is_reported_with_its_line_and_element() -> None:
    text = core(
        "<max-disk-usage>101</max-disk-usage>\n"
        "<min-disk-free>0</min-disk-free>\n"
        "<disk-scan-period>0</disk-scan-period>\n"
        "<max-disk-usage>50</max-disk-usage>"
    )
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    found = [(p.line, p.element, p.message) for p in info.value.problems]
    assert [(line, element) for line, element, _ in found] == [
        (3, "max-disk-usage"),
        (4, "min-disk-free"),
        (5, "disk-scan-period"),
        (6, "max-disk-usage"),
    ]
    assert "101 must be a percentage from 0 to 100, or -1" in found[0][2]
    assert "0 must be -1 or at least 1" in found[1][2]
    assert "0 must be -1 or at least 1" in found[2][2]
    assert "may appear only once" in found[3][2]


@pytest.mark.parametrize(
    "body",
    [
        "<max-disk-usage>-2</max-disk-usage>",
        "<max-disk-usage>90%</max-disk-usage>",
        "<max-disk-usage>0.9</max-disk-usage>",
        "<min-disk-free>10TiB</min-disk-free>",
        "<min-disk-free>lots</min-disk-free>",
        "<disk-scan-period>5s</disk-scan-period>",
        "<disk-scan-period>99999999999</disk-scan-period>",
    ],
)
def test_invalid_values_are_errors(body: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_config(core(body), "broker.xml", environ={})
    (problem,) = info.value.problems
    assert problem.line == 3
