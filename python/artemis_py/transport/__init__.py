"""The Trio shells: sockets, acceptors, and the tasks of each connection and cluster link.

Everything here moves bytes and time; what the bytes mean lives in the sans-IO codecs
(:mod:`artemis_py.protocol`) and in what interprets their frames (the protocol sessions in
:mod:`artemis_py.sessions`, the cluster connection in :mod:`artemis_py.cluster`).
"""
