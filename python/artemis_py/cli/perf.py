"""``artemis-py perf``: the load generator (:mod:`artemis_py.perf`) on the command line."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_parser", "perf_command"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from artemis_py.perf.options import add_arguments

    parser = commands.add_parser(
        "perf",
        help="load-test STOMP brokers: throughput and latency percentiles",
        description="Run producers and consumers against one or more STOMP nodes for a "
        "fixed time, in one or more processes, and report throughput, send-to-receipt and "
        "end-to-end latency percentiles, per-node counts, errors and the generator's own "
        "CPU use (like Artemis's 'artemis perf client').",
    )
    add_arguments(parser)
    output = parser.add_argument_group("output")
    output.add_argument("--json", default=None, metavar="FILE", help="write the report as JSON")
    output.add_argument(
        "--plot",
        default=None,
        metavar="FILE.png",
        help="plot throughput over time and latency percentiles (needs matplotlib, in the "
        "'perf' extra)",
    )
    output.add_argument("--title", default=None, help="title of the plot")
    output.add_argument(
        "--quiet", action="store_true", help="no progress lines (the summary is still printed)"
    )
    parser.set_defaults(func=perf_command)


def perf_command(args: argparse.Namespace) -> int:
    """Exit code 0; 1 when the run had errors or lost messages; 2 for bad options."""
    from artemis_py.perf import INSTALL_EXTRA

    try:
        from artemis_py.perf import report as reports
    except ImportError as exc:  # hdrh is in the 'perf' (and 'test') extra, not a dependency
        missing = exc.name.split(".")[0] if exc.name else exc
        print(f"artemis-py perf: {missing} is missing: {INSTALL_EXTRA}", file=sys.stderr)
        return 2
    from artemis_py.perf.options import options_from_args
    from artemis_py.perf.runner import PerfError, run

    try:
        options = options_from_args(args)
        if args.plot:
            reports.check_plot_available()
    except (ValueError, reports.PlotUnavailable) as exc:
        print(f"artemis-py perf: {exc}", file=sys.stderr)
        return 2
    try:
        data = run(options, out=None if args.quiet else sys.stderr)
    except PerfError as exc:
        print(f"artemis-py perf: {exc}", file=sys.stderr)
        return 1
    report = reports.build_report(data)
    print(reports.format_summary(report))
    if args.json:
        reports.write_json(report, args.json)
    if args.plot:
        reports.plot(report, args.plot, title=args.title)
    ok = report["errors"]["count"] == 0 and report["totals"]["complete"]
    return 0 if ok else 1
