"""``artemis-py queue|address|connection ...``: a node's queues, addresses and connections
over its HTTP management API (docs/management.md, "Command line").

The commands and their options are Artemis's (``artemis queue stat``, ``queue create --name
--address --anycast --durable``, ``address delete --name --force``, ...) and so are the
messages (``Queue orders created successfully.``, ``Failed to delete queue X. Reason: ...``);
``--url``, ``--user`` and ``--password`` say which node and as whom, so they work on a node
of another machine as on the local one. ``--json`` prints the API's own JSON, for scripts.
Every failure is one line on stderr and an exit code (:mod:`.api_client`): 1 the node
refused, 2 bad options, 3 the node could not be reached.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import logging
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

from artemis_py.cli.api_client import (
    DEFAULT_URL,
    EXIT_USAGE,
    ApiError,
    ManagementClient,
)
from artemis_py.cli.management_output import (
    STAT_FIELDS,
    render_address,
    render_addresses,
    render_cluster,
    render_connections,
    render_queue,
    render_stat,
    select_queues,
)

__all__ = [
    "add_parsers",
    "client_from",
    "cluster_status",
    "connection_options",
    "run_api_command",
]

DEFAULT_MAX_ROWS: Final = 50
"""Artemis's ``queue stat --maxRows`` default."""
DEFAULT_MAX_COLUMN_SIZE: Final = 25
"""Artemis's ``queue stat --maxColumnSize`` default."""

Command = Callable[[ManagementClient, argparse.Namespace], Any]
"""Does the requests of one command and prints its text; returns the JSON for ``--json``."""


def add_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _queue_parsers(commands)
    _address_parsers(commands)
    _connection_parsers(commands)


# -- options ----------------------------------------------------------------------------------


def connection_options(parser: argparse.ArgumentParser, *, json_help: str | None = None) -> None:
    """``--url``, ``--instance``, ``--user``, ``--password`` and ``--json``."""
    parser.add_argument(
        "--url",
        help="the node's management API, http://HOST:PORT (default: the web binding of "
        f"--instance's bootstrap.xml, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--instance",
        type=Path,
        metavar="DIR",
        help="an instance directory, its etc/ or its broker.xml: --url defaults to the web "
        "binding of the bootstrap.xml beside its broker.xml",
    )
    parser.add_argument(
        "--user",
        help="a user of the node (artemis-users.properties) with the manage permission",
    )
    parser.add_argument(
        "--password",
        help="the user's password (asked for when --user is given without it on a terminal)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=json_help or "print the management API's JSON answer instead of text",
    )


def _leaf(
    group: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    command: Command,
    failure: Callable[[argparse.Namespace], str],
    description: str | None = None,
) -> argparse.ArgumentParser:
    parser = group.add_parser(name, help=text, description=description or text)
    connection_options(parser)
    parser.set_defaults(func=run_api_command(command, failure))
    return parser


