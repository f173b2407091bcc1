"""The departure memory (cluster/departures.py): what is replayed, when it is forgotten,
and its file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from artemis_py.cluster.departures import MAX_DEPARTURES, Departures, file_name
from artemis_py.protocol.cluster import Leaving, Member


def member(node_id: str, version: int, up: bool = True) -> Member:
    return Member(node_id, "i", "h", 1, up, version)


def test_a_replay_carries_only_the_ids_its_peer_sent_and_nothing_about_the_peer() -> None:
    memory = Departures("me", None)
    memory.add(Leaving("b", "a", ("c:1", "c:2", "me:3", "d:4", "odd")), version=7)
    assert memory.replay("c") == [Leaving("b", "a", ("c:1", "c:2"))]
    assert memory.replay("d") == [Leaving("b", "a", ("d:4",))]
    assert memory.replay("x") == [Leaving("b", "a", ())]
    assert memory.replay("b") == []  # the departed node itself, back


def test_a_departure_is_forgotten_only_by_a_later_run_of_the_departed_node() -> None:
    memory = Departures("me", None)
    memory.add(Leaving("b", "a"), version=7)
    assert not memory.returned(member("b", 7))  # its own announcement, relayed late
    assert not memory.returned(member("b", 3))
    assert not memory.returned(member("c", 99))
    assert "b" in memory
    assert memory.returned(member("b", 8))
    assert "b" not in memory


def test_only_the_latest_departures_are_kept() -> None:
    memory = Departures("me", None)
    for i in range(MAX_DEPARTURES + 3):
        memory.add(Leaving(f"n{i}", "t"), version=1)
    assert len(memory) == MAX_DEPARTURES
    assert "n0" not in memory
    assert "n2" not in memory
    assert f"n{MAX_DEPARTURES + 2}" in memory


async def test_the_memory_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / file_name("my cluster/1")
    assert path.name == "departures-my_cluster_1.json"
    memory = Departures("me", path)
    memory.add(Leaving("b", "a", ("c:1",)), version=7)
    memory.add(Leaving("d", "a"), version=2)
    await memory.save()
    assert not path.with_name(path.name + ".tmp").exists()

    again = Departures("me", path)
    again.load()
    assert [d.node_id for d in again] == ["b", "d"]
    assert again.replay("c") == [Leaving("b", "a", ("c:1",)), Leaving("d", "a", ())]
    assert not again.returned(member("b", 7))


@pytest.mark.parametrize("text", ["{", '{"format": 99, "departures": []}', '{"format": 1}'])
def test_an_unreadable_file_is_reported_and_ignored(
    tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "departures-test.json"
    path.write_text(text)
    memory = Departures("me", path)
    with caplog.at_level(logging.WARNING):
        memory.load()
    assert len(memory) == 0
    assert f"cannot read {path}" in caplog.text


def test_no_file_is_no_memory(tmp_path: Path) -> None:
    memory = Departures("me", tmp_path / "departures-test.json")
    memory.load()
    assert len(memory) == 0
