"""Sans-IO protocol codecs: bytes in, events out; events in, bytes out.

Nothing in this package imports trio, reads a clock or touches a socket (the style of
python-hyper/h11): the Trio shell in :mod:`artemis_py.transport` owns the I/O and the timers.
"""

from artemis_py.protocol.errors import LocalProtocolError, ProtocolError, RemoteProtocolError

__all__ = ["LocalProtocolError", "ProtocolError", "RemoteProtocolError"]
