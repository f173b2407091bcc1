"""What the management web server serves: a live node, or a node that is not live yet.

A shared-store backup waits for its primary to fail with no broker, no journal and no
acceptor (docs/high-availability.md), yet operators want to see it waiting, as Artemis's
backup serves its console. So ``artemis-py run`` starts the web server of a shared-store
node once, for the life of the process, around a :class:`ManagementSite`: while no node is
attached it answers what it knows without a broker (``/api/node``, ``/metrics`` with
``artemis_ha_live 0``) and 503 for the rest; once the node is live it is attached and the
same server, on the same port, serves the full API. A failback detaches it again. The port
is bound once, whatever happens to the node behind it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from artemis_py import __version__
from artemis_py.broker.authentication import Authenticator
from artemis_py.broker.authorization import Authorizer
from artemis_py.config import BrokerConfig
from artemis_py.management.views import HaView, acceptor_view, ha_side_view

if TYPE_CHECKING:
    from artemis_py.ha import PairSide
    from artemis_py.node import Node


class ManagementSite:
    """The target of one web server: ``node`` while there is a live one, else the node's
    configuration and its side of its HA pair (``pair``, replaced on each wait)."""

    def __init__(
        self,
        config: BrokerConfig,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        node: Node | None = None,
        ha: PairSide | None = None,
    ) -> None:
        self.config = config
        self.node = node
        self.pair = ha
        self.web_url: str | None = None
        self.started = time.monotonic()
        self._authenticator = authenticator
        self._authorizer = authorizer

    @classmethod
    def of(cls, node: Node) -> ManagementSite:
        """The site of a node that is live already (an embedded node's web server)."""
        return cls(node.config, node.authenticator, node.authorizer, node=node)

    @property
    def authenticator(self) -> Authenticator:
        return self.node.authenticator if self.node is not None else self._authenticator

    @property
    def authorizer(self) -> Authorizer:
        return self.node.authorizer if self.node is not None else self._authorizer

    def attach(self, node: Node) -> None:
        node.web_url = self.web_url
        self.node = node

    def detach(self) -> None:
        self.node = None

    def ha(self) -> HaView:
        """The HA view of a site without a live node (views.ha_view's shape)."""
        side = self.pair
        if side is None:
            return {"policy": "primary-only", "role": "primary", "state": "starting"}
        return ha_side_view(side)

    def not_live_reason(self) -> str:
        ha = self.ha()
        if ha["role"] == "backup" and ha["state"] == "waiting":
            return (
                f"this node is a waiting {ha['policy']} backup: it has no broker until its "
                "primary fails and it becomes live (GET /api/node shows its state)"
            )
        return (
            f"this node ({ha['policy']} {ha['role']}) is not live yet: it is {ha['state']} "
            "(GET /api/node shows its state)"
        )

    def node_view(self) -> dict[str, Any]:
        """``/api/node`` while no node is live: what is known without a broker (the node
        ID once a primary created it, nothing listening)."""
        config = self.config
        return {
            "name": config.name or "artemis-py",
            "node_id": self.pair.node_id if self.pair is not None else None,
            "version": __version__,
            "uptime_seconds": round(time.monotonic() - self.started, 3),
            "acceptors": [acceptor_view(a, []) for a in config.acceptors],
            "web": self.web_url,
            "security_enabled": config.security_enabled,
            "persistence_enabled": config.persistence_enabled,
            "disk": None,
            "ha": self.ha(),
        }
