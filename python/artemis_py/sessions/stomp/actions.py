"""What a STOMP session asks its shell to do when a frame alone will not do: named actions.

The session is sans-IO: it hands frames to its ``send`` callback and never waits. Two
things it needs need I/O, and it names them instead of doing them:

* :class:`StreamBody`: a MESSAGE whose body is in a large-message file. The shell sends the
  frame, then streams the body from its file through the broker's view of those files
  (:mod:`artemis_py.broker.storage_views`), in order with the other frames.
* :class:`Browse`: a browse SUBSCRIBE (:mod:`.browsing`), which :meth:`StompSession.handle`
  returns in place of a :class:`~artemis_py.broker.pending.Pending`. The shell carries it
  out in the frame's turn: it reads what the browse names through the broker's offset
  reading (``broker.offsets``: page files are read in worker threads), then hands the result
  to :func:`.browsing.answer`, which sends the MESSAGE frames; the frame's RECEIPT follows
  them. A failed read is refused as a frame is (:func:`.browsing.unreadable`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from artemis_py.broker.message import LargeBody
    from artemis_py.broker.queue import Queue
    from artemis_py.protocol.stomp import Frame


@dataclass(frozen=True, slots=True)
class StreamBody:
    """Send ``frame`` (without a body of its own), then ``body`` streamed from its file."""

    frame: Frame
    body: LargeBody


@dataclass(frozen=True, slots=True)
class Browse:
    """A browse to read for subscription ``sub_id``: the ready messages of ``stream`` in
    ``queue`` with ``start <= offset < end`` (None: up to the stable end), at most ``limit``
    of them (-1: all); ``count_only``: only the end frame. ``listing``: only the end frame,
    listing the queue's streams (``queue`` None: the queue does not exist, nothing to read)."""

    sub_id: str
    destination: str
    queue: Queue | None
    listing: bool = False
    stream: str = ""
    start: int = 0
    end: int | None = None
    limit: int = -1
    count_only: bool = False
    #: Never done at once, even with nothing ahead of it: it reads (see the module doc).
    immediate: ClassVar[bool] = False
