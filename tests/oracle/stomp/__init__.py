"""The Python STOMP codec the Rust one (``rust/stomp``) replaced, kept as the oracle of the
differential tests (``tests/unit/protocol/test_stomp_differential.py``, the ``stomp_differential``
fuzz target). The package no longer uses it.

:class:`Connection` (``connection.py``) is the state machine, :class:`FrameReader` (``reader.py``)
the incremental decoder, :func:`encode_frame` (``writer.py``) the encoder and ``headers.py`` the
per-version header rules, as they were when the Rust codec took over. Their events are the
package's own :class:`~artemis_py.protocol.stomp.Frame` objects, so the two codecs' frames
compare equal.
"""

from oracle.stomp.connection import Connection
from oracle.stomp.headers import rules_for
from oracle.stomp.reader import FrameReader
from oracle.stomp.writer import encode_frame

__all__ = ["Connection", "FrameReader", "encode_frame", "rules_for"]
