"""Reading broker.xml into a :class:`~.model.BrokerConfig`: the public entry points.

Theory of operation
-------------------
1. :func:`~.xmlreader.read_xml` builds a line-numbered tree (malformed XML stops here, with
   expat's line and column).
2. :func:`~.readers.read_document` walks the tree top-down with an
   :class:`~.element_reader.ElementReader`, one section reader (:mod:`.readers`) per part of
   the file. At every element the children are checked against the vocabulary of that element
   (:mod:`.vocabulary`): implemented names are read, valid but unimplemented Artemis names are
   collected for one summary warning, anything else is an error with a did-you-mean
   suggestion. Settings that are read into the model but not acted upon yet (for example
   ``ADDRESS_SETTINGS_NOT_IMPLEMENTED`` in :mod:`.address_settings`) join that summary when
   set to anything but their default. Values are ``${...}``-substituted and converted only
   when read (an unset variable inside an ignored element is no error).
3. Every problem is recorded and reading goes on (a bad value is replaced by its default so
   later checks still run); cross-references (connector-ref, discovery-group-ref, ...) are
   checked once the sections they refer to are read.
4. If anything was an error, one :class:`~.problems.ConfigFileError` lists all of them;
   otherwise the warnings are logged on ``artemis_py.config`` and kept in
   ``BrokerConfig.warnings``.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Mapping

from . import defaults
from .element_reader import ElementReader
from .model import BrokerConfig
from .problems import ConfigProblem, raise_problems
from .readers import read_document
from .xmlreader import XmlSyntaxError, read_xml

__all__ = ["default_config", "load_config", "parse_config"]

logger = logging.getLogger("artemis_py.config")


def parse_config(
    text: str | bytes, filename: str = "<string>", *, environ: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Parse broker.xml content. ``filename`` is only used in messages.

    ``environ`` supplies ``${name}`` values (default: ``os.environ``). Raises
    :class:`~artemis_py.exceptions.ConfigError` (a :class:`~.problems.ConfigFileError` with
    ``.problems``) listing every problem found.
    """
    try:
        root = read_xml(text)
    except XmlSyntaxError as exc:
        raise_problems(
            [
                ConfigProblem(
                    filename, exc.line, "", f"malformed XML: {exc.message} (column {exc.column})"
                )
            ]
        )
    reader = ElementReader(filename, os.environ if environ is None else environ)
    config = read_document(reader, root)
    reader.problems.raise_if_errors()
    warnings = list(reader.problems.warnings)
    summary = reader.unimplemented_warning()
    if summary is not None:
        warnings.append(summary)
    warnings.sort(key=lambda p: p.line or 0)
    for warning in warnings:
        logger.warning("%s", warning)
    return dataclasses.replace(config, warnings=tuple(warnings), source=filename)


def load_config(
    path: str | os.PathLike[str], *, environ: Mapping[str, str] | None = None
) -> BrokerConfig:
    """Read and parse a broker.xml file (see :func:`parse_config`).

    A missing or unreadable file is a :class:`~artemis_py.exceptions.ConfigError` naming the path.
    """
    filename = os.fspath(path)
    try:
        with open(filename, "rb") as f:
            data = f.read()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise_problems(
            [ConfigProblem(filename, None, "", f"cannot read the configuration file: {reason}")]
        )
    return parse_config(data, filename, environ=environ)


def default_config() -> BrokerConfig:
    """The embedded default: one node, a STOMP acceptor on ``0.0.0.0:61613``, data under
    ``./data``, persistence on, security off; Artemis defaults for everything else."""
    return parse_config(defaults.DEFAULT_BROKER_XML, "<default broker.xml>", environ={})
