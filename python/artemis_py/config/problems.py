"""Configuration problems: what is wrong (or merely worth a warning), where, in which element.

The parser never stops at the first problem. It records every :class:`ConfigProblem` in a
:class:`ProblemCollector` and, once the whole file has been read, raises one
:class:`~artemis_py.exceptions.ConfigError` listing all of them, one per line, as
``file:line: element: message`` (the format compilers use, so editors can jump to it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NoReturn

from artemis_py.exceptions import ConfigError

__all__ = ["ConfigFileError", "ConfigProblem", "ProblemCollector", "raise_problems"]


@dataclass(frozen=True, slots=True)
class ConfigProblem:
    """One error or warning about a configuration file.

    ``line`` is 1-based; ``None`` when the problem is not tied to a place in the file (a missing
    file). ``element`` names the XML element (``journal-file-size``) or attribute
    (``queue@max-consumers``) the problem is about.
    """

    file: str
    line: int | None
    element: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        if self.element:
            return f"{where}: <{self.element}>: {self.message}"
        return f"{where}: {self.message}"


class ConfigFileError(ConfigError):
    """A :class:`ConfigError` that carries the individual problems.

    ``str(error)`` is the human-readable list; ``error.problems`` the same as data, in file order.
    """

    def __init__(self, message: str, problems: tuple[ConfigProblem, ...]) -> None:
        super().__init__(message)
        self.problems = problems


@dataclass(slots=True)
class ProblemCollector:
    """Accumulates errors and warnings for one file."""

    file: str
    errors: list[ConfigProblem] = field(default_factory=list)
    warnings: list[ConfigProblem] = field(default_factory=list)

    def error(self, line: int | None, element: str, message: str) -> None:
        self.errors.append(ConfigProblem(self.file, line, element, message))

    def warn(self, line: int | None, element: str, message: str) -> None:
        self.warnings.append(ConfigProblem(self.file, line, element, message))

    def raise_if_errors(self) -> None:
        if self.errors:
            raise_problems(self.errors)


def raise_problems(problems: list[ConfigProblem]) -> NoReturn:
    """Raise one :class:`ConfigFileError` listing ``problems`` in file order."""
    ordered = tuple(sorted(problems, key=lambda p: (p.file, p.line or 0)))
    count = len(ordered)
    header = f"{count} configuration problem{'s' if count != 1 else ''}:"
    raise ConfigFileError("\n".join([header, *(f"  {p}" for p in ordered)]), ordered)
