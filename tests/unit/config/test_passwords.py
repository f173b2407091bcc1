"""Masked and hashed passwords against values the real Apache Artemis 2.56.0 produced."""

from __future__ import annotations

import pytest

from artemis_py.config import ConfigFileError, ConfigProblem, parse_config, passwords

# `bin/artemis mask <plain>` of Apache Artemis 2.56.0 (default key "clusterpassword"):
# plain -> the "result:" it printed.
ARTEMIS_MASKED = {
    "secret": "-41e444c3ed07d6dd",
    "admin": "-4db652271cf8b661",
    "bench-cluster-secret": "-3eb21788bd9f3a97dcb7090bc7d2e3e2fdfb4671f0b49b0",
    "pässwörd": "-2f26c02b3a47ce2cc1dd8a8e958046b2",
    # Cipher text ff 70 ...: negative, and Java drops the redundant leading ff.
    "pw1": "-8ffa0ffe3d1475",
    # Cipher text 00 3b ...: Java drops the leading zero byte.
    "pw54": "3b9bbf50e19aed",
    # Cipher text 80 42 ...: the most negative first byte.
    "pw113": "-7fbd7c47a9c527e7",
}
# `bin/artemis mask --key=mykey123 secret`
ARTEMIS_MASKED_WITH_KEY = ("mykey123", "secret", "3b8a0088651eb946")
# `bin/artemis mask pw81` prints "-6811399600758d", a value Artemis itself cannot unmask (cipher
# text ff 97 ...: Java's two's-complement bytes lose the leading ff and it pads with 00).
ARTEMIS_UNREADABLE = ("pw81", "-6811399600758d")
# `bin/artemis mask --hash <plain>` of Apache Artemis 2.56.0.
ARTEMIS_HASHED = {
    "secret": "1024:4DD926B5B26C2630B2A3790EFB821507FDB951ABCDB8EF649325BB242397C5D2:"
    "AA36E009A75AA8D060D0B1A4B6DC4228C0AC8C6B932049AAC6E9341CAF7E897B"
    "530322AAAFCCD0137DF911B387D1BD0F75523D66E6FA7A983EA062E2CFEB3ABA",
    "pässwörd": "1024:2882EE929EEFF7BE07BA9F4839D7CE4538C813D06AF710A896FDBB0F1ADC3508:"
    "2D3ED903919B737623B5432AAE95A0EC88BFB3270E2914064EE6E5B1A2E6F459"
    "C905D82023E3C1B58079622391F762E401A4391039E6E716E41F5CCB84E31D73",
}


@pytest.mark.parametrize(("plain", "masked"), sorted(ARTEMIS_MASKED.items()))
def test_masks_like_artemis(plain: str, masked: str) -> None:
    assert passwords.mask(plain) == f"ENC({masked})"
    assert passwords.reveal(f"ENC({masked})") == plain


def test_key() -> None:
    key, plain, masked = ARTEMIS_MASKED_WITH_KEY
    assert passwords.mask(plain, key) == f"ENC({masked})"
    assert passwords.reveal(f"ENC({masked})", key) == plain
    with pytest.raises(ValueError, match="not masked with this key"):
        passwords.reveal(f"ENC({masked})")


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key, plain, masked = ARTEMIS_MASKED_WITH_KEY
    monkeypatch.setenv(passwords.KEY_ENVIRONMENT, key)
    assert passwords.reveal(f"ENC({masked})") == plain


def test_the_value_artemis_cannot_read_is_refused() -> None:
    plain, masked = ARTEMIS_UNREADABLE
    with pytest.raises(ValueError, match="not masked with this key"):
        passwords.reveal(f"ENC({masked})")
    with pytest.raises(ValueError, match="quirk"):
        passwords.mask(plain)


def test_plain_and_malformed_values() -> None:
    assert passwords.reveal("plain") == "plain"
    assert passwords.reveal("ENC(x") == "ENC(x"
    for bad in ("ENC()", "ENC(xyz)", "ENC(12 34)", "ENC(0x12)"):
        with pytest.raises(ValueError, match="hexadecimal"):
            passwords.reveal(bad)
    with pytest.raises(ValueError, match="4 to 56 bytes"):
        passwords.mask("secret", "abc")


