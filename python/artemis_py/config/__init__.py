"""broker.xml -> frozen dataclasses.

artemis-py reads Apache ActiveMQ Artemis's ``broker.xml`` format: ``<configuration
xmlns="urn:activemq">`` around ``<core xmlns="urn:activemq:core">``, with ``${name}`` /
``${name:default}`` substitution from the environment and Artemis's byte notation (``10MiB``,
``512K``). Defaults are Artemis's documented defaults. Every problem in a file is reported at
once, each with file, line and element; valid Artemis settings that artemis-py does not
implement produce one warning (``BrokerConfig.warnings``, also logged on ``artemis_py.config``).

>>> config = load_config("etc/broker.xml")                      # doctest: +SKIP
>>> config.address_settings_for("orders.eu").max_delivery_attempts  # doctest: +SKIP
10
"""

from .address_settings import AddressSettingEntry, AddressSettings, AddressSettingsRepository
from .enums import (
    AddressFullPolicy,
    ComponentRoutingType,
    DeletionPolicy,
    DiskFullPolicy,
    GroupingHandlerType,
    HAPolicy,
    JournalType,
    MessageLoadBalancing,
    PageFullPolicy,
    RoutingType,
    SlowConsumerPolicy,
    SlowConsumerThresholdMeasurementUnit,
)
from .model import (
    LAST_VALUE_PROPERTY,
    AcceptorConfig,
    AddressConfig,
    BridgeConfig,
    BroadcastGroupConfig,
    BrokerConfig,
    ClusterConnectionConfig,
    ConnectorConfig,
    DiscoveryGroupConfig,
    DivertConfig,
    GroupingHandlerConfig,
    HAPolicyConfig,
    JGroupsStack,
    JournalConfig,
    QueueConfig,
    QueueKind,
    ReplicationConfig,
    ScaleDownConfig,
    SharedStoreConfig,
)
from .parse import default_config, load_config, parse_config
from .problems import ConfigFileError, ConfigProblem
from .values import parse_bytes
from .wildcards import (
    AddressMatcher,
    WildcardSyntax,
    is_wildcard,
    malformed,
    matches,
    precedence_key,
)

__all__ = [
    "LAST_VALUE_PROPERTY",
    "AcceptorConfig",
    "AddressConfig",
    "AddressFullPolicy",
    "AddressMatcher",
    "AddressSettingEntry",
    "AddressSettings",
    "AddressSettingsRepository",
    "BridgeConfig",
    "BroadcastGroupConfig",
    "BrokerConfig",
    "ClusterConnectionConfig",
    "ComponentRoutingType",
    "ConfigFileError",
    "ConfigProblem",
    "ConnectorConfig",
    "DeletionPolicy",
    "DiscoveryGroupConfig",
    "DiskFullPolicy",
    "DivertConfig",
    "GroupingHandlerConfig",
    "GroupingHandlerType",
    "HAPolicy",
    "HAPolicyConfig",
    "JGroupsStack",
    "JournalConfig",
    "JournalType",
    "MessageLoadBalancing",
    "PageFullPolicy",
    "QueueConfig",
    "QueueKind",
    "ReplicationConfig",
    "RoutingType",
    "ScaleDownConfig",
    "SharedStoreConfig",
    "SlowConsumerPolicy",
    "SlowConsumerThresholdMeasurementUnit",
    "WildcardSyntax",
    "default_config",
    "is_wildcard",
    "load_config",
    "malformed",
    "matches",
    "parse_bytes",
    "parse_config",
    "precedence_key",
]
