"""Authorization on a real node with stomp.py: each permission granted and denied.

One node for the module. For each operation under test, the address space ``<key>.#`` grants
the permissions the operation needs to the user ``<key>-yes``, and all of them but the one
under test to ``<key>-no``; ``admin`` may do everything everywhere. A denied operation gets an
ERROR naming the permission and the address, and the node's state (seen by ``admin``) shows
that nothing was stored or created.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import trio

from artemis_py.client import open_stomp_connection
from artemis_py.client.offset_reader import list_streams

from .conftest import ALL_PERMISSIONS, BrokerProcess, Client, unique, wait_for

PASSWORD = "pw"
MANAGEMENT = "activemq.management"


@dataclass(frozen=True)
class Operation:
    key: str  # its address space is <key>.#
    needs: frozenset[str]
    tested: str


OPERATIONS = [
    Operation("send", frozenset({"send"}), "send"),
    Operation("newaddress", frozenset({"send", "createAddress"}), "createAddress"),
    Operation("newqueue", frozenset({"send", "createAddress", "createDurableQueue"}), "createDurableQueue"),
    Operation("consume", frozenset({"consume"}), "consume"),
    Operation("browse", frozenset({"browse"}), "browse"),
    Operation("topic", frozenset({"createAddress", "createNonDurableQueue", "consume"}), "createNonDurableQueue"),
    Operation("untopic", frozenset({"createAddress", "createNonDurableQueue", "consume", "deleteNonDurableQueue"}), "deleteNonDurableQueue"),
    Operation("durable", frozenset({"createAddress", "createDurableQueue", "consume"}), "createDurableQueue"),
    Operation("undurable", frozenset({"createAddress", "createDurableQueue", "consume", "deleteDurableQueue"}), "deleteDurableQueue"),
    Operation("manage", frozenset({"manage"}), "manage"),
]  # fmt: skip


def _setting(match: str, roles_of: Callable[[str], list[str]]) -> str:
    permissions = "".join(
        f'<permission type="{p}" roles="{",".join(["admin", *roles_of(p)])}"/>'
        for p in ALL_PERMISSIONS
    )
    return f'<security-setting match="{match}">{permissions}</security-setting>'


def security_settings() -> str:
    parts = [_setting("#", lambda p: [])]
    for op in OPERATIONS:
        match = MANAGEMENT if op.key == "manage" else f"{op.key}.#"
        parts.append(
            _setting(
                match,
                lambda p, op=op: (
                    [f"{op.key}-yes"] + ([f"{op.key}-no"] if p != op.tested else [])
                    if p in op.needs
                    else []
                ),
            )
        )
    # Precedence: prec.# lets writers send and create addresses; the exact prec.secret
    # grants only admin, and does not inherit from prec.#.
    parts.append(_setting("prec.#", lambda p: ["writer"] if p in ("send", "createAddress") else []))
    parts.append(_setting("prec.secret", lambda p: []))
    # FQQN: consuming from the address fq is admin's; its queue q1 is also fq-reader's.
    parts.append(_setting("fq", lambda p: []))
    parts.append(
        '<security-setting match="fq::q1"><permission type="consume" roles="fq-reader"/></security-setting>'
    )
    return "".join(parts)


USERS = ["admin", "writer", "fq-reader"] + [
    f"{op.key}-{w}" for op in OPERATIONS for w in ("yes", "no")
]

ADDRESSES = """
      <address name="fq"><multicast><queue name="q1"/><queue name="q2"/></multicast></address>"""


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    node = BrokerProcess(
        tmp_path_factory.mktemp("authz"),
        name="authz",
        security=True,
        users=dict.fromkeys(USERS, PASSWORD),
        roles={user: [user] for user in USERS},
        security_settings=security_settings(),
        addresses=ADDRESSES,
    )
    node.start()
    yield node
    node.close()


def client(node: BrokerProcess, user: str, **options: object) -> Client:
    return Client(node.port, login=user, passcode=PASSWORD, **options)  # type: ignore[arg-type]


def outcome(c: Client, receipt: str) -> str | None:
    """None when the frame's RECEIPT came; else the ERROR's message."""
    wait_for(
        lambda: receipt in c.receipts or c.errors, 10, message=f"RECEIPT {receipt} or an ERROR"
    )
    return c.errors[0].headers.get("message") if c.errors else None


def held(node: BrokerProcess, queue: str) -> int | None:
    """How many messages ``queue`` holds (None: there is no such queue), seen by admin."""

    async def main() -> int | None:
        async with open_stomp_connection(
            "127.0.0.1", node.port, login="admin", passcode=PASSWORD
        ) as conn:
            listing = await list_streams(conn, queue)
            return sum(s.count for s in listing.streams) if listing.exists else None

    return trio.run(main)


def send(c: Client, destination: str, body: str = "m", **headers: str) -> str | None:
    r = c.next_receipt()
    c.conn.send(destination, body, headers={"receipt": r, **headers})
    return outcome(c, r)


def subscribe(c: Client, destination: str, sub_id: str, **headers: str) -> str | None:
    r = c.next_receipt()
    c.conn.subscribe(destination, sub_id, ack="auto", headers={"receipt": r, **headers})
    return outcome(c, r)


def unsubscribe(c: Client, sub_id: str, **headers: str) -> str | None:
    r = c.next_receipt()
    c.conn.unsubscribe(sub_id, headers={"receipt": r, **headers})
    return outcome(c, r)


def perform(node: BrokerProcess, op: Operation, user: str) -> tuple[str | None, Callable[[], None]]:
    """Do ``op`` as ``user``: (the ERROR's message or None, a check of the node's state
    that differs between granted and refused)."""
    name = unique(op.key + ".")
    admin = client(node, "admin")
    c = client(node, user, client_id=unique("cid"))
    granted = user.endswith("-yes")
    try:
        if op.key in ("send", "consume", "browse"):
            assert send(admin, f"/queue/{name}") is None
        if op.key == "send":
            error = send(c, f"/queue/{name}")
            return error, lambda: held_is(node, name, 2 if granted else 1)
        if op.key == "newaddress":
            return send(c, f"/topic/{name}"), lambda: None
        if op.key == "newqueue":
            error = send(c, f"/queue/{name}")
            return error, lambda: held_is(node, name, 1 if granted else None)
        if op.key == "consume":
            error = subscribe(c, f"/queue/{name}", "s")
            if granted:
                c.wait_messages(1)
            # Consumed: the auto-created queue is empty, or auto-deleted with its consumer.
            return error, lambda: held_is(node, name, *((0, None) if granted else (1,)))
        if op.key == "browse":
            error = subscribe(c, f"/queue/{name}", "s", browser="true")
            if granted:
                c.wait_messages(2)  # the message and the browser:end frame
            return error, lambda: held_is(node, name, 1)
        if op.key in ("topic", "untopic"):
            error = subscribe(c, f"/topic/{name}", "s")
            if op.key == "untopic":
                assert error is None, error
                error = unsubscribe(c, "s")
            return error, lambda: None
        if op.key in ("durable", "undurable"):
            queue = f"{c.client_id}.sub"
            error = subscribe(c, f"/topic/{name}", "s", **{"durable-subscription-name": "sub"})
            if op.key == "undurable":
                assert error is None, error
                error = unsubscribe(c, "s", **{"durable-subscription-name": "sub"})
                return error, lambda: held_is(node, queue, None if granted else 0)
            return error, lambda: held_is(node, queue, 0 if granted else None)
        assert op.key == "manage"
        assert send(admin, f"/queue/{name}") is None
        stream, end = stream_end(node, name)
        error = send(
            c,
            MANAGEMENT,
            json.dumps([stream, end]),
            _AMQ_ResourceName=f"queue.{name}",
            _AMQ_OperationName="acknowledgeUpTo",
        )
        return error, lambda: held_is(node, name, 0 if granted else 1)
    finally:
        c.close()
        admin.close()


def held_is(node: BrokerProcess, queue: str, *expected: int | None) -> None:
    """Wait until ``queue`` holds one of the ``expected`` counts (None: no such queue)."""
    wait_for(lambda: held(node, queue) in expected, 10, message=f"{queue} to hold {expected}")


def stream_end(node: BrokerProcess, queue: str) -> tuple[str, int]:
    async def main() -> tuple[str, int]:
        async with open_stomp_connection(
            "127.0.0.1", node.port, login="admin", passcode=PASSWORD
        ) as conn:
            (stream,) = (await list_streams(conn, queue)).streams
            return stream.stream, stream.end

    return trio.run(main)


@pytest.mark.parametrize("op", OPERATIONS, ids=[op.tested + ":" + op.key for op in OPERATIONS])
@pytest.mark.parametrize("granted", [True, False], ids=["granted", "denied"])
def test_each_permission_granted_and_denied(
    node: BrokerProcess, op: Operation, granted: bool
) -> None:
    user = f"{op.key}-{'yes' if granted else 'no'}"
    error, check_state = perform(node, op, user)
    if granted:
        assert error is None, error
    else:
        address = MANAGEMENT if op.key == "manage" else op.key + "."
        assert error is not None
        assert error.startswith(
            f"Security Error: user '{user}' does not have permission '{op.tested}' on "
        ), error
        assert f"address '{address}" in error, error
    check_state()


def test_a_denied_send_in_a_transaction_stores_nothing_of_it(node: BrokerProcess) -> None:
    name = unique("send.")
    admin = client(node, "admin")
    assert send(admin, f"/queue/{name}") is None
    c = client(node, "send-yes")
    c.begin("tx")
    assert send(c, f"/queue/{name}", transaction="tx") is None
    error = send(c, "/queue/elsewhere", transaction="tx")
    assert (
        error
        == "Security Error: user 'send-yes' does not have permission 'send' on address 'elsewhere'"
    )
    held_is(node, name, 1)  # only admin's: the transaction rolled back with the connection
    c.close()
    admin.close()


def test_an_exact_match_beats_the_wildcard_and_inherits_nothing(node: BrokerProcess) -> None:
    writer = client(node, "writer")
    assert send(writer, f"/topic/{unique('prec.news')}") is None
    error = send(writer, "/topic/prec.secret")
    assert (
        error
        == "Security Error: user 'writer' does not have permission 'send' on address 'prec.secret'"
    )
    writer.close()


def test_a_fully_qualified_queue_name_has_its_own_permissions(node: BrokerProcess) -> None:
    reader = client(node, "fq-reader")
    assert subscribe(reader, "fq::q1", "one") is None
    admin = client(node, "admin")
    assert send(admin, "/topic/fq", "hello") is None
    assert [m.body for m in reader.wait_messages(1)] == ["hello"]
    # q2 has no setting of its own: the address's applies, and only admin may consume.
    error = subscribe(reader, "fq::q2", "two")
    assert error == (
        "Security Error: user 'fq-reader' does not have permission 'consume' on queue 'q2' "
        "of address 'fq'"
    )
    reader.close()
    # Nor may fq-reader send to its queue: fq::q1's setting grants no send.
    reader = client(node, "fq-reader")
    error = send(reader, "fq::q1")
    assert error == (
        "Security Error: user 'fq-reader' does not have permission 'send' on queue 'q1' "
        "of address 'fq'"
    )
    reader.close()
    admin.close()
    held_is(node, "q2", 1)  # admin's message; nothing from fq-reader
