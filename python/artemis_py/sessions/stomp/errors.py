"""The refusal of a STOMP frame, and the kinds of refusal the metrics count."""

from __future__ import annotations

from artemis_py.broker.authorization import AuthorizationError
from artemis_py.broker.paging import Full
from artemis_py.broker.queue import MaxConsumersReachedError
from artemis_py.exceptions import ArtemisError, StorageError

#: Kinds of ERROR frame (``artemis_errors_total{kind}``): the frame broke the protocol, the
#: user may not do it, a limit was reached, the journal failed, no CONNECT came in time,
#: or the node refused it for another reason (no such queue, a bad selector ...).
ERROR_KINDS = ("protocol", "security", "resource", "storage", "timeout", "refused")


class StompError(ArtemisError):
    """A frame the broker refuses; the text (and any extra headers) go into the ERROR frame,
    ``kind`` (one of :data:`ERROR_KINDS`) into the metrics."""

    def __init__(
        self,
        message: str,
        error_headers: tuple[tuple[str, str], ...] = (),
        kind: str = "refused",
    ) -> None:
        super().__init__(message)
        self.error_headers = error_headers
        self.kind = kind


def refusal_kind(exc: Exception) -> str:
    """The kind of a refusal the broker raised."""
    if isinstance(exc, AuthorizationError):
        return "security"
    if isinstance(exc, MaxConsumersReachedError) or isinstance(exc.__cause__, Full):
        return "resource"
    if isinstance(exc, StorageError):
        return "storage"
    return "refused"
