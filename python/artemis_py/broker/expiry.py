"""Expiry rules that do not need a clock tick: the expiration a routed message gets from its
address settings, and the names of the queues auto-created on expiry and dead-letter
addresses.

Theory of operation
-------------------
*Expiry delays* (Artemis "Message Expiry", ``PostOfficeImpl.applyExpiryDelay``) are applied
each time a message is routed, before its queues are chosen (a filter may read
``AMQExpiration``), by the settings of the address it is routed to:

* ``no-expiry``: the message never expires, whatever it was sent with;
* else ``expiry-delay`` (not -1): a message sent without an expiration expires that many
  ms from now; one sent with an expiration keeps it, and min/max are not consulted;
* else, for a message without an expiration, ``max-expiry-delay`` if set, otherwise
  ``min-expiry-delay`` if set; for one with an expiration, it is brought down to now +
  ``max-expiry-delay`` when later, or up to now + ``min-expiry-delay`` when sooner.

"Set" means "not -1", as Artemis compares with its default. A node whose broker.xml sets
none of these four settings anywhere never looks (:func:`expiry_delays_configured`), so
its sends pay nothing for them.

*Resource queues* (``auto-create-expiry-resources`` / ``auto-create-dead-letter-resources``,
Artemis's ``QueueImpl.createResources``): when a message from address ``A`` expires or is
dead-lettered, the queue ``<prefix>A<suffix>`` is made on the expiry or dead-letter address
(if missing) with the filter ``_AMQ_ORIG_ADDRESS = 'A'``, so each original address's
undelivered messages gather in a queue of their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from artemis_py.broker.routing.diverts import ORIG_ADDRESS
from artemis_py.config import AddressSettings

if TYPE_CHECKING:
    from artemis_py.broker.message import Message
    from artemis_py.config import BrokerConfig

ACTUAL_EXPIRY = "_AMQ_ACTUAL_EXPIRY"  # when an expired message was moved (epoch ms)

_DELAY_FIELDS = ("expiry_delay", "min_expiry_delay", "max_expiry_delay", "no_expiry")
_UNSET = -1  # AddressSettings.DEFAULT_{,MIN_,MAX_}EXPIRY_DELAY
_DEFAULTS = AddressSettings()


def configured(config: BrokerConfig, *fields: str) -> bool:
    """Whether any address setting, or the base they all inherit, gives one of ``fields``
    (AddressSettings field names) a value other than Artemis's default."""
    repository = config.address_settings
    base, default = repository.base, _DEFAULTS
    if any(getattr(base, name) != getattr(default, name) for name in fields):
        return True
    return any(name in fields for entry in repository.entries for name, _ in entry.overrides)


def expiry_delays_configured(config: BrokerConfig) -> bool:
    """Whether routing must apply expiry delays at all (on a node that sets none of the
    four settings anywhere, it never looks)."""
    return configured(config, *_DELAY_FIELDS)


def apply_expiry_delays(message: Message, settings: AddressSettings, now: int) -> None:
    """Set ``message``'s expiration as its address's settings say (module docstring)."""
    expiration = message.expiration
    if settings.no_expiry:
        message.expiration = 0
        return
    if settings.expiry_delay != _UNSET:
        if not expiration:
            message.expiration = now + settings.expiry_delay
        return
    longest, shortest = settings.max_expiry_delay, settings.min_expiry_delay
    if not expiration:
        if longest != _UNSET:
            message.expiration = now + longest
        elif shortest != _UNSET:
            message.expiration = now + shortest
    elif longest != _UNSET and expiration > now + longest:
        message.expiration = now + longest
    elif shortest != _UNSET and expiration < now + shortest:
        message.expiration = now + shortest


def resource_queue(
    original_address: str, target: str | None, auto_create: bool, prefix: str, suffix: str
) -> tuple[str, str] | None:
    """The (name, filter) of the queue to auto-create on ``target`` for messages from
    ``original_address``; None when none is wanted (not enabled, no target, or the target
    is the original address itself)."""
    if not auto_create or not target or target == original_address:
        return None
    quoted = original_address.replace("'", "''")  # (a filter string literal)
    return f"{prefix}{original_address}{suffix}", f"{ORIG_ADDRESS} = '{quoted}'"
