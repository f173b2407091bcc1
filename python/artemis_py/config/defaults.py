"""Artemis's default values that are shared across modules, and the embedded default broker.xml.

Most defaults live as field defaults on the dataclasses in :mod:`.model` and
:mod:`.address_settings` (so ``AddressSettings()`` *is* the table of Artemis defaults). This module
holds the ones that are used in more than one place or need a word of explanation.

Sources: Artemis ``ActiveMQDefaultConfiguration``, ``ArtemisConstants``, ``TransportConstants``,
``artemis-configuration.xsd``, and the user manual (configuration index, STOMP, clusters).
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_BROKER_XML",
    "GiB",
    "KiB",
    "MiB",
]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB

# --- broker -------------------------------------------------------------------------------------
BROKER_NAME = "localhost"  # ConfigurationImpl.name
CLUSTER_USER = "ACTIVEMQ.CLUSTER.ADMIN.USER"
CLUSTER_PASSWORD = "CHANGE ME!!"  # Artemis warns on every start while this is unchanged
ID_CACHE_SIZE = 20000
# Deliveries after which a message's delivery count and redelivery time are no longer
# journaled (Artemis's max-redelivery-records; -1: always).
MAX_REDELIVERY_RECORDS = 10
MANAGEMENT_ADDRESS = "activemq.management"  # where management operations are sent
MAX_DISK_USAGE = 90  # percent; ActiveMQDefaultConfiguration.DEFAULT_MAX_DISK_USAGE
DISK_SCAN_PERIOD = 5000  # ms; DEFAULT_DISK_SCAN
MESSAGE_EXPIRY_SCAN_PERIOD = 30000  # ms; DEFAULT_MESSAGE_EXPIRY_SCAN_PERIOD (-1: never)
ADDRESS_QUEUE_SCAN_PERIOD = 30000  # ms; DEFAULT_ADDRESS_QUEUE_SCAN_PERIOD (-1: never)

# --- journal ------------------------------------------------------------------------------------
# journal-buffer-timeout is in nanoseconds. Artemis: 1e9/2000 for ASYNCIO, 1e9/300 for NIO.
# artemis-py's journal writes and fdatasyncs from one writer task (NIO-like), so when the
# element is absent we use the NIO value whatever journal-type says.
JOURNAL_BUFFER_TIMEOUT_ASYNCIO = 500_000
JOURNAL_BUFFER_TIMEOUT_NIO = 3_333_333
# journal-max-io: Artemis 4096 for ASYNCIO, 1 for NIO; same reasoning as above.
JOURNAL_MAX_IO_ASYNCIO = 4096
JOURNAL_MAX_IO_NIO = 1
JOURNAL_BUFFER_SIZE = 490 * KiB  # 501760, both journal types
JOURNAL_FILE_SIZE = 10 * MiB

# --- transports ---------------------------------------------------------------------------------
TCP_HOST = "localhost"  # TransportConstants.DEFAULT_HOST, used when a URL has no host
TCP_PORT = 61616  # TransportConstants.DEFAULT_PORT, used when a URL has no port
CONNECTION_TTL = 60_000  # ms; STOMP manual: "The default connectionTtl is 60,000"
CONNECTION_TTL_MIN = 1_000  # ms; connectionTtlMin
CONNECTION_TTL_MAX = 2**63 - 1  # ms; connectionTtlMax: Artemis's Long.MAX_VALUE, i.e. no maximum
HEART_BEAT_TO_CONNECTION_TTL_MODIFIER = 2.0
# stompMinLargeMessageSize (TransportConstants), Artemis's 100 KiB large-message threshold
MIN_LARGE_MESSAGE_SIZE = 100 * KiB
STOMP_CONSUMER_WINDOW_SIZE = 10 * KiB  # for client/client-individual acks (-1 for auto acks)
TCP_SEND_BUFFER_SIZE = 1 * MiB  # tcpSendBufferSize (TransportConstants); -1: the OS's autotuning
TCP_RECEIVE_BUFFER_SIZE = 1 * MiB  # tcpReceiveBufferSize
# STOMP frame limits are artemis-py's own URL parameters (Artemis has none). Their defaults
# are the STOMP codec's FrameLimits defaults (artemis_py/protocol/stomp/limits.py explains
# them; the configuration sits above no protocol, so they are written twice and
# tests/unit/config/test_config_values.py checks that the two agree).
STOMP_MAX_BODY_SIZE = 100 * MiB  # stompMaxBodySize: FrameLimits.max_body_size
STOMP_MAX_HEADERS = 1000  # stompMaxHeaders: FrameLimits.max_header_count
STOMP_MAX_HEADER_LENGTH = 64 * KiB  # stompMaxHeaderLength: FrameLimits.max_header_line_length
STOMP_MAX_HEADERS_SIZE = 1 * MiB  # stompMaxHeadersSize: FrameLimits.max_header_bytes

# The configuration used when no broker.xml is given: one node, a STOMP acceptor on all
# interfaces with the /queue/ and /topic/ prefixes STOMP users expect, data under ./data,
# persistence on, security off. Everything else is Artemis's default.
DEFAULT_BROKER_XML = """\
<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
   <core xmlns="urn:activemq:core">
      <name>localhost</name>
      <persistence-enabled>true</persistence-enabled>
      <security-enabled>false</security-enabled>
      <journal-directory>data/journal</journal-directory>
      <bindings-directory>data/bindings</bindings-directory>
      <paging-directory>data/paging</paging-directory>
      <large-messages-directory>data/largemessages</large-messages-directory>
      <acceptors>
         <!-- /queue/NAME is anycast and /topic/NAME multicast, as STOMP users expect. -->
         <acceptor name="stomp">tcp://0.0.0.0:61613?protocols=STOMP;anycastPrefix=/queue/;multicastPrefix=/topic/</acceptor>
      </acceptors>
   </core>
</configuration>
"""

# <grouping-handler> (Artemis's ActiveMQDefaultConfiguration): how long a send waits for a
# group's decision, how long an unused group is kept (-1: for ever), how often the LOCAL
# handler looks for unused groups.
GROUPING_HANDLER_TIMEOUT = 5000
GROUPING_HANDLER_GROUP_TIMEOUT = -1
GROUPING_HANDLER_REAPER_PERIOD = 30000
