"""Scalar values of broker.xml: substitution, Artemis byte notation, booleans, numbers, enums."""

from __future__ import annotations

import pytest

from artemis_py.config import AddressFullPolicy, parse_bytes
from artemis_py.config.values import (
    parse_bool,
    parse_enum,
    parse_float,
    parse_int,
    substitute,
)


class TestSubstitution:
    def test_set_variable(self) -> None:
        assert substitute("${HOME}/data", {"HOME": "/srv"}) == ("/srv/data", [])

    def test_default_used_when_unset(self) -> None:
        assert substitute("${DATA:data}/journal", {}) == ("data/journal", [])

    def test_environment_wins_over_default(self) -> None:
        assert substitute("${DATA:data}", {"DATA": "/x"}) == ("/x", [])

    def test_name_and_default_are_trimmed_like_artemis(self) -> None:
        assert substitute("${ PORT : 61613 }", {}) == ("61613", [])
        assert substitute("${ PORT }", {"PORT": "1"}) == ("1", [])

    def test_explicit_empty_default(self) -> None:
        assert substitute("a${X:}b", {}) == ("ab", [])

    def test_default_may_contain_colons(self) -> None:
        assert substitute("${URL:tcp://h:1}", {}) == ("tcp://h:1", [])

    def test_several_references(self) -> None:
        text, errors = substitute("${A}-${B:b}-${A}", {"A": "a"})
        assert (text, errors) == ("a-b-a", [])

    def test_unset_without_default_is_an_error_naming_it(self) -> None:
        text, errors = substitute("x ${NOPE} y", {})
        assert len(errors) == 1
        assert "'NOPE'" in str(errors[0])
        assert errors[0].offset == 2
        assert text == "x ${NOPE} y"

    def test_empty_name_is_an_error(self) -> None:
        _, errors = substitute("${}", {})
        assert len(errors) == 1
        assert "empty variable name" in str(errors[0])

    def test_unterminated_reference_is_left_alone(self) -> None:
        assert substitute("pass${word", {}) == ("pass${word", [])

    def test_value_is_not_substituted_again(self) -> None:
        assert substitute("${A}", {"A": "${B}", "B": "no"}) == ("${B}", [])


class TestBytes:
    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("0", 0),
            ("1048576", 1048576),
            ("-1", -1),
            ("10B", 10),
            ("512K", 512 * 1024),
            ("512k", 512 * 1024),
            ("512KB", 512 * 1024),  # Artemis: KB is binary too
            ("512KiB", 512 * 1024),
            ("512kib", 512 * 1024),
            ("512Ki", 512 * 1024),
            ("10M", 10 * 1024**2),
            ("10MB", 10 * 1024**2),
            ("10MiB", 10 * 1024**2),
            ("10 MiB", 10 * 1024**2),
            ("1G", 1024**3),
            ("1GB", 1024**3),
            ("2GiB", 2 * 1024**3),
            ("490KiB", 501760),
        ],
    )
    def test_artemis_notation(self, text: str, expected: int) -> None:
        assert parse_bytes(text) == expected

    @pytest.mark.parametrize(
        "text", ["", "1.5M", "1T", "10 M B", "MiB", "ten", "10iB", "-1K", "1_000"]
    )
    def test_rejected(self, text: str) -> None:
        with pytest.raises(ValueError, match="byte size"):
            parse_bytes(text)

    def test_32_bit_fields_reject_what_artemis_would_truncate(self) -> None:
        assert parse_bytes("2047MiB", bits=32) == 2047 * 1024**2
        with pytest.raises(ValueError, match="out of range"):
            parse_bytes("2GiB", bits=32)


class TestBool:
    def test_true_false(self) -> None:
        assert parse_bool("true") is True
        assert parse_bool("false") is False

    def test_one_zero_rejected_with_artemis_pitfall(self) -> None:
        with pytest.raises(ValueError, match="Artemis would read '1' as false"):
            parse_bool("1")

    def test_capitalised_rejected_with_hint(self) -> None:
        with pytest.raises(ValueError, match="lower case"):
            parse_bool("True")

    def test_garbage(self) -> None:
        with pytest.raises(ValueError, match="expected true or false, got 'yes'"):
            parse_bool("yes")


class TestNumbers:
    def test_int_range(self) -> None:
        assert parse_int("2147483647") == 2**31 - 1
        assert parse_int("-2147483648") == -(2**31)
        with pytest.raises(ValueError, match="out of range"):
            parse_int("2147483648")

    def test_long_range(self) -> None:
        assert parse_int("9223372036854775807", bits=64) == 2**63 - 1
        with pytest.raises(ValueError, match="out of range"):
            parse_int("9223372036854775808", bits=64)

    @pytest.mark.parametrize("text", ["", "1.0", "1e3", "0x10", "1_000", " 1", "--1"])
    def test_int_rejects(self, text: str) -> None:
        with pytest.raises(ValueError, match="integer"):
            parse_int(text)

    def test_float(self) -> None:
        assert parse_float("1") == 1.0
        assert parse_float("1.5") == 1.5
        assert parse_float("2e-1") == 0.2
        for bad in ("nan", "inf", "1,5", ""):
            with pytest.raises(ValueError, match="decimal number"):
                parse_float(bad)


class TestEnum:
    def test_exact_name(self) -> None:
        assert parse_enum("BLOCK", AddressFullPolicy) is AddressFullPolicy.BLOCK

    def test_lower_case_rejected_with_hint(self) -> None:
        with pytest.raises(ValueError, match=r"upper case: PAGE"):
            parse_enum("page", AddressFullPolicy)

    def test_unknown_lists_choices(self) -> None:
        with pytest.raises(ValueError, match="PAGE, DROP, FAIL, BLOCK"):
            parse_enum("SPILL", AddressFullPolicy)


def test_stomp_frame_limit_defaults_are_the_codecs() -> None:
    """An acceptor without stompMax* parameters gives the codec its own default limits:
    config/defaults.py writes them again (the configuration imports no protocol)."""
    from artemis_py.config import AcceptorConfig
    from artemis_py.protocol.stomp import FrameLimits
    from artemis_py.sessions.stomp.session import frame_limits

    assert frame_limits(AcceptorConfig(name="stomp", url="tcp://0.0.0.0:61613")) == FrameLimits()