@pytest.mark.parametrize(("plain", "hashed"), sorted(ARTEMIS_HASHED.items()))
def test_verifies_artemis_hashes(plain: str, hashed: str) -> None:
    assert passwords.verify(f"ENC({hashed})", plain)
    assert not passwords.verify(f"ENC({hashed})", plain + "x")
    assert not passwords.verify(f"ENC({hashed})", "")


def test_hash_format() -> None:
    stored = passwords.hash_password("secret")
    iterations, salt, digest = passwords.unwrap(stored).split(":")
    assert stored.startswith("ENC(")
    assert iterations == "1024"
    assert len(bytes.fromhex(salt)) == 32
    assert len(bytes.fromhex(digest)) == 64
    assert salt == salt.upper()
    assert digest == digest.upper()
    assert passwords.verify(stored, "secret")
    assert not passwords.verify(stored, "Secret")
    assert stored != passwords.hash_password("secret")  # salted


def test_verify_plain_and_malformed() -> None:
    assert passwords.verify("secret", "secret")
    assert not passwords.verify("secret", "secre")
    for bad, error in (
        ("ENC(-41e444c3ed07d6dd)", "not a hashed password"),
        ("ENC(1024:AB)", "not a hashed password"),
        ("ENC(0:AB:CD)", "damaged hashed password"),
        ("ENC(1024:ABC:CD)", "damaged hashed password"),
    ):
        assert not passwords.verify(bad, "secret")
        with pytest.raises(ValueError, match=error):
            passwords.check_hash(bad)


def test_codec_description() -> None:
    default = passwords.DEFAULT_CODEC_CLASS
    assert passwords.parse_codec(default) == passwords.PasswordCodec()
    assert passwords.parse_codec(f"{default};key=mykey123") == passwords.PasswordCodec("mykey123")
    assert passwords.parse_codec(f"{default};algorithm=two-way;other=1").key is None
    with pytest.raises(ValueError, match="Java class"):
        passwords.parse_codec("com.example.MyCodec;key=x")
    with pytest.raises(ValueError, match="cannot unmask"):
        passwords.parse_codec(f"{default};algorithm=one-way")
    with pytest.raises(ValueError, match="name=value"):
        passwords.parse_codec(f"{default};key")


# --- broker.xml: <cluster-password>, <mask-password>, <password-codec> ---------------------------


def _core(body: str) -> str:
    return (
        '<configuration xmlns="urn:activemq">\n<core xmlns="urn:activemq:core">\n'
        f"{body}\n</core>\n</configuration>\n"
    )


def _problems(body: str) -> list[ConfigProblem]:
    with pytest.raises(ConfigFileError) as info:
        parse_config(_core(body), "broker.xml", environ={})
    return list(info.value.problems)


SECRET = ARTEMIS_MASKED["secret"]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (f"<cluster-password>ENC({SECRET})</cluster-password>", "secret"),
        (f"<cluster-password>  ENC({SECRET})\n</cluster-password>", "secret"),
        ("<cluster-password>plain</cluster-password>", "plain"),
        # mask-password true: masked even without ENC(); false: ENC(...) is the password.
        (
            f"<mask-password>true</mask-password><cluster-password>{SECRET}</cluster-password>",
            "secret",
        ),
        (
            f"<mask-password>false</mask-password><cluster-password>ENC({SECRET})</cluster-password>",
            f"ENC({SECRET})",
        ),
        (
            f"<password-codec>{passwords.DEFAULT_CODEC_CLASS};key=mykey123</password-codec>"
            "<cluster-password>ENC(3b8a0088651eb946)</cluster-password>",
            "secret",
        ),
    ],
)
def test_cluster_password(body: str, expected: str) -> None:
    assert parse_config(_core(body), "broker.xml", environ={}).cluster_password == expected


def test_malformed_masked_cluster_password() -> None:
    body = "<name>n</name>\n<cluster-password>ENC(not-hex)</cluster-password>"
    (problem,) = _problems(body)
    assert (problem.file, problem.line, problem.element) == ("broker.xml", 4, "cluster-password")
    assert "masked password" in problem.message
    assert "hexadecimal" in problem.message
    (problem,) = _problems("<cluster-password>ENC(3b8a0088651eb946)</cluster-password>")
    assert "not masked with this key" in problem.message


def test_password_codec_other_than_artemis_default_is_an_error() -> None:
    (problem,) = _problems("<password-codec>com.example.VaultCodec</password-codec>")
    assert problem.element == "password-codec"
    assert "Java class" in problem.message
