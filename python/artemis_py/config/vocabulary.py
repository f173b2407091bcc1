"""Which element names are valid where, and which of them artemis-py implements.

The parser checks every element it walks against the vocabulary of its parent:

* a name artemis-py implements is parsed;
* a name that is valid Artemis (per ``artemis-configuration.xsd``) but not implemented is noted,
  and all such names end up in *one* warning listing them with their lines (the subtree under
  such an element is not inspected);
* any other name is an error, with the closest valid name suggested (typo protection).

The name lists are Artemis's vocabulary, taken from its schema (Artemis 2.x).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

__all__ = ["VOCABULARIES", "Vocabulary", "suggest"]


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The children an element may have.

    ``repeatable`` children may appear more than once; every other child at most once.
    ``attributes`` are the unqualified attributes we read; ``unimplemented_attributes`` are valid
    Artemis attributes that we accept and ignore (with a warning).
    """

    implemented: frozenset[str]
    unimplemented: frozenset[str] = frozenset()
    repeatable: frozenset[str] = frozenset()
    attributes: frozenset[str] = frozenset()
    unimplemented_attributes: frozenset[str] = frozenset()

    @property
    def known(self) -> frozenset[str]:
        return self.implemented | self.unimplemented


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


def suggest(name: str, candidates: frozenset[str]) -> str | None:
    """The closest candidate to a misspelled ``name``, if any is reasonably close."""
    close = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return close[0] if close else None


CORE_IMPLEMENTED = _names(
    """
    name persistence-enabled security-enabled
    journal-type journal-directory bindings-directory paging-directory large-messages-directory
    create-journal-dir create-bindings-dir journal-file-size journal-min-files journal-pool-files
    journal-buffer-size journal-buffer-timeout journal-max-io journal-datasync
    journal-sync-transactional journal-sync-non-transactional journal-compact-min-files
    journal-compact-percentage id-cache-size persist-id-cache max-redelivery-records global-max-size global-max-messages
    max-disk-usage min-disk-free disk-scan-period message-expiry-scan-period address-queue-scan-period
    cluster-user cluster-password mask-password password-codec connection-ttl-override
    wild-card-routing-enabled
    management-address
    acceptors connectors address-settings addresses diverts bridges
    broadcast-groups discovery-groups cluster-connections ha-policy wildcard-addresses
    security-settings grouping-handler
    """
)

# Every other child of <core> in artemis-configuration.xsd.
CORE_UNIMPLEMENTED = _names(
    """
    system-property-prefix internal-naming-prefix amqp-use-core-subscription-naming
    resolve-protocols large-message-sync scheduled-thread-pool-max-size thread-pool-max-size
    graceful-shutdown-enabled graceful-shutdown-timeout security-invalidation-interval
    authentication-cache-size authorization-cache-size journal-lock-acquisition-timeout
    management-notification-address
    log-delegate-factory-class-name jmx-management-enabled jmx-domain jmx-use-broker-name
    message-counter-enabled message-counter-sample-period message-counter-max-day-history
    connection-ttl-check-interval configuration-file-refresh-period temporary-queue-namespace
    uuid-namespace async-connection-execution-enabled transaction-timeout
    transaction-timeout-scan-period message-expiry-thread-priority
    remoting-incoming-interceptors remoting-outgoing-interceptors
    persist-delivery-count-before-delivery populate-validated-user
    reject-empty-validated-user mqtt-session-scan-interval mqtt-session-state-persistence-timeout
    mqtt-subscription-persistence-enabled queues federations broker-connections
    connection-routers purge-page-folders page-max-concurrent-io read-whole-page
    journal-retention-directory node-manager-lock-directory journal-device-block-size
    log-journal-write-rate journal-file-open-timeout server-dump-interval
    global-max-size-percent-of-jvm-max-memory
    memory-warning-threshold memory-measure-interval store critical-analyzer
    critical-analyzer-timeout critical-analyzer-check-period critical-analyzer-policy
    page-sync-timeout mirror-ack-manager-queue-attempts mirror-ack-manager-page-attempts
    mirror-ack-manager-retry-delay mirror-ack-manager-warn-unacked mirror-page-transaction
    suppress-session-notifications literal-match-markers view-permission-method-match-pattern
    management-message-rbac management-rbac-prefix broker-plugins
    metrics-plugin metrics resource-limit-settings connector-services network-check-list
    network-check-URL-list network-check-period network-check-timeout network-check-NIC
    network-check-ping-command network-check-ping6-command
    """
)

