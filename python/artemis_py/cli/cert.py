"""``artemis-py cert create DIR``: a private certificate authority and the key stores of a
node or a cluster, for TLS acceptors, connectors and clients (docs/certificates.md).

Also the pieces ``artemis-py create --ssl`` shares: the default host names a certificate
names, generated passwords, and masking them for broker.xml.
"""

from __future__ import annotations

import argparse
import secrets
import socket
import sys
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from artemis_py.config.passwords import mask
from artemis_py.transport.certificates import (
    STORE_TYPES,
    CertificateStoreError,
    TlsFiles,
    create_tls_files,
)


def default_hosts(extra: Sequence[str] = ()) -> list[str]:
    """The names clients on this machine dial: ``extra`` (bind addresses other than the
    wildcard), localhost and its addresses, and this machine's names."""
    hosts: list[str] = []
    for host in (*extra, "localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn()):
        if host and host not in ("0.0.0.0", "::", "[::]") and host not in hosts:
            hosts.append(host)
    return hosts


def new_password() -> str:
    """A random store password that Artemis's default codec can mask (see :func:`protect`)."""
    while True:
        password = secrets.token_urlsafe(18)
        try:
            protect(password)
        except ValueError:
            continue  # the 1-in-512 value Artemis's codec cannot round-trip
        return password


def protect(password: str) -> str:
    """The password as broker.xml should hold it: ``ENC(...)``, masked with Artemis's default
    codec (so Apache Artemis reads the same file). Masking hides a password from a glance,
    it does not protect it: anyone with the file can unmask it."""
    return mask(password)


def url_value(value: str) -> str:
    """A value for a transport URL parameter: Artemis and artemis-py percent-decode them, so
    ``;``, ``&``, ``%`` and spaces in a path or password are encoded."""
    return quote(value, safe="/()-_.~:")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "cert",
        help="make certificates for TLS",
        description="Make a private certificate authority and TLS key stores.",
    )
    sub = parser.add_subparsers(
        dest="cert_command", metavar="COMMAND", required=True, help="what to do with certificates"
    )
    create = sub.add_parser(
        "create",
        help="a private CA, one key store per node, a client key store and a trust store",
        description="Write DIR/ca.pem, DIR/ca-key.pem (the CA key, encrypted), "
        "DIR/NODE-keystore.p12 for each --node, DIR/client-keystore.p12 and "
        "DIR/truststore.p12 (or .pem files with --type PEM). Every certificate names every "
        "--host. A DIR that already holds ca.pem and ca-key.pem keeps that CA (same "
        "--password), so certificates made later are trusted by the ones made before.",
    )
    create.add_argument("directory", type=Path, help="where to write the files")
    create.add_argument(
        "--node",
        action="append",
        default=None,
        metavar="NAME",
        help="a node to make a key store for (repeat for a cluster; default: one 'broker')",
    )
    create.add_argument(
        "--host",
        action="append",
        default=None,
        metavar="HOST",
        help="a host name or IP address the certificates name (repeat; default: localhost, "
        "127.0.0.1, ::1 and this machine's names)",
    )
    create.add_argument(
        "--password", default=None, help="the stores' password (default: a random one, printed)"
    )
    create.add_argument(
        "--type",
        dest="store_type",
        type=str.upper,
        choices=STORE_TYPES,
        default="PKCS12",
        help="store type (default PKCS12; PEM: encrypted key and certificates in one file)",
    )
    create.add_argument(
        "--days", type=int, default=825, help="certificate validity in days (default 825)"
    )
    create.set_defaults(func=create_command)


def create_command(args: argparse.Namespace) -> int:
    nodes: list[str] = args.node or ["broker"]
    hosts = args.host or default_hosts()
    password = args.password or new_password()
    if args.days < 1:
        print("artemis-py: --days must be at least 1", file=sys.stderr)
        return 2
    if len(set(nodes)) != len(nodes) or "client" in nodes:
        print("artemis-py: node names must be distinct and not 'client'", file=sys.stderr)
        return 2
    try:
        files = create_tls_files(
            args.directory, nodes, hosts, password, store_type=args.store_type, days=args.days
        )
    except CertificateStoreError as exc:
        print(f"artemis-py: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"artemis-py: cannot write {exc.filename or args.directory}: {exc.strerror}")
        return 1
    print(f"Created TLS files in {files.directory} for {', '.join(hosts)}")
    print_usage(files, password, shown_password=args.password is None)
    return 0


def print_usage(files: TlsFiles, password: str, *, shown_password: bool) -> None:
    """Where each file goes, as URL parameters."""
    if shown_password:
        print(f"  password of every store: {password}")
    value = url_value(protect(password))
    kind = f";keyStoreType={files.store_type}" if files.store_type != "PKCS12" else ""
    for node, path in files.keystores.items():
        print(f"  {node}: acceptor and connector parameters")
        print(
            f"    sslEnabled=true;keyStorePath={url_value(str(path.resolve()))};"
            f"keyStorePassword={value}{kind};"
            f"trustStorePath={url_value(str(files.truststore.resolve()))};"
            f"trustStorePassword={value}"
        )
    print(f"  clients: trust store {files.truststore} (or the CA certificate {files.ca})")
    print(f"           client key store {files.client_keystore} (for needClientAuth=true)")
