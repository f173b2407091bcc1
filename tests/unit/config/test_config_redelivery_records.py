"""max-redelivery-records: Artemis's default (10), -1 or a count, an error with its line."""

from __future__ import annotations

import pytest

from artemis_py.config import ConfigFileError, parse_config

from test_config_disk import core


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("", 10),
        ("<max-redelivery-records>1</max-redelivery-records>", 1),
        ("<max-redelivery-records>0</max-redelivery-records>", 0),
        ("<max-redelivery-records>-1</max-redelivery-records>", -1),
    ],
)
def test_values_and_no_warning(body: str, expected: int) -> None:
    config = parse_config(core(body), environ={})
    assert config.max_redelivery_records == expected
    assert config.warnings == ()  # honoured: not named in the "not implemented" warning


@pytest.mark.parametrize("value", ["-2", "ten", "3000000000"])
def test_a_bad_value_names_its_line_and_element(value: str) -> None:
    text = core(f"<max-redelivery-records>{value}</max-redelivery-records>")
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "broker.xml", environ={})
    [problem] = info.value.problems
    assert (problem.line, problem.element) == (3, "max-redelivery-records")
