"""Journal operations: :class:`Op`, a tagged tuple the native journal reads without conversion.

``Op.add(7, 10, b"...")`` is the tuple ``("add", 7, 10, b"...")``; the native side checks the
shape when the op is submitted. Prepared transactions found by a load hand their ops back in
the same form.
"""

from __future__ import annotations

from typing import Any


class Op(tuple[Any, ...]):
    """One record to append: ``(kind, *fields)``, built with the constructors below."""

    __slots__ = ()

    @property
    def kind(self) -> str:
        """``"add"``, ``"update"``, ``"delete"``, ``"add_tx"``, ... ``"rollback"``."""
        kind: str = self[0]
        return kind

    @property
    def is_transactional_record(self) -> bool:
        """An add/update/delete inside a transaction (only its commit makes it durable)."""
        return self[0] in TRANSACTIONAL_RECORDS

    @property
    def is_transaction_control(self) -> bool:
        """A prepare, commit or rollback."""
        return self[0] in TRANSACTION_CONTROL

    @staticmethod
    def add(id: int, record_type: int, payload: bytes) -> Op:
        return Op(("add", id, record_type, payload))

    @staticmethod
    def update(id: int, record_type: int, payload: bytes) -> Op:
        return Op(("update", id, record_type, payload))

    @staticmethod
    def delete(id: int) -> Op:
        return Op(("delete", id))

    @staticmethod
    def add_tx(tx_id: int, id: int, record_type: int, payload: bytes) -> Op:
        return Op(("add_tx", tx_id, id, record_type, payload))

    @staticmethod
    def update_tx(tx_id: int, id: int, record_type: int, payload: bytes) -> Op:
        return Op(("update_tx", tx_id, id, record_type, payload))

    @staticmethod
    def delete_tx(tx_id: int, id: int) -> Op:
        return Op(("delete_tx", tx_id, id))

    @staticmethod
    def prepare(tx_id: int, xid: bytes) -> Op:
        return Op(("prepare", tx_id, xid))

    @staticmethod
    def commit(tx_id: int) -> Op:
        return Op(("commit", tx_id))

    @staticmethod
    def rollback(tx_id: int) -> Op:
        return Op(("rollback", tx_id))

    def __repr__(self) -> str:
        fields = ", ".join(
            f"<{len(f)} bytes>" if isinstance(f, bytes | bytearray) else repr(f) for f in self[1:]
        )
        return f"Op.{self[0]}({fields})"


#: Kinds of records written inside a transaction.
TRANSACTIONAL_RECORDS = frozenset({"add_tx", "update_tx", "delete_tx"})
#: Kinds that end (or prepare) a transaction.
TRANSACTION_CONTROL = frozenset({"prepare", "commit", "rollback"})