# address-setting children we type (the parse table in address_settings.py must match).
ADDRESS_SETTING_IMPLEMENTED = _names(
    """
    dead-letter-address auto-create-dead-letter-resources dead-letter-queue-prefix
    dead-letter-queue-suffix expiry-address auto-create-expiry-resources expiry-queue-prefix
    expiry-queue-suffix no-expiry expiry-delay min-expiry-delay max-expiry-delay
    redelivery-delay redelivery-delay-multiplier redelivery-collision-avoidance-factor
    max-redelivery-delay max-delivery-attempts max-size-bytes max-size-messages
    page-limit-bytes page-limit-messages max-size-bytes-reject-threshold page-size-bytes
    max-read-page-messages prefetch-page-messages max-read-page-bytes prefetch-page-bytes
    address-full-policy disk-full-policy page-full-policy message-counter-history-day-limit
    last-value-queue default-last-value-queue default-last-value-key default-non-destructive
    default-exclusive-queue default-group-rebalance default-group-rebalance-pause-dispatch
    default-group-buckets default-group-first-key default-consumers-before-dispatch
    default-delay-before-dispatch redistribution-delay send-to-dla-on-no-route
    slow-consumer-threshold slow-consumer-threshold-measurement-unit slow-consumer-policy
    slow-consumer-check-period auto-create-queues auto-delete-queues auto-delete-created-queues
    auto-delete-queues-delay auto-delete-queues-message-count
    auto-delete-queues-skip-usage-check config-delete-queues auto-create-addresses
    auto-delete-addresses auto-delete-addresses-delay auto-delete-addresses-skip-usage-check
    config-delete-addresses config-delete-diverts management-browse-page-size
    management-message-attribute-size-limit default-purge-on-no-consumers default-max-consumers
    default-queue-routing-type default-address-routing-type default-consumer-window-size
    default-ring-size retroactive-message-count enable-metrics enable-ingress-timestamp
    id-cache-size initial-queue-buffer-size
    """
)

# The children of both <replication><primary> and <backup>.
_REPLICATION_COMMON = """
    group-name cluster-name max-saved-replicated-journals-size initial-replication-sync-timeout
    vote-on-replication-failure quorum-size vote-retries vote-retry-wait quorum-vote-wait
    retry-replication-wait
"""

