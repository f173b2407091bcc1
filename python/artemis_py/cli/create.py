"""``artemis-py create DIR``: make a broker instance directory, like ``artemis create``.

The instance holds ``etc/broker.xml`` (every journal setting written out with its default,
so it can be tuned in place) and an empty ``data/``; ``artemis-py run DIR/etc/broker.xml``
resolves the data directories against DIR.

``--ssl`` makes the acceptor a TLS one: a private CA, the node's key store, a client key store
and trust stores are written into ``etc/`` (:mod:`artemis_py.transport.certificates`), the
acceptor names the key store with a random password masked as Artemis masks it, and the
command a client runs is printed (docs/certificates.md).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template
from xml.sax.saxutils import escape

from cryptography.hazmat.primitives import serialization

from artemis_py.cli.cert import default_hosts, new_password, protect, url_value
from artemis_py.config import parse_config
from artemis_py.config.passwords import hash_password
from artemis_py.exceptions import ConfigError
from artemis_py.transport.certificates import (
    generate_ca,
    issue_certificate,
    write_keystore,
    write_truststore,
)

USERS_FILE = "artemis-users.properties"
BOOTSTRAP_XML = Template("""\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Created by `artemis-py create`: the management web server (JSON API at /api/, metrics
     at /metrics, console at /console), as Artemis's bootstrap.xml configures its own.
     Remove the <web> element to turn it off (or run with the web option set to off:
     docs/management.md). -->
<broker xmlns="http://activemq.apache.org/schema">
  <web path="web">
    <binding name="artemis" uri="http://$host:$port"/>
  </web>
