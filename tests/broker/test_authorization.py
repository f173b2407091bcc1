"""Authorization: reading <security-settings> and artemis-roles.properties, Artemis's match
precedence, and a STOMP session refusing operations before it creates anything (checked
on the broker's own state)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import ROLES_FILE, Authorizer, read_roles
from artemis_py.broker.broker import Broker
from artemis_py.broker.persistence import Persistence
from artemis_py.config import ConfigFileError, RoutingType, WildcardSyntax, parse_config
from artemis_py.config.permissions import Permission, SecuritySettingConfig
from artemis_py.protocol.stomp import NEED_DATA, Connection, Frame, Role
from artemis_py.sessions.stomp import StompError, StompSession

SEND, CONSUME = Permission.SEND, Permission.CONSUME


def config_with(security: str, extra: str = "") -> str:
    return f"""<configuration xmlns="urn:activemq"><core xmlns="urn:activemq:core">
<acceptors><acceptor name="stomp">tcp://127.0.0.1:0?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor></acceptors>
{extra}
<security-settings>
{security}
</security-settings>
</core></configuration>"""


def setting(match: str, **grants: str) -> SecuritySettingConfig:
    return SecuritySettingConfig(
        match, tuple((Permission(p), frozenset(r.split(","))) for p, r in grants.items())
    )


# --- reading broker.xml ----------------------------------------------------------------------


def test_permissions_roles_and_role_mapping_are_read() -> None:
    config = parse_config(
        config_with(
            """<role-mapping from="cn=ops,dc=example" to="admin, amq"/>
<security-setting match="orders.#">
  <permission type="send" roles="amq, writers"/>
  <permission type="send" roles="extra"/>
  <permission type="createTempQueue" roles="amq"/>
  <permission type="manage" roles="admin"/>
</security-setting>"""
        )
    )
    (orders,) = config.security_settings
    assert orders.match == "orders.#"
    # Roles are trimmed, repeated permissions add up, and a mapped external role holds
    # whatever the internal roles it maps to hold (Artemis's role-mapping).
    assert orders.roles(SEND) == {"amq", "writers", "extra", "cn=ops,dc=example"}
    assert orders.roles(Permission.MANAGE) == {"admin", "cn=ops,dc=example"}
    # The old name of createNonDurableQueue, with a warning.
    assert orders.roles(Permission.CREATE_NON_DURABLE_QUEUE) == {"amq", "cn=ops,dc=example"}
    assert orders.roles(CONSUME) == frozenset()
    assert any("createTempQueue' is deprecated" in str(w) for w in config.warnings)


def test_view_and_edit_are_named_in_the_start_up_warning() -> None:
    config = parse_config(
        config_with(
            '<security-setting match="#"><permission type="view" roles="a"/>'
            '<permission type="edit" roles="a"/></security-setting>'
        )
    )
    (summary,) = [w for w in config.warnings if "does not implement" in w.message]
    assert "permission type=view (line 5)" in summary.message
    assert "permission type=edit (line 5)" in summary.message


def test_bad_security_settings_are_errors_with_lines() -> None:
    text = config_with(
        """<security-setting match="a.#">
  <permission type="sned" roles="amq"/>
  <permission type="consume"/>
