"""A small client of a node's HTTP management API (docs/management.md), for the commands.

:class:`ManagementClient` sends one JSON request at a time with HTTP Basic credentials
(the broker's users, as the console's) and hands back the decoded JSON. Everything that can
go wrong becomes one :class:`ApiError` whose text is the one line the command prints: the
node not reachable, wrong credentials (401), a user without the ``manage`` permission (403),
and the API's own ``{"error": ...}`` for an unknown queue, a name taken, a bad field. The
standard library's urllib is all it needs: these are a few small requests per command.
"""

from __future__ import annotations

import base64
import json
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Final

__all__ = [
    "DEFAULT_URL",
    "EXIT_REFUSED",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "ApiError",
    "ManagementClient",
    "check_url",
]

DEFAULT_URL: Final = "http://localhost:8161"
"""Where Artemis's bootstrap.xml puts the web server, and an ``artemis-py create`` instance's."""

TIMEOUT: Final = 10.0

EXIT_REFUSED: Final = 1
"""The node answered and refused: wrong credentials, no permission, unknown name, ..."""
EXIT_USAGE: Final = 2
"""Bad options (argparse's own code for them)."""
EXIT_UNREACHABLE: Final = 3
"""No answer: nothing listens at the URL, a name that does not resolve, a timeout."""


class ApiError(Exception):
    """One failed request: ``str()`` is the line to print, ``status`` the HTTP status (0
    without an answer), ``exit_code`` what the command returns."""

    def __init__(self, message: str, *, status: int = 0, exit_code: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.status = status
        self.exit_code = exit_code

    @property
    def is_operation_error(self) -> bool:
        """The API refused this operation (400, 404, 409), as opposed to the connection or
        the credentials: worth the command's "Failed to ..." context."""
        return self.status in (400, 404, 409)


def check_url(url: str) -> str:
    """``url`` without a trailing slash; ValueError for anything but http(s)://HOST[:PORT]."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(
            f"--url {url!r}: give the node's management API as http://HOST:PORT (its web "
            "binding in bootstrap.xml, or artemis-py run --web), not a STOMP or cluster URL"
        )
    try:
        parsed.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise ValueError(f"--url {url!r}: the port is not a number from 0 to 65535") from None
    return url.rstrip("/")


class ManagementClient:
    """Requests to one node's management API as one user."""

    def __init__(
        self,
        url: str,
        user: str | None = None,
        password: str | None = None,
        *,
        timeout: float = TIMEOUT,
    ) -> None:
        self.url = check_url(url)
        self.user = user
        self.password = password
        self.timeout = timeout

    def get(self, path: str, **query: str) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, body=body)

    def delete(self, path: str, **query: str) -> Any:
        return self.request("DELETE", path, query=query)

    def request(
        self, method: str, path: str, *, body: Any = None, query: dict[str, str] | None = None
    ) -> Any:
        """The decoded JSON answer of ``method path``, or :class:`ApiError`."""
        target = self.url + path
        if query:
            target += "?" + urllib.parse.urlencode(query)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(target, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.user is not None:
            token = f"{self.user}:{self.password or ''}".encode()
            request.add_header("Authorization", "Basic " + base64.b64encode(token).decode())
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            try:
                body = exc.read() if exc.fp is not None else b""
            except OSError:
                body = b""
            finally:
                exc.close()
            raise self._refused(exc.code, str(exc.reason), body) from None
        except urllib.error.URLError as exc:
            raise self._unreachable(exc.reason) from None
        except TimeoutError:
            raise self._unreachable(TimeoutError()) from None
        except (ConnectionError, OSError) as exc:  # reset mid-answer, a bad status line
            raise self._unreachable(exc) from None
        return self._json(raw, 200)

    def _json(self, raw: bytes, status: int) -> Any:
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(
                f"{self.url} answered {status} with something that is not JSON: is it an "
                "artemis-py management API?",
                status=status,
            ) from None

    def _refused(self, status: int, reason: str, raw: bytes) -> ApiError:
        if status == 401:
            if self.user is None:
                why = "the management API needs a user: give --user and --password"
            else:
                why = f"wrong user or password for {self.user!r} (--user, --password)"
            return ApiError(f"{self.url}: {why}", status=status)
        if status == 403:
            return ApiError(
                f"{self.url}: user {self.user!r} lacks the manage permission (a role with "
                "'manage' on the management address in security-settings)",
                status=status,
            )
        error = _error_text(raw)
        if error is None:
            return ApiError(
                f"{self.url} answered {status} {reason} without an API error: is it an "
                "artemis-py management API?",
                status=status,
            )
        return ApiError(error, status=status)

    def _unreachable(self, reason: object) -> ApiError:
        if isinstance(reason, ConnectionRefusedError):
            why = "connection refused: is the node running with its web server on (<web> in "
            why += "bootstrap.xml, or artemis-py run --web URL)?"
        elif isinstance(reason, TimeoutError | socket.timeout):
            why = f"no answer within {self.timeout:g} s"
        elif isinstance(reason, socket.gaierror):
            why = f"unknown host ({reason.strerror})"
        elif isinstance(reason, ssl.SSLError):
            why = f"TLS failed ({reason.reason or reason})"
        elif isinstance(reason, OSError) and reason.strerror:
            why = reason.strerror
        else:
            why = str(reason) or type(reason).__name__
        return ApiError(f"cannot reach {self.url}: {why}", exit_code=EXIT_UNREACHABLE)


def _error_text(raw: bytes) -> str | None:
    """The API's ``{"error": message}``, or None for any other body."""
    try:
        body = json.loads(raw)
    except ValueError:
        return None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return " ".join(body["error"].split())  # one line, whatever the server wrote
    return None
