"""The number of votes a replication backup needs (Artemis's QuorumVoteServerConnect table)."""

import pytest

from artemis_py.ha.quorum import votes_needed


@pytest.mark.parametrize(
    ("cluster_size", "needed"), [(1, 0), (2, 1), (3, 2), (4, 3), (5, 3), (6, 4), (7, 4)]
)
def test_the_majority_of_the_cluster(cluster_size: int, needed: int) -> None:
    assert votes_needed(cluster_size, quorum_size=-1) == needed


def test_quorum_size_when_set() -> None:
    assert votes_needed(5, quorum_size=1) == 1
    assert votes_needed(1, quorum_size=2) == 2
