"""The identifiers a filter reads specially: Artemis's message attributes and JMS headers.

Identifiers go to ``lookup`` unchanged except the JMS header names, which map onto Artemis's
(what Artemis's SelectorTranslator does for JMS selectors); JMSDeliveryMode is computed from
AMQDurable. JMSCorrelationID and JMSType are ordinary properties of those names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

from artemis_py.broker.filter.values import Lookup

__all__ = [
    "DELIVERY_MODE",
    "DURABLE",
    "JMS_HEADER_ALIASES",
    "SPECIAL_IDENTIFIERS",
    "delivery_mode",
]

SPECIAL_IDENTIFIERS: Final = frozenset(
    {
        "AMQUserID",
        "AMQAddress",
        "AMQGroupID",
        "AMQPriority",
        "AMQExpiration",
        "AMQDurable",
        "AMQTimestamp",
        "AMQSize",
    }
)
"""Artemis's identifiers for message attributes; the broker's ``lookup`` resolves them."""

JMS_HEADER_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "JMSPriority": "AMQPriority",
        "JMSTimestamp": "AMQTimestamp",
        "JMSMessageID": "AMQUserID",
        "JMSExpiration": "AMQExpiration",
        "JMSXGroupID": "AMQGroupID",
    }
)
"""JMS header identifiers a filter reads through Artemis's names (JMSDeliveryMode aside)."""

DELIVERY_MODE: Final = "JMSDeliveryMode"
DURABLE: Final = "AMQDurable"
"""The identifier :func:`delivery_mode` reads."""


def delivery_mode(lookup: Lookup) -> object:
    """JMSDeliveryMode: AMQDurable's 'DURABLE' / 'NON_DURABLE' read as 'PERSISTENT' /
    'NON_PERSISTENT'."""
    durable = lookup("AMQDurable")  # DURABLE, as a constant rather than a global read
    if durable == "DURABLE":
        return "PERSISTENT"
    if durable == "NON_DURABLE":
        return "NON_PERSISTENT"
    return durable
