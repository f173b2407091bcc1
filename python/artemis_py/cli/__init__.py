"""``artemis-py``: run a node, create an instance, send and receive from the command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from artemis_py import __version__
from artemis_py.cli import cert, cluster, create, data, management, mask, run, user


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="artemis-py",
        description="An Apache ActiveMQ Artemis-compatible broker node.",
    )
    parser.add_argument("--version", action="version", version=f"artemis-py {__version__}")
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        required=True,
        help="what to do ('artemis-py COMMAND --help' for its options)",
    )
    run.add_parser(commands)
    create.add_parser(commands)
    cert.add_parser(commands)
    cluster.add_parser(commands)
    data.add_parser(commands)
    mask.add_parser(commands)
    user.add_parser(commands)
    management.add_parsers(commands)
    try:
        from artemis_py.cli import clients
    except ImportError:  # pragma: no cover - the client commands are optional
        pass
    else:
        clients.add_parsers(commands)
        from artemis_py.cli import check, perf

        perf.add_parser(commands)
        check.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