</security-setting>
<security-setting match="a.#"><permission type="send" roles="amq"/></security-setting>
<security-setting match="a.#.b"><permission type="send" roles="amq"/></security-setting>
<security-setting match="a.*::q"><permission type="send" roles="amq"/></security-setting>
<security-setting match="b"><permission type="send" roles="amq" extra="1"/></security-setting>
<security-setting><permission type="send" roles="amq"/></security-setting>
<security-setting-plugins/>"""
    )
    with pytest.raises(ConfigFileError) as info:
        parse_config(text, "b.xml")
    found = [(p.line, p.element, p.message) for p in info.value.problems]
    assert found == [
        (6, "permission@type", "unknown permission type 'sned'; did you mean 'send'?"),
        (7, "permission@roles", "missing required attribute 'roles'"),
        (9, "security-setting@match", "another security-setting already matches 'a.#' (line 5)"),
        (
            10,
            "security-setting@match",
            "'#' may only be the last word of the security-setting match, got 'a.#.b'",
        ),
        (
            11,
            "security-setting@match",
            "a fully qualified queue name match ('a.*::q') cannot use wildcards",
        ),
        (12, "permission@extra", "unknown attribute 'extra' on <permission>"),
        (13, "security-setting@match", "missing required attribute 'match'"),
        (
            14,
            "security-setting-plugins",
            "unknown element; did you mean <security-setting-plugin>?",
        ),
    ]


# --- matching and precedence ----------------------------------------------------------------


def test_the_most_specific_setting_applies_alone() -> None:
    authorizer = Authorizer(
        True,
        [
            setting("#", send="admin"),
            setting("news.#", send="writers,admin", consume="readers"),
            setting("news.europe.#", consume="europeans"),
            setting("news.*.sport", send="sport"),
            setting("news.europe.sport", send="editor"),
        ],
    )
    writer, reader = frozenset({"writers"}), frozenset({"readers"})
    assert authorizer.allowed(writer, SEND, "news.usa", None)
    assert authorizer.allowed(reader, CONSUME, "news.usa", None)
    # news.europe.# is more specific than news.#, and does not inherit its permissions: it
    # grants no send at all, and consume only to europeans.
    assert not authorizer.allowed(writer, SEND, "news.europe.politics", None)
    assert not authorizer.allowed(reader, CONSUME, "news.europe", None)
    assert authorizer.allowed(frozenset({"europeans"}), CONSUME, "news.europe", None)
    # Without '#' beats with '#'; exact beats every wildcard.
    assert authorizer.setting("news.usa.sport") is authorizer.settings[3]
    assert authorizer.setting("news.europe.sport") is authorizer.settings[4]
    assert authorizer.allowed(frozenset({"editor"}), SEND, "news.europe.sport", None)
    assert not authorizer.allowed(frozenset({"sport"}), SEND, "news.europe.sport", None)
    assert authorizer.allowed(frozenset({"admin"}), SEND, "weather", None)


def test_no_matching_setting_allows_nothing_and_security_off_allows_everything() -> None:
    authorizer = Authorizer(True, [setting("orders", send="amq")])
    assert authorizer.setting("invoices") is None
    assert not authorizer.allowed(frozenset({"amq"}), SEND, "invoices", None)
    assert not authorizer.allowed(frozenset(), SEND, "orders", None)
    assert Authorizer(False).allowed(frozenset(), Permission.MANAGE, "anything", None)


def test_an_exact_fqqn_setting_replaces_the_address_setting_for_its_queue() -> None:
    authorizer = Authorizer(
        True,
        [
            setting("foo", consume="fooRole", send="fooRole"),
            setting("foo::q1", consume="q1Role"),
            setting("#", consume="everyone"),
        ],
    )
    q1, foo = frozenset({"q1Role"}), frozenset({"fooRole"})
    assert authorizer.allowed(q1, CONSUME, "foo", "q1")
    assert not authorizer.allowed(foo, CONSUME, "foo", "q1")
    # Another queue of the address falls back to the address's setting, not to '#'.
    assert authorizer.allowed(foo, CONSUME, "foo", "q2")
    assert not authorizer.allowed(frozenset({"everyone"}), CONSUME, "foo", "q2")
    # A send to the address as a whole is the address's business.
    assert authorizer.allowed(foo, SEND, "foo", None)


def test_the_configured_wildcard_syntax_is_used() -> None:
    syntax = WildcardSyntax(delimiter="/", any_words="+", single_word="?")
    authorizer = Authorizer(True, [setting("a/+", send="amq")], wildcards=syntax)
    assert authorizer.allowed(frozenset({"amq"}), SEND, "a/b/c", None)
    assert not authorizer.allowed(frozenset({"amq"}), SEND, "a.b", None)


# --- artemis-roles.properties ---------------------------------------------------------------


def test_roles_file_lines_as_java_properties_read_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / ROLES_FILE
    path.write_text(
        "# role = user1,user2\n"
        "! also a comment\n"
        "\n"
        "amq = admin, alice\n"
        "readers: bob\n"
        "writers alice\n"
        "empty =\n"
        "= nobody\n"
    )
    with caplog.at_level(logging.WARNING, logger="artemis_py.security"):
        roles = read_roles(path)
    assert roles == {"admin": {"amq"}, "alice": {"amq", "writers"}, "bob": {"readers"}}
    warnings = [r.getMessage() for r in caplog.records]
    assert warnings == [
        f"{path}:7: not a 'role = user1,user2' line, ignored",
        f"{path}:8: not a 'role = user1,user2' line, ignored",
    ]


def test_the_roles_file_is_read_again_when_it_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / ROLES_FILE
    path.write_text("amq = alice\n")
    config = parse_config(config_with('<security-setting match="#"/>'))
    authorizer = Authorizer.from_config(config, tmp_path)
    assert authorizer.subject("bob").roles == frozenset()
    path.write_text("amq = alice, bob\nops = bob\n")
    # Looked at no more than once a second.
    assert authorizer.subject("bob").roles == frozenset()
    monkeypatch.setattr(authorizer, "_checked_at", authorizer._checked_at - 2)
    assert authorizer.subject("bob").roles == {"amq", "ops"}


def test_start_up_warnings_when_everything_would_be_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse_config(config_with(""))
    with caplog.at_level(logging.WARNING, logger="artemis_py.security"):
        authorizer = Authorizer.from_config(config, tmp_path)
    assert authorizer.enabled
    assert authorizer.roles == {}
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "there are no <security-settings>: every operation is refused" in text
    assert f"{tmp_path / ROLES_FILE} does not exist" in text


# --- a session refuses before it creates anything ------------------------------------------

SESSION_SETTINGS = """
<security-setting match="#">
  <permission type="send" roles="admin"/> <permission type="consume" roles="admin"/>
  <permission type="createAddress" roles="admin"/>
  <permission type="createDurableQueue" roles="admin"/>
