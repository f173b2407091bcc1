"""Protocol sessions: what a client's frames do to the broker, without I/O.

A session is fed decoded frames by its Trio shell in :mod:`artemis_py.transport` and
answers through a callback; it calls the broker synchronously and hands back what must
become durable before a receipt. STOMP is the first protocol; others go beside it.
"""
