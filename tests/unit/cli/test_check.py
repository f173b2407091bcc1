"""The total-queue checker's counting (:mod:`artemis_py.checker.history`), its pacing, and
``artemis-py check``'s options."""

from __future__ import annotations

import pytest
import trio

from artemis_py.checker.history import History
from artemis_py.checker.runner import Pacer
from artemis_py.cli import build_parser

PREFIX = "run-1 "


def sent(history: History, node: int, *, receipted: bool = True) -> int:
    n = history.attempt(node)
    if receipted:
        history.receipt(n)
    return n


def taken(history: History, n: int, node: int, *, ack: str = "confirmed") -> None:
    """Deliver ``n`` from ``node``; ``ack``: confirmed, sent (no RECEIPT) or none."""
    assert history.deliver(history.body(n), node) == n
    if ack != "none":
        history.sending_ack(n)
    if ack == "confirmed":
        history.ack(n)


def test_a_history_where_everything_came_back_once_is_ok() -> None:
    history = History(PREFIX)
    for i in range(6):
        taken(history, sent(history, i % 3), (i + 1) % 3)

    verdict = history.verdict(3)

    assert verdict.ok
    assert (verdict.sent, verdict.receipted, verdict.received, verdict.duplicated) == (6, 6, 6, 0)
    assert verdict.sent_to == verdict.receipted_by == verdict.received_from == [2, 2, 2]
    assert history.missing() == set()


def test_a_receipted_message_never_received_is_lost_an_unreceipted_one_is_not() -> None:
    history = History(PREFIX)
    lost = sent(history, 0)
    unknown_outcome = sent(history, 1, receipted=False)  # its RECEIPT never came
    came_anyway = sent(history, 1, receipted=False)
    taken(history, came_anyway, 2)

    verdict = history.verdict()

    assert not verdict.ok
    assert verdict.lost == [lost]
    assert unknown_outcome not in verdict.lost
    assert (verdict.sent, verdict.receipted, verdict.received) == (3, 1, 1)
    assert verdict.received_unreceipted == 1
    assert verdict.sent_to == [1, 2, 0]
    assert verdict.receipted_by == [1, 0, 0]
    assert verdict.received_from == [0, 0, 1]
    report = verdict.to_json()
    assert (report["lost"], report["lost_numbers"], report["ok"]) == (1, [lost], False)


def test_duplicates_are_split_by_what_the_consumer_had_done_with_the_first_copy() -> None:
    history = History(PREFIX)
    confirmed, unconfirmed, unacked = (sent(history, 0) for _ in range(3))
    taken(history, confirmed, 0, ack="confirmed")
    taken(history, unconfirmed, 0, ack="sent")
    taken(history, unacked, 0, ack="none")
    for n in (confirmed, unconfirmed, unacked, unacked):
        taken(history, n, 1)

    verdict = history.verdict()

    # Duplicates are allowed (at-least-once) and reported, except after a confirmed ACK.
    assert not verdict.ok
    # The third copy of ``unacked`` came after the second one's ACK was confirmed.
    assert (verdict.after_ack, verdict.after_sent_ack, verdict.never_acked) == (2, 1, 1)
    assert verdict.duplicated == 4
    assert verdict.deliveries == 7
    assert verdict.to_json()["duplicated"] == {
        "total": 4,
        "after_confirmed_ack": 2,
        "after_unconfirmed_ack": 1,
        "never_acknowledged": 1,
    }


def test_redeliveries_without_a_confirmed_ack_pass() -> None:
    history = History(PREFIX)
    unconfirmed, unacked = sent(history, 0), sent(history, 0)
    taken(history, unconfirmed, 0, ack="sent")
    taken(history, unacked, 0, ack="none")
    for n in (unconfirmed, unacked):
        taken(history, n, 1)

    verdict = history.verdict()

    assert verdict.ok
    assert verdict.duplicated == 2
    assert verdict.after_ack == 0


def test_a_number_never_sent_is_unexpected_and_another_runs_body_is_foreign() -> None:
    history = History(PREFIX)
    assert history.deliver(history.body(41), 0) == 41
    assert history.deliver("run-2 1", 0) is None
    assert history.deliver(f"{PREFIX}not-a-number", 0) is None
    assert history.deliver("hello", 1) is None

    verdict = history.verdict()

    assert not verdict.ok
    assert verdict.unexpected == [41]
    assert verdict.foreign == 3
    assert verdict.to_json()["unexpected_numbers"] == [41]


async def test_the_pacer_spreads_starts_at_the_rate_shared_by_its_tasks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    pacer = Pacer(10)
    starts: list[float] = []

    async def task() -> None:
        for _ in range(5):
            await pacer.wait()
            starts.append(trio.current_time())

    begin = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(task)

    assert [round(t - begin, 6) for t in sorted(starts)] == [i / 10 for i in range(20)]


async def test_a_pacer_without_a_rate_does_not_wait(autojump_clock: trio.testing.MockClock) -> None:
    pacer = Pacer(None)
    begin = trio.current_time()
    for _ in range(100):
        await pacer.wait()
    assert trio.current_time() == begin


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--count", "0"], "must be at least 1"),
        (["--rate", "fast"], "not a number"),
        (["--url", "http://x:1"], "unsupported URL scheme"),
        (["--timeout", "-1"], "must be a positive number"),
    ],
)
def test_bad_options_are_one_line_errors(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["check", *argv])
    assert exited.value.code == 2
    assert needle in capsys.readouterr().err


def test_urls_can_be_listed_after_one_option_or_repeated() -> None:
    args = build_parser().parse_args(
        ["check", "--url", "tcp://a:1", "b:2", "--url", "c", "--login", "u", "--passcode", "p"]
    )
    assert [str(u) for u in args.url] == ["tcp://a:1", "tcp://b:2", "tcp://c:61613"]
    assert (args.user, args.password) == ("u", "p")