VOCABULARIES: dict[str, Vocabulary] = {
    "configuration": Vocabulary(implemented=_names("core"), unimplemented=_names("jms")),
    "core": Vocabulary(implemented=CORE_IMPLEMENTED, unimplemented=CORE_UNIMPLEMENTED),
    "acceptors": Vocabulary(implemented=_names("acceptor"), repeatable=_names("acceptor")),
    "acceptor": Vocabulary(implemented=frozenset(), attributes=_names("name")),
    "connectors": Vocabulary(implemented=_names("connector"), repeatable=_names("connector")),
    "connector": Vocabulary(implemented=frozenset(), attributes=_names("name")),
    "address-settings": Vocabulary(
        implemented=_names("address-setting"), repeatable=_names("address-setting")
    ),
    "address-setting": Vocabulary(
        implemented=ADDRESS_SETTING_IMPLEMENTED,
        # Deprecated JMS-era names and a setting Artemis itself ignores.
        unimplemented=_names(
            "auto-create-jms-queues auto-delete-jms-queues auto-create-jms-topics "
            "auto-delete-jms-topics page-max-cache-size"
        ),
        attributes=_names("match"),
    ),
    "security-settings": Vocabulary(
        implemented=_names("security-setting role-mapping"),
        unimplemented=_names("security-setting-plugin"),
        repeatable=_names("security-setting role-mapping"),
    ),
    "security-setting": Vocabulary(
        implemented=_names("permission"),
        repeatable=_names("permission"),
        attributes=_names("match"),
    ),
    "permission": Vocabulary(implemented=frozenset(), attributes=_names("type roles")),
    "role-mapping": Vocabulary(implemented=frozenset(), attributes=_names("from to")),
    "addresses": Vocabulary(implemented=_names("address"), repeatable=_names("address")),
    "address": Vocabulary(implemented=_names("anycast multicast"), attributes=_names("name")),
    "anycast": Vocabulary(implemented=_names("queue"), repeatable=_names("queue")),
    "multicast": Vocabulary(implemented=_names("queue"), repeatable=_names("queue")),
    "queue": Vocabulary(
        implemented=_names("filter durable"),
        unimplemented=_names("user"),
        attributes=_names(
            "name max-consumers purge-on-no-consumers exclusive group-rebalance "
            "group-rebalance-pause-dispatch group-buckets group-first-key last-value "
            "last-value-key non-destructive ring-size consumers-before-dispatch "
            "delay-before-dispatch"
        ),
        unimplemented_attributes=_names("enabled"),
    ),
    "filter": Vocabulary(implemented=frozenset(), attributes=_names("string")),
    "diverts": Vocabulary(implemented=_names("divert"), repeatable=_names("divert")),
    # transformer-class-name and transformer are read to be refused (Java classes).
    "divert": Vocabulary(
        implemented=_names(
            "address forwarding-address exclusive filter routing-name routing-type "
            "transformer-class-name transformer"
        ),
        attributes=_names("name"),
    ),
    "bridges": Vocabulary(implemented=_names("bridge"), repeatable=_names("bridge")),
    # transformer-class-name and transformer are read to be refused (Java classes);
    # failover-on-server-shutdown, to be called deprecated (Artemis ignores it too).
    "bridge": Vocabulary(
        implemented=_names(
            "queue-name forwarding-address ha filter transformer-class-name transformer "
            "min-large-message-size check-period connection-ttl retry-interval "
            "retry-interval-multiplier max-retry-interval initial-connect-attempts "
            "reconnect-attempts failover-on-server-shutdown use-duplicate-detection "
            "confirmation-window-size producer-window-size user password "
            "reconnect-attempts-same-node routing-type concurrency pending-ack-timeout "
            "client-id static-connectors discovery-group-ref"
        ),
        attributes=_names("name"),
    ),
    "wildcard-addresses": Vocabulary(
        implemented=_names("enabled routing-enabled delimiter any-words single-word")
    ),
    "broadcast-groups": Vocabulary(
        implemented=_names("broadcast-group"), repeatable=_names("broadcast-group")
    ),
    "broadcast-group": Vocabulary(
        implemented=_names(
            "local-bind-address local-bind-port group-address group-port broadcast-period "
            "jgroups-file jgroups-channel connector-ref"
        ),
        repeatable=_names("connector-ref"),
        attributes=_names("name"),
    ),
    "discovery-groups": Vocabulary(
        implemented=_names("discovery-group"), repeatable=_names("discovery-group")
    ),
    "discovery-group": Vocabulary(
        implemented=_names(
            "group-address group-port jgroups-file jgroups-channel refresh-timeout "
            "local-bind-address local-bind-port initial-wait-timeout"
        ),
        attributes=_names("name"),
    ),
    "cluster-connections": Vocabulary(
        implemented=_names("cluster-connection"),
        unimplemented=_names("cluster-connection-uri"),
        repeatable=_names("cluster-connection cluster-connection-uri"),
    ),
    "cluster-connection": Vocabulary(
        implemented=_names(
            "address connector-ref check-period connection-ttl min-large-message-size "
            "call-timeout retry-interval retry-interval-multiplier max-retry-interval "
            "initial-connect-attempts reconnect-attempts use-duplicate-detection "
            "forward-when-no-consumers message-load-balancing max-hops confirmation-window-size "
            "producer-window-size call-failover-timeout notification-interval "
            "notification-attempts static-connectors discovery-group-ref"
        ),
        unimplemented=_names("scale-down-connector client-id topology-scanner-attempts"),
        attributes=_names("name"),
        unimplemented_attributes=_names("uri"),
    ),
    "static-connectors": Vocabulary(
        implemented=_names("connector-ref"),
        repeatable=_names("connector-ref"),
        attributes=_names("allow-direct-connections-only"),
    ),
    "discovery-group-ref": Vocabulary(
        implemented=frozenset(), attributes=_names("discovery-group-name")
    ),
    "grouping-handler": Vocabulary(
        implemented=_names("type address timeout group-timeout reaper-period"),
        attributes=_names("name"),
    ),
    "ha-policy": Vocabulary(implemented=_names("primary-only live-only replication shared-store")),
    "primary-only": Vocabulary(implemented=_names("scale-down")),
    "shared-store": Vocabulary(
        implemented=_names("primary master backup slave"), unimplemented=_names("colocated")
    ),
    "shared-store/primary": Vocabulary(
        implemented=_names("failover-on-shutdown wait-for-activation"),
        unimplemented=_names("failback-delay"),
    ),
    "shared-store/backup": Vocabulary(
        implemented=_names("allow-failback failover-on-shutdown restart-backup scale-down"),
        unimplemented=_names("failback-delay"),
    ),
    "replication": Vocabulary(
        implemented=_names("primary master backup slave"), unimplemented=_names("colocated")
    ),
    # check-for-live-server is the old name of check-for-active-server; manager and
    # coordination-id choose Artemis's pluggable-quorum replication, which is not implemented.
    "replication/primary": Vocabulary(
        implemented=_names(f"{_REPLICATION_COMMON} check-for-active-server check-for-live-server"),
        unimplemented=_names("manager coordination-id"),
    ),
    # failback-delay is deprecated (Artemis ignores it too).
    "replication/backup": Vocabulary(
        implemented=_names(f"{_REPLICATION_COMMON} scale-down restart-backup allow-failback"),
        unimplemented=_names("failback-delay manager"),
    ),
    "live-only": Vocabulary(implemented=_names("scale-down")),
    "scale-down": Vocabulary(
        implemented=_names("enabled group-name discovery-group-ref connectors commit-interval")
    ),
    "scale-down/connectors": Vocabulary(
        implemented=_names("connector-ref"), repeatable=_names("connector-ref")
    ),
}
