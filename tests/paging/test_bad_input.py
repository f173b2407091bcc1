"""Bad input around paging, on a real node: an unusable paging directory, a page file of
another format, a damaged page file. Each gets a clear one-line error naming the file (no
traceback, nothing served), and nothing already synced is lost once the file is back."""

from __future__ import annotations

import shutil

from integration.conftest import start_refused

from .conftest import page_files, take_acking
from .test_page_policy import consume, send_numbered

Q = "/queue/paged.bad"


def paged_backlog(node, clients, count: int = 60) -> None:
    send_numbered(clients(node), Q, count)
    assert len(page_files(node)) >= 2, "the backlog must be in several page files"
    node.stop()


def test_a_paging_directory_that_is_not_a_directory_is_named(paged_node, clients):
    paged_node.stop()
    paging = paged_node.data_dir / "paging"
    shutil.rmtree(paging, ignore_errors=True)
    paging.write_text("not a directory")
    log = start_refused(paged_node)
    assert f"paging directory {paging} is not usable" in log, log


def test_a_page_file_of_another_format_is_refused_and_nothing_is_lost(paged_node, clients):
    paged_backlog(paged_node, clients)
    first = page_files(paged_node)[0]
    original = first.read_bytes()
    first.write_bytes(b"NOTAPAGE" + original[8:])
    log = start_refused(paged_node)
    assert str(first) in log, log
    assert "not a page file" in log, log
    first.write_bytes(original)  # put back: every synced message is still there, in order
    paged_node.start()
    assert consume(clients, paged_node, Q, 60) == list(range(60))


def test_a_damaged_record_before_the_end_is_an_error_naming_file_and_offset(paged_node, clients):
    paged_backlog(paged_node, clients)
    first = page_files(paged_node)[0]
    original = first.read_bytes()
    damaged = bytearray(original)
    damaged[100] ^= 0xFF  # inside the first record, in a page that is not the last
    first.write_bytes(bytes(damaged))
    log = start_refused(paged_node)
    assert str(first) in log, log
    assert "offset" in log, log
    first.write_bytes(original)
    paged_node.start()
    c = clients(paged_node)
    c.subscribe(Q, ack="client-individual", **{"consumer-window-size": "-1"})
    assert take_acking(c, 60) == list(range(60))
