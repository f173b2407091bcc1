"""``artemis-py mask``: a password masked or hashed as Artemis's ``artemis mask`` does.

Without ``--hash`` the value is masked two-way (Blowfish, Artemis's default codec) for
broker.xml passwords the node must send itself: ``<cluster-password>``, key and trust store
passwords. With ``--hash`` it is hashed one-way (PBKDF2) for ``artemis-users.properties``.
Either way the printed ``ENC(...)`` is pasted as it is (:mod:`artemis_py.config.passwords`).
"""

from __future__ import annotations

import argparse
import sys

from artemis_py.config import passwords


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "mask",
        help="mask a password for broker.xml, or hash one for artemis-users.properties",
        description="Print PASSWORD as ENC(...), masked with Apache Artemis's default codec "
        "(Blowfish; broker.xml's <cluster-password> and key store passwords) or, with --hash, "
        "hashed one-way (PBKDF2; artemis-users.properties). Artemis reads both unchanged.",
    )
    parser.add_argument("password", help="the password to mask")
    parser.add_argument(
        "--hash", action="store_true", help="hash it one-way (for artemis-users.properties)"
    )
    parser.add_argument(
        "--key",
        help="the Blowfish key to mask with (default: $"
        f"{passwords.KEY_ENVIRONMENT}, else Artemis's 'clusterpassword'); a node then needs "
        f"<password-codec>{passwords.DEFAULT_CODEC_CLASS};key=KEY</password-codec>",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.hash and args.key is not None:
        print("artemis-py mask: --key is for masking; a hash takes no key", file=sys.stderr)
        return 2
    try:
        value = (
            passwords.hash_password(args.password)
            if args.hash
            else passwords.mask(args.password, args.key)
        )
    except ValueError as exc:
        print(f"artemis-py mask: {exc}", file=sys.stderr)
        return 1
    print(value)
    return 0
