"""The error a malformed filter expression raises, from the lexer or the parser."""

from __future__ import annotations

from artemis_py.exceptions import ArtemisError

__all__ = ["FilterSyntaxError"]


class FilterSyntaxError(ArtemisError):
    """A filter expression is malformed; says where (``position`` is 0-based) and why."""

    def __init__(self, text: str, position: int, reason: str) -> None:
        self.text = text
        self.position = position
        self.reason = reason
        self.line = text.count("\n", 0, position) + 1
        self.column = position - (text.rfind("\n", 0, position) + 1) + 1
        if "\n" in text:
            where = f"line {self.line}, column {self.column}"
        else:
            where = f"column {self.column}"
        super().__init__(f'filter "{text}" at {where}: {reason}')

    def __reduce__(self) -> tuple[type[FilterSyntaxError], tuple[str, int, str]]:
        return (type(self), (self.text, self.position, self.reason))
