"""Client quotas as Kafka enforces them: byte rates, request time and controller
mutations per user / client id, measured on windowed rates and token buckets.

Sans-I/O: the managers take the principal, the client id, a value and the time, and
return how long to throttle (:mod:`.client_quota_manager`); :mod:`.entity` holds the
quota entities as stored and the checks of AlterClientQuotas and DescribeClientQuotas;
:mod:`.stats` Kafka's ``Rate`` and ``TokenBucket``. The broker's network layer applies
the throttles (``server/throttled_channel.py``).
"""

from sluice.quota.client_quota_manager import (
    ClientQuotaManager,
    ClientRequestQuotaManager,
    ControllerMutationQuota,
    ControllerMutationQuotaManager,
    QuotaManagers,
    QuotaType,
    ThrottleStats,
    ThrottlingQuotaExceeded,
)
from sluice.quota.entity import (
    DEFAULT,
    QUOTA_CONFIGS,
    ClientQuotaEntity,
    FilterComponent,
    InvalidRequest,
    UnsupportedEntityType,
)
from sluice.quota.stats import MetricConfig, Rate, TokenBucket

__all__ = [
    "DEFAULT",
    "QUOTA_CONFIGS",
    "ClientQuotaEntity",
    "ClientQuotaManager",
    "ClientRequestQuotaManager",
    "ControllerMutationQuota",
    "ControllerMutationQuotaManager",
    "FilterComponent",
    "InvalidRequest",
    "MetricConfig",
    "QuotaManagers",
    "QuotaType",
    "Rate",
    "ThrottleStats",
    "ThrottlingQuotaExceeded",
    "TokenBucket",
    "UnsupportedEntityType",
]