def _command_group(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    text: str,
    description: str,
    commands_text: str,
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """``artemis-py NAME COMMAND``: the parser of NAME, whose COMMANDs the caller adds."""
    parser = commands.add_parser(name, help=text, description=description)
    return parser.add_subparsers(
        dest=f"{name}_command", metavar="COMMAND", required=True, help=commands_text
    )


def _name_argument(parser: argparse.ArgumentParser, what: str, required: bool = True) -> None:
    parser.add_argument("--name", required=required, help=f"the {what}'s name")


# -- running a command ------------------------------------------------------------------------


def client_from(args: argparse.Namespace) -> ManagementClient:
    """The client the options describe (ValueError for a bad ``--url`` or ``--instance``)."""
    instance = getattr(args, "instance", None)
    url = args.url or (_instance_url(instance) if instance else DEFAULT_URL)
    password = args.password
    if args.user is not None and password is None and sys.stdin.isatty():
        password = getpass.getpass(f"password for {args.user}: ")
    return ManagementClient(url, args.user, password)


def _instance_url(instance: Path) -> str:
    """The web binding of the bootstrap.xml beside an instance's broker.xml."""
    from artemis_py.cli.user import etc_directory
    from artemis_py.exceptions import ConfigError
    from artemis_py.management.bootstrap import BOOTSTRAP_FILE, read_bootstrap

    path = etc_directory(instance) / BOOTSTRAP_FILE
    if not path.is_file():
        raise ValueError(f"--instance {instance}: no {path} (give --url)")
    # The node warns about the settings it does not use when it starts; not the commands.
    logger = logging.getLogger("artemis_py.management")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        web = read_bootstrap(path)
    except ConfigError as exc:
        raise ValueError(str(exc).splitlines()[0]) from None
    finally:
        logger.setLevel(level)
    if web is None:
        raise ValueError(f"--instance {instance}: {path} has no <web> binding (give --url)")
    return web.uri


def run_api_command(
    command: Command, failure: Callable[[argparse.Namespace], str]
) -> Callable[[argparse.Namespace], int]:
    """``command`` as an argparse ``func``: errors become one line and an exit code.

    ``failure`` names what was being done (``delete queue X``) for the API's refusals, as
    Artemis words them: ``Failed to delete queue X. Reason: ...``.
    """

    def run(args: argparse.Namespace) -> int:
        try:
            client = client_from(args)
            answer = command(client, args)
        except ValueError as exc:
            print(f"artemis-py: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except ApiError as exc:
            if exc.is_operation_error:
                print(f"Failed to {failure(args)}. Reason: {exc}", file=sys.stderr)
            else:
                print(f"artemis-py: {exc}", file=sys.stderr)
            return exc.exit_code
        if args.json:
            print(json.dumps(answer, indent=2))
        return 0

    return run


def _path(*parts: str) -> str:
    """``/api/queues/<name>``: names may hold ``/``, ``#`` or spaces (FQQNs, wildcards)."""
    return "/api/" + "/".join(quote(p, safe="") for p in parts)


@contextlib.contextmanager
def _option_named(option: str) -> Iterator[None]:
    """The API's refusals name its ``?force=true``; the command's user has ``option``."""
    try:
        yield
    except ApiError as exc:
        if "?force=true" not in str(exc):
            raise
        text = str(exc).replace("?force=true", option)
        raise ApiError(text, status=exc.status, exit_code=exc.exit_code) from None


def _say(args: argparse.Namespace, text: str) -> None:
    if not args.json:
        print(text)


def _delete(
    client: ManagementClient, args: argparse.Namespace, kind: str, force: bool, option: str
) -> Any:
    """Delete the queue or address ``--name`` (``kind``: ``queues``, ``addresses``);
    ``force`` (the command's ``option``) deletes what the API refuses without it."""
    query = {"force": "true"} if force else {}
    with _option_named(option):
        answer = client.delete(_path(kind, args.name), **query)
    noun = {"queues": "Queue", "addresses": "Address"}[kind]
    _say(args, f"{noun} {args.name} deleted successfully.")
    return answer


# -- queue ------------------------------------------------------------------------------------


def _queue_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = _command_group(
        commands,
        "queue",
        "queue stat, show, create, delete, purge (over the management API)",
        "Show and change a node's queues through its HTTP management API, "
        "as Artemis's 'artemis queue' does.",
        "stat, show, create, delete, purge",
    )
    _queue_stat_parser(group)
    show = _leaf(
        group,
        "show",
        "show one queue's counts and kind",
        _queue_show,
        lambda args: f"show queue {args.name}",
        "Print every count and setting of one queue: its messages (delivering, scheduled, "
        "paged), what happened to them (added, acknowledged, expired, killed, replaced by a "
        "newer last value) and its kind (exclusive, non-destructive, last-value key, "
        "message groups with an owner). Not in Artemis's CLI, whose 'queue stat' has the "
        "counts only.",
    )
    _name_argument(show, "queue")
    _queue_create_parser(group)
    delete = _leaf(
        group, "delete", "delete a queue", _queue_delete, lambda a: f"delete queue {a.name}"
    )
    _name_argument(delete, "queue")
    delete.add_argument(
        "--removeConsumers",
        "--remove-consumers",
        dest="remove_consumers",
        action="store_true",
        help="delete it even if it has consumers (they are closed); without it a queue "
        "with consumers is refused",
    )
    purge = _leaf(
        group,
        "purge",
        "delete every message of a queue",
        _queue_purge,
        lambda args: f"purge queue {args.name}",
    )
    _name_argument(purge, "queue")


def _queue_stat_parser(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stat = _leaf(
        group,
        "stat",
        "print the queues' counts as a table",
        _queue_stat,
        lambda args: "get stats for queues",
        "Print a table of the queues: CONSUMER_COUNT (consumers), MESSAGE_COUNT (messages "
        "on the queue, in delivery included), MESSAGES_ADDED (added since the node "
        "started), DELIVERING_COUNT (delivered, not yet acknowledged), MESSAGES_ACKED "
        "(acknowledged), SCHEDULED_COUNT (held until their delivery time, counted in "
        "MESSAGE_COUNT too), ROUTING_TYPE and INTERNAL. Filter with --queueName X (names containing X) or with --field, "
        "--operation and --value.",
    )
    stat.add_argument(
        "--queueName",
        dest="queue_name",
        metavar="TEXT",
        help="only queues whose name contains this text",
    )
    stat.add_argument(
        "--field",
        help="the field to filter on: " + ", ".join(title for title, _ in STAT_FIELDS),
    )
    stat.add_argument(
        "--operation",
        help="how to compare: CONTAINS, NOT_CONTAINS, EQUALS, GREATER_THAN, LESS_THAN",
    )
    stat.add_argument("--value", help="the value to compare the --field with")
    stat.add_argument(
        "--maxRows",
        dest="max_rows",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_ROWS,
        help=f"show at most this many queues (default {DEFAULT_MAX_ROWS})",
    )
    stat.add_argument(
        "--maxColumnSize",
        dest="max_column_size",
        metavar="N",
        type=int,
        default=DEFAULT_MAX_COLUMN_SIZE,
        help=f"cut longer values to this width, -1: no limit (default {DEFAULT_MAX_COLUMN_SIZE})",
    )


def _queue_create_parser(group: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    create = _leaf(
        group,
        "create",
        "create a queue",
        _queue_create,
        lambda args: f"create queue {args.name}",
    )
    _name_argument(create, "queue")
    create.add_argument("--address", help="the queue's address (default: the queue's name)")
    routing = create.add_mutually_exclusive_group()
    routing.add_argument(
        "--anycast",
        dest="routing_type",
        action="store_const",
        const="ANYCAST",
        help="an anycast queue (the default): each message to one consumer",
    )
    routing.add_argument(
        "--multicast",
        dest="routing_type",
        action="store_const",
        const="MULTICAST",
        help="a multicast queue: a subscription of the address",
    )
    create.add_argument(
        "--durable",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether the queue survives a restart (default: durable)",
    )
    create.add_argument("--filter", help="the queue's filter (a selector), default none")
    create.add_argument(
        "--max-consumers",
        "--maxConsumers",
        dest="max_consumers",
        type=int,
        default=-1,
        help="the most consumers at once, -1: no limit (the default)",
    )


def _queue_stat(client: ManagementClient, args: argparse.Namespace) -> Any:
    queues = client.get(_path("queues"))
    shown, total = select_queues(
        queues,
        queue_name=args.queue_name,
        field=args.field,
        operation=args.operation,
        value=args.value,
        max_rows=args.max_rows,
    )
    if not args.json:
        print(render_stat(shown, args.max_column_size))
        if total > len(shown):
            print(
                f"WARNING: the displayed queues are {len(shown)}/{total}, set --maxRows to "
                "display more queues."
            )
    return shown


def _queue_show(client: ManagementClient, args: argparse.Namespace) -> Any:
    queue = client.get(_path("queues", args.name))
    _say(args, render_queue(queue))
    return queue


def _queue_create(client: ManagementClient, args: argparse.Namespace) -> Any:
    queue = client.post(
        _path("queues"),
        {
            "name": args.name,
            "address": args.address or args.name,
            "routing_type": args.routing_type or "ANYCAST",
            "durable": args.durable,
            "filter": args.filter,
            "max_consumers": args.max_consumers,
        },
    )
    _say(args, f"Queue {args.name} created successfully.")
    return queue


def _queue_delete(client: ManagementClient, args: argparse.Namespace) -> Any:
    return _delete(client, args, "queues", args.remove_consumers, "--removeConsumers")


def _queue_purge(client: ManagementClient, args: argparse.Namespace) -> Any:
    answer = client.post(_path("queues", args.name, "purge"))
    removed = answer.get("removed") if isinstance(answer, dict) else None
    noun = "message" if removed == 1 else "messages"
    _say(args, f"Queue {args.name} purged successfully: {removed} {noun} removed.")
    return answer


# -- address ----------------------------------------------------------------------------------


def _address_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = _command_group(
        commands,
        "address",
        "address show, create, delete (over the management API)",
        "Show and change a node's addresses through its HTTP management API, "
        "as Artemis's 'artemis address' does.",
        "show, create, delete",
    )
    show = _leaf(
        group,
        "show",
        "list the addresses, or show one",
        _address_show,
        lambda args: f"show address {args.name}" if args.name else "show addresses",
    )
    show.add_argument("--name", help="the address to show (default: a table of every address)")

    create = _leaf(
        group,
        "create",
        "create an address",
        _address_create,
        lambda args: f"create address {args.name}",
    )
    _name_argument(create, "address")
    create.add_argument(
        "--anycast",
        action="store_true",
        help="it routes anycast (the default when neither is given)",
    )
    create.add_argument("--multicast", action="store_true", help="it routes multicast")

    delete = _leaf(
        group,
        "delete",
        "delete an address",
        _address_delete,
        lambda args: f"delete address {args.name}",
    )
    _name_argument(delete, "address")
    delete.add_argument(
        "--force",
        action="store_true",
        help="delete its queues with it; without it an address with queues is refused",
    )


def _address_show(client: ManagementClient, args: argparse.Namespace) -> Any:
    if args.name:
        address = client.get(_path("addresses", args.name))
        _say(args, render_address(address))
        return address
    addresses = client.get(_path("addresses"))
    _say(args, render_addresses(addresses))
    return addresses


def _address_create(client: ManagementClient, args: argparse.Namespace) -> Any:
    types = [t for t, on in (("ANYCAST", args.anycast), ("MULTICAST", args.multicast)) if on]
    address = client.post(
        _path("addresses"), {"name": args.name, "routing_types": types or ["ANYCAST"]}
    )
    _say(args, f"Address {args.name} created successfully.")
    return address


def _address_delete(client: ManagementClient, args: argparse.Namespace) -> Any:
    return _delete(client, args, "addresses", args.force, "--force")


# -- connection -------------------------------------------------------------------------------


def _connection_parsers(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = _command_group(
        commands,
        "connection",
        "connection list, close (over the management API)",
        "Show a node's client connections through its HTTP management API, or close one.",
        "list or close",
    )
    _leaf(
        group,
        "list",
        "list the client connections",
        _connection_list,
        lambda args: "list connections",
    )
    close = _leaf(
        group,
        "close",
        "close a client connection",
        _connection_close,
        lambda args: f"close connection {args.id}",
    )
    close.add_argument("--id", required=True, help="the connection's ID (see connection list)")


def _connection_list(client: ManagementClient, args: argparse.Namespace) -> Any:
    connections = client.get(_path("connections"))
    _say(args, render_connections(connections))
    return connections


def _connection_close(client: ManagementClient, args: argparse.Namespace) -> Any:
    answer = client.delete(_path("connections", args.id))
    _say(args, f"Connection {args.id} closed.")
    return answer


# -- cluster status over the management API ---------------------------------------------------


def _cluster_show(client: ManagementClient, args: argparse.Namespace) -> Any:
    cluster = client.get(_path("cluster"))
    _say(args, render_cluster(cluster))
    return cluster


def cluster_status(args: argparse.Namespace) -> int:
    """``cluster status --url http://HOST:PORT``: the cluster as the node's management API
    shows it (``/api/cluster``), with ``--user``/``--password`` a user with manage."""
    return run_api_command(_cluster_show, lambda args: "get the cluster status")(args)