</security-setting>
<security-setting match="app.#">
  <permission type="send" roles="app, admin"/>
  <permission type="consume" roles="app, admin"/>
  <permission type="browse" roles="app"/>
  <permission type="createNonDurableQueue" roles="app"/>
  <permission type="createAddress" roles="admin"/>
  <permission type="createDurableQueue" roles="admin"/>
</security-setting>
<security-setting match="activemq.management"><permission type="manage" roles="admin"/></security-setting>
"""


class Session:
    def __init__(self, broker: Broker, authorizer: Authorizer, user: str) -> None:
        self.codec = Connection(Role.CLIENT)
        self.sent: list[Frame] = []
        self.session = StompSession(
            broker,
            broker.config.acceptors[0],
            Authenticator(True, {"admin": "pw", "app": "pw"}),
            send=self._receive,
            writable=lambda: True,
            authorizer=authorizer,
        )
        self.frame("CONNECT", **{"accept-version": "1.2", "login": user, "passcode": "pw"})
        self.frame("BEGIN", transaction="tx")

    def _receive(self, frame: Frame) -> None:
        self.codec.receive_data(self.session.codec.send(frame))
        while (event := self.codec.next_event()) is not NEED_DATA:
            assert isinstance(event, Frame)
            self.sent.append(event)

    def frame(self, command: str, body: bytes = b"", **headers: str) -> None:
        frame = Frame(command, tuple(headers.items()), body)
        self.session.codec.receive_data(self.codec.send(frame))
        event = self.session.codec.next_event()
        assert event is not NEED_DATA
        assert isinstance(event, Frame)
        pending = self.session.handle(event)
        if pending is not None:
            pending.complete()


@pytest.fixture
def secured() -> tuple[Broker, Authorizer]:
    config = parse_config(config_with(SESSION_SETTINGS))
    broker = Broker(config, Persistence(None, "0123456789abcdef"))
    broker.recover()
    roles = {"admin": frozenset({"admin"}), "app": frozenset({"app"})}
    return broker, Authorizer(True, config.security_settings, roles)


@pytest.mark.parametrize(
    ("command", "headers", "refusal"),
    [
        # The address would be auto-created: app lacks createAddress on app.#.
        ("SEND", {"destination": "/topic/app.new"}, "'createAddress' on address 'app.new'"),
        ("SEND", {"destination": "/queue/app.new"}, "'createAddress' on address 'app.new'"),
        ("SEND", {"destination": "/queue/other"}, "'send' on address 'other'"),
        (
            "SEND",
            {"destination": "/queue/app.new", "transaction": "tx"},
            "'createAddress' on address 'app.new'",
        ),
        ("SUBSCRIBE", {"destination": "/queue/app.new", "id": "1"}, "'createAddress'"),
        ("SUBSCRIBE", {"destination": "/topic/app.new", "id": "1"}, "'createAddress'"),
        (
            "SEND",
            {"destination": "activemq.management", "_AMQ_ResourceName": "queue.q"},
            "'manage' on address 'activemq.management'",
        ),
    ],
)
def test_a_refused_operation_creates_nothing(
    secured: tuple[Broker, Authorizer], command: str, headers: dict[str, str], refusal: str
) -> None:
    broker, authorizer = secured
    before = set(broker.post_office.queues), {a for a in ("app.new", "other")}
    app = Session(broker, authorizer, "app")
    body = b"x" if command == "SEND" else b""
    with pytest.raises(StompError) as info:
        app.frame(command, body, **headers)
    assert f"Security Error: user 'app' does not have permission {refusal}" in str(info.value)
    assert set(broker.post_office.queues) == before[0]
    assert all(broker.post_office.address(a) is None for a in before[1])
    assert all(not q.messages for q in broker.queues())


def test_the_anycast_queue_a_send_would_create_needs_create_durable_queue(
    secured: tuple[Broker, Authorizer],
) -> None:
    broker, authorizer = secured
    admin = Session(broker, authorizer, "admin")
    admin.frame("SEND", b"m", destination="/topic/app.orders")  # a multicast address
    assert broker.post_office.address("app.orders") is not None
    assert broker.queue("app.orders") is None
    app = Session(broker, authorizer, "app")
    with pytest.raises(StompError, match=r"'createDurableQueue' on queue 'app\.orders'"):
        app.frame("SEND", b"m", destination="/queue/app.orders")
    assert broker.queue("app.orders") is None
    # Once the queue exists, app may send to it and consume from it.
    admin.frame("SEND", b"m", destination="/queue/app.orders")
    app.frame("SEND", b"mine", destination="/queue/app.orders")
    assert [r.message.body for r in broker.queue("app.orders").messages] == [b"m", b"mine"]  # type: ignore[union-attr]
    app.frame("SUBSCRIBE", destination="/queue/app.orders", id="s")
    assert len([f for f in app.sent if f.command == "MESSAGE"]) == 2
    # A topic subscription: a temporary queue (createNonDurableQueue is granted on app.#).
    app.frame("SUBSCRIBE", destination="/topic/app.orders", id="t")
    temporary = [q for q in broker.queues() if q.temporary]
    assert [q.routing_type for q in temporary] == [RoutingType.MULTICAST]
    # Unsubscribing deletes it, which needs deleteNonDurableQueue (Artemis): refused, and
    # the subscription is still there.
    with pytest.raises(StompError, match="'deleteNonDurableQueue' on queue"):
        app.frame("UNSUBSCRIBE", id="t")
    assert "t" in app.session.subscriptions
