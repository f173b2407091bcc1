"""``artemis-py user add|list|rm|reset``: the users and roles files of an instance.

Like Artemis's ``artemis user`` (whose PropertiesLoginModuleConfigurator edits the same files)
with its option names, but on the files directly: ``artemis-users.properties``
(``user = ENC(hash)``, hashed one-way by default, ``--plaintext`` to store it as typed) and
``artemis-roles.properties`` (``role = user1,user2``), beside the instance's broker.xml. A
running node reads the users file again when it changes. Every other line, comments included,
is kept; a file is replaced whole (written aside, then renamed), so a node never reads half of
one.
"""

from __future__ import annotations

import argparse
import getpass
import os
import re
import sys
import tempfile
from pathlib import Path

from artemis_py.broker.authentication import ROLES_FILE, USERS_FILE, parse_line, read_properties
from artemis_py.config import passwords

# A name that would change meaning in a properties file or a role list.
_FORBIDDEN = set("=:,#!\\") | {" ", "\t", "\r", "\n"}


class UserError(Exception):
    """A refused command, reported as Artemis reports it (``Failed to ... Reason: ...``)."""


def etc_directory(instance: Path) -> Path:
    """Where the files are: beside a broker.xml, in an instance's ``etc/``, or ``instance``."""
    if instance.is_file():
        return instance.parent
    if (instance / "etc" / "broker.xml").is_file():
        return instance / "etc"
    return instance


def _check_name(name: str, what: str) -> None:
    if not name or name[0] in "#!" or _FORBIDDEN & set(name):
        raise UserError(
            f"{what} '{name}' cannot be written to a properties file: no spaces, "
            "'=', ':', ',' or '\\', and it cannot start with '#' or '!'"
        )


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.is_file() else []