</broker>
""")
ROLES_FILE = "artemis-roles.properties"

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
      <acceptor name="stomp">tcp://$host:$port?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/$tls</acceptor>
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

    <!-- Who may do what (with security-enabled true): every permission on every address to
         role $role; users get roles in artemis-roles.properties beside this file. -->
    <security-settings>
      <security-setting match="#">
        <permission type="createNonDurableQueue" roles="$role"/>
        <permission type="deleteNonDurableQueue" roles="$role"/>
        <permission type="createDurableQueue" roles="$role"/>
        <permission type="deleteDurableQueue" roles="$role"/>
        <permission type="createAddress" roles="$role"/>
        <permission type="deleteAddress" roles="$role"/>
        <permission type="consume" roles="$role"/>
        <permission type="browse" roles="$role"/>
        <permission type="send" roles="$role"/>
        <permission type="manage" roles="$role"/>
      </security-setting>
    </security-settings>

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


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    parser.add_argument(
        "--http-host",
        default="localhost",
        help="address the management web server binds (default localhost; bootstrap.xml)",
    )
    parser.add_argument(
        "--http-port", type=int, default=8161, help="management web server port (default 8161)"
    )
    parser.add_argument("--user", help="a user to create (turns security on)")
    parser.add_argument("--password", help="that user's password")
    parser.add_argument(
        "--role",
        default="amq",
        help="the role the user gets, granted every permission on every address (default amq)",
    )
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
    tls = parser.add_argument_group("TLS")
    tls.add_argument(
        "--ssl",
        action="store_true",
        help="serve STOMP over TLS: make a private CA, the node's key store and a client "
        "trust store in DIR/etc/ and print the client command",
    )
    tls.add_argument(
        "--ssl-host",
        action="append",
        default=[],
        metavar="HOST",
        help="another host name or address the node's certificate names (repeat; it always "
        "names --host, localhost, 127.0.0.1, ::1 and this machine's names)",
    )
    tls.add_argument(
        "--ssl-client-auth",
        action="store_true",
        help="require client certificates (needClientAuth=true; clients use "
        "etc/client-keystore.p12)",
    )
    parser.set_defaults(func=command)


@dataclass(frozen=True)
class TlsSetup:
    """What --ssl wrote, and the acceptor URL parameters naming it."""

    acceptor_params: str
    truststore: Path
    ca: Path
    client_keystore: Path
    client_password: str


def write_tls_files(etc: Path, name: str, hosts: list[str], client_auth: bool) -> TlsSetup:
    """A CA, the node's key store (its own password, masked in broker.xml) and, for clients,
    a trust store and a key store under a second password that may be shown to them."""
    node_password, client_password = new_password(), new_password()
    ca_key, ca_cert = generate_ca(f"artemis-py CA of {name}")
    key, cert = issue_certificate(ca_key, ca_cert, name, hosts)
    keystore, truststore = etc / "keystore.p12", etc / "truststore.p12"
    write_keystore(keystore, key, cert, node_password, chain=[ca_cert])
    # The CA key stays, encrypted, so that `artemis-py cert create etc --password ...` can
    # issue certificates it trusts; the node's own password protects it.
    write_keystore(etc / "ca-key.pem", ca_key, ca_cert, node_password, store_type="PEM")
    (etc / "ca.pem").write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    write_truststore(truststore, [ca_cert], client_password)
    client_key, client_cert = issue_certificate(ca_key, ca_cert, "client", hosts)
    client_keystore = etc / "client-keystore.p12"
    write_keystore(client_keystore, client_key, client_cert, client_password, chain=[ca_cert])
    params = (
        f";sslEnabled=true;keyStorePath={url_value(str(keystore.resolve()))}"
        f";keyStorePassword={url_value(protect(node_password))}"
    )
    if client_auth:
        params += (
            f";needClientAuth=true;trustStorePath={url_value(str(truststore.resolve()))}"
            f";trustStorePassword={url_value(protect(client_password))}"
        )
    return TlsSetup(params, truststore, etc / "ca.pem", client_keystore, client_password)


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
    name = args.name or directory.resolve().name
    tls = None
    if args.ssl:
        etc.mkdir(parents=True, exist_ok=True)
        hosts = default_hosts([args.host, *args.ssl_host])
        tls = write_tls_files(etc, name, hosts, args.ssl_client_auth)
    text = BROKER_XML.substitute(
        name=escape(name),
        host=escape(args.host),
        port=args.port,
        security="true" if args.user else "false",
        cluster_user=escape(args.cluster_user),
        cluster_password=escape(args.cluster_password),
        tls=escape(tls.acceptor_params) if tls else "",
        role=escape(args.role, {'"': "&quot;"}),
    )
    try:
        parse_config(text, str(broker_xml))  # never write a file `run` would reject
    except ConfigError as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 2
    etc.mkdir(parents=True, exist_ok=True)
    (directory / "data").mkdir(exist_ok=True)
    broker_xml.write_text(text)
    (etc / "bootstrap.xml").write_text(
        BOOTSTRAP_XML.substitute(host=escape(args.http_host), port=args.http_port)
    )
    if args.user:
        users = etc / USERS_FILE
        # Hashed as `artemis create` writes it (`artemis-py user add --plaintext` to differ).
        hashed = hash_password(args.password)
        users.write_text(f"# user = password (ENC: hashed)\n{args.user} = {hashed}\n")
        users.chmod(0o600)
        (etc / ROLES_FILE).write_text(f"# role = user1,user2\n{args.role} = {args.user}\n")
    print(f"Created broker instance {directory}")
    print(f"  run it with: artemis-py run {broker_xml}")
    print(f"  management API and console: http://{args.http_host}:{args.http_port}/console")
    if tls is not None:
        _print_tls_usage(tls, args)
    return 0


def _print_tls_usage(tls: TlsSetup, args: argparse.Namespace) -> None:
    host = "localhost" if args.host in ("0.0.0.0", "::", "[::]") else args.host
    url = f"tcp://{host}:{args.port}?sslEnabled=true&trustStorePath={url_value(str(tls.ca.resolve()))}"
    if args.ssl_client_auth:
        url += (
            f"&keyStorePath={url_value(str(tls.client_keystore.resolve()))}"
            f"&keyStorePassword={url_value(tls.client_password)}"
        )
    print("  its STOMP acceptor serves TLS only; receive with:")
    print(f"    artemis-py consumer --url '{url}'")
    print(
        f"  other clients trust {tls.ca} (PEM) or {tls.truststore} (PKCS12, password "
        f"{tls.client_password})"
    )
    if args.ssl_client_auth:
        print(f"  and present {tls.client_keystore} (PKCS12, the same password)")
