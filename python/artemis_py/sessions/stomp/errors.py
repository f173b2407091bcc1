"""The refusal of a STOMP frame."""

from __future__ import annotations

from artemis_py.exceptions import ArtemisError


class StompError(ArtemisError):
    """A frame the broker refuses; the text (and any extra headers) go into the ERROR frame."""

    def __init__(self, message: str, error_headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.error_headers = error_headers