def write_atomically(path: Path, lines: list[str]) -> None:
    """Replace ``path`` with ``lines``: written aside and renamed, keeping its permissions."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write("".join(f"{line}\n" for line in lines))
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        os.unlink(temp)
        raise


def _find(lines: list[str], key: str) -> int | None:
    for index, line in enumerate(lines):
        parsed = parse_line(line)
        if parsed is not None and parsed[0] == key:
            return index
    return None


def _roles_of(roles_lines: list[str], user: str) -> list[str]:
    roles = []
    for line in roles_lines:
        parsed = parse_line(line)
        if parsed and user in (u.strip() for u in parsed[1].split(",")):
            roles.append(parsed[0])
    return roles


def _without_user(roles_lines: list[str], user: str) -> list[str]:
    """The roles file with ``user`` taken out of every role (a role left empty goes)."""
    kept = []
    for line in roles_lines:
        parsed = parse_line(line)
        members = [u.strip() for u in parsed[1].split(",")] if parsed else []
        if parsed is None or user not in members:
            kept.append(line)
            continue
        rest = [u for u in members if u and u != user]
        if rest:
            kept.append(f"{parsed[0]} = {','.join(rest)}")
    return kept


def _with_roles(roles_lines: list[str], user: str, roles: list[str]) -> list[str]:
    lines = list(roles_lines)
    for role in roles:
        index = _find(lines, role)
        if index is None:
            lines.append(f"{role} = {user}")
            continue
        _, value = parse_line(lines[index]) or ("", "")
        members = [u.strip() for u in value.split(",") if u.strip()]
        if user not in members:
            lines[index] = f"{role} = {','.join([*members, user])}"
    return lines


def _stored(password: str, plaintext: bool) -> str:
    return password if plaintext else passwords.hash_password(password)


def _roles(text: str | None) -> list[str]:
    roles = [r.strip() for r in (text or "").split(",") if r.strip()]
    for role in roles:
        _check_name(role, "role")
    return roles


def add(etc: Path, user: str, password: str, roles: list[str], plaintext: bool) -> None:
    _check_name(user, "user name")
    users_path, roles_path = etc / USERS_FILE, etc / ROLES_FILE
    users = _lines(users_path)
    if _find(users, user) is not None:
        raise UserError(f"user {user} already exists in {users_path}")
    write_atomically(users_path, [*users, f"{user} = {_stored(password, plaintext)}"])
    if roles:
        write_atomically(roles_path, _with_roles(_lines(roles_path), user, roles))


def remove(etc: Path, user: str) -> None:
    users_path, roles_path = etc / USERS_FILE, etc / ROLES_FILE
    users = _lines(users_path)
    index = _find(users, user)
    if index is None:
        raise UserError(f"user {user} does not exist in {users_path}")
    write_atomically(users_path, users[:index] + users[index + 1 :])
    roles = _lines(roles_path)
    if _roles_of(roles, user):
        write_atomically(roles_path, _without_user(roles, user))


def reset(etc: Path, user: str, password: str | None, roles: list[str], plaintext: bool) -> None:
    """A new password and/or new roles (the old roles stay when none are given)."""
    users_path, roles_path = etc / USERS_FILE, etc / ROLES_FILE
    users = _lines(users_path)
    index = _find(users, user)
    if index is None:
        raise UserError(f"user {user} does not exist in {users_path}")
    if password is not None:
        users[index] = f"{user} = {_stored(password, plaintext)}"
        write_atomically(users_path, users)
    if roles:
        lines = _without_user(_lines(roles_path), user)
        write_atomically(roles_path, _with_roles(lines, user, roles))


def listing(etc: Path, user: str | None) -> list[str]:
    """Artemis's ``artemis user list`` output: ``"user"(role1,role2)`` lines and a total."""
    users_path = etc / USERS_FILE
    names = [e.key for e in read_properties(users_path)] if users_path.is_file() else []
    if user:
        names = [n for n in names if n == user]
    roles = _lines(etc / ROLES_FILE)
    out = ['--- "user"(roles) ---']
    out += [f'"{name}"({",".join(_roles_of(roles, name))})' for name in names]
    return [*out, "", f" Total: {len(names)}"]


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "user",
        help="add, list, remove or reset users (artemis-users/roles.properties)",
        description="Edit the users and roles files beside an instance's broker.xml, as "
        "Artemis's 'artemis user' does. Passwords are stored hashed (ENC(...)) unless "
        "--plaintext; a running node picks the change up within a second.",
    )
    actions = parser.add_subparsers(
        dest="action", metavar="ACTION", required=True, help="add, list, rm or reset"
    )
    for name, text in (
        ("add", "add a user"),
        ("list", "list users and their roles"),
        ("rm", "remove a user"),
        ("reset", "change a user's password and/or roles"),
    ):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument(
            "--instance",
            type=Path,
            default=Path("."),
            help="the instance directory (its etc/), an etc directory or a broker.xml "
            "(default: the current directory)",
        )
        sub.add_argument(
            "-u",
            "--user-command-user",
            dest="name",
            required=name != "list",
            help="the user name" + (" (default: every user)" if name == "list" else ""),
        )
        if name in ("add", "reset"):
            sub.add_argument(
                "-p",
                "--user-command-password",
                dest="password",
                help="the password (default: asked for"
                + (", or unchanged" if name == "reset" else "")
                + ")",
            )
            sub.add_argument(
                "-r", "--role", help="the user's roles, separated by commas (e.g. amq,admin)"
            )
            sub.add_argument(
                "--plaintext",
                action="store_true",
                help="store the password as typed instead of hashed (as Artemis's --plaintext)",
            )
        sub.set_defaults(func=_run, action=name)


def _run(args: argparse.Namespace) -> int:
    etc = etc_directory(args.instance)
    if not etc.is_dir():
        print(f"artemis-py: no such directory: {etc}", file=sys.stderr)
        return 2
    what = {"add": "add", "rm": "remove", "reset": "reset", "list": "list"}[args.action]
    try:
        if args.action == "list":
            print("\n".join(listing(etc, args.name)))
            return 0
        password: str | None = getattr(args, "password", None)
        if args.action == "add":
            if password is None:
                password = getpass.getpass(f"password for {args.name}: ")
            add(etc, args.name, password, _roles(args.role), args.plaintext)
        elif args.action == "rm":
            remove(etc, args.name)
        else:
            if password is None and not args.role:
                password = getpass.getpass(f"new password for {args.name}: ")
            reset(etc, args.name, password, _roles(args.role), args.plaintext)
    except (UserError, OSError, UnicodeDecodeError) as exc:
        print(f"Failed to {what} user {args.name}. Reason: {exc}", file=sys.stderr)
        return 1
    done = {"add": "added", "rm": "removed", "reset": "reset"}[args.action]
    print(f"{args.name} {done} successfully.")
    _warn_if_security_disabled(etc)
    return 0


def _warn_if_security_disabled(etc: Path) -> None:
    # A look at the text, not a parse: parsing would open key stores and log its warnings.
    broker_xml = etc / "broker.xml"
    try:
        text = broker_xml.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return
    if re.search(r"<security-enabled>\s*false\s*</security-enabled>", text):
        print(
            f"note: {broker_xml} has <security-enabled>false</security-enabled>: every "
            "connection is accepted until it is true",
            file=sys.stderr,
        )
