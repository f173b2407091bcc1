"""``artemis-py create DIR``: make a broker instance directory, like ``artemis create``.

The instance holds ``etc/broker.xml`` (every journal setting written out with its default,
so it can be tuned in place) and an empty ``data/``; ``artemis-py run DIR/etc/broker.xml``
resolves the data directories against DIR.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from string import Template
from xml.sax.saxutils import escape

from artemis_py.config import parse_config
from artemis_py.exceptions import ConfigError

USERS_FILE = "artemis-users.properties"

BROKER_XML = Template("""\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Created by `artemis-py create`. Artemis's broker.xml format: an Artemis user's
     configuration means the same thing here. Relative directories are resolved against
     this instance directory (the parent of etc/). -->
<configuration xmlns="urn:activemq" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <core xmlns="urn:activemq:core">
    <name>$name</name>

    <persistence-enabled>true</persistence-enabled>
    <security-enabled>$security</security-enabled>

    <!-- Storage. The values shown are the defaults. -->
    <journal-directory>data/journal</journal-directory>
    <bindings-directory>data/bindings</bindings-directory>
    <paging-directory>data/paging</paging-directory>
    <large-messages-directory>data/largemessages</large-messages-directory>
    <journal-file-size>10MiB</journal-file-size>
    <journal-min-files>2</journal-min-files>
    <journal-pool-files>-1</journal-pool-files>
    <journal-buffer-size>490KiB</journal-buffer-size>
    <journal-buffer-timeout>3333333</journal-buffer-timeout>
    <journal-datasync>true</journal-datasync>
    <journal-sync-transactional>true</journal-sync-transactional>
    <journal-sync-non-transactional>true</journal-sync-non-transactional>
    <journal-compact-min-files>10</journal-compact-min-files>
    <journal-compact-percentage>30</journal-compact-percentage>

    <acceptors>
      <!-- STOMP clients (stomp.py and others). /queue/NAME is anycast, /topic/NAME multicast. -->
      <acceptor name="stomp">tcp://$host:$port?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>
    </acceptors>

    <!-- Cluster links authenticate with these; change the password before clustering. -->
    <cluster-user>$cluster_user</cluster-user>
    <cluster-password>$cluster_password</cluster-password>

    <address-settings>
      <address-setting match="#">
        <dead-letter-address>DLQ</dead-letter-address>
        <expiry-address>ExpiryQueue</expiry-address>
        <max-delivery-attempts>10</max-delivery-attempts>
        <redistribution-delay>-1</redistribution-delay>
        <auto-create-queues>true</auto-create-queues>
        <auto-create-addresses>true</auto-create-addresses>
      </address-setting>
    </address-settings>

    <addresses>
      <address name="DLQ">
        <anycast><queue name="DLQ"/></anycast>
      </address>
      <address name="ExpiryQueue">
        <anycast><queue name="ExpiryQueue"/></anycast>
      </address>
    </addresses>
  </core>
</configuration>
""")


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "create",
        help="create a broker instance directory",
        description="Create DIR/etc/broker.xml and DIR/data/ for a new node.",
    )
    parser.add_argument(
        "directory", type=Path, help="the instance directory (DIR/etc/broker.xml, DIR/data/)"
    )
    parser.add_argument("--name", default=None, help="node name (default: the directory name)")
    parser.add_argument("--host", default="0.0.0.0", help="address the STOMP acceptor binds")
    parser.add_argument("--port", type=int, default=61613, help="STOMP port (default 61613)")
    parser.add_argument("--user", help="a user to create (turns security on)")
    parser.add_argument("--password", help="that user's password")
    parser.add_argument(
        "--cluster-user",
        default="ACTIVEMQ.CLUSTER.ADMIN.USER",
        help="the <cluster-user> to write (default: Artemis's, ACTIVEMQ.CLUSTER.ADMIN.USER)",
    )
    parser.add_argument(
        "--cluster-password",
        default="CHANGE ME!!",
        help="the <cluster-password> to write (default: Artemis's, 'CHANGE ME!!', with which "
        "a node refuses to cluster: give every node of a cluster the same new one)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing broker.xml")
    parser.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    directory: Path = args.directory
    etc = directory / "etc"
    broker_xml = etc / "broker.xml"
    if broker_xml.exists() and not args.force:
        print(f"artemis-py: {broker_xml} already exists (use --force)", file=sys.stderr)
        return 1
    if bool(args.user) != bool(args.password):
        print("artemis-py: --user and --password go together", file=sys.stderr)
        return 2
    text = BROKER_XML.substitute(
        name=escape(args.name or directory.resolve().name),
        host=escape(args.host),
        port=args.port,
        security="true" if args.user else "false",
        cluster_user=escape(args.cluster_user),
        cluster_password=escape(args.cluster_password),
    )
    try:
        parse_config(text, str(broker_xml))  # never write a file `run` would reject
    except ConfigError as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 2
    etc.mkdir(parents=True, exist_ok=True)
    (directory / "data").mkdir(exist_ok=True)
    broker_xml.write_text(text)
    if args.user:
        users = etc / USERS_FILE
        users.write_text(f"# user = password\n{args.user} = {args.password}\n")
        users.chmod(0o600)
    print(f"Created broker instance {directory}")
    print(f"  run it with: artemis-py run {broker_xml}")
    return 0
