"""STOMP 1.0, 1.1 and 1.2 sessions: :class:`StompSession` (the verbs) and the
:class:`Subscription` consumers it creates."""

from artemis_py.sessions.stomp.errors import StompError
from artemis_py.sessions.stomp.session import StompSession, Target
from artemis_py.sessions.stomp.subscription import Subscription

__all__ = ["StompError", "StompSession", "Subscription", "Target"]
