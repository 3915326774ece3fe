"""How the task, its trigger, the listener and every client reach AWS: one value, built once by the operator.

The Airflow connection's id, the Region, TLS verification and the task's botocore settings travel together from
the operator to the task, the trigger (through ``serialize()``), the claim the listener reads, and the clients
of SageMaker, CloudWatch Logs and Metrics, Service Quotas and training plans. A client that needs its own
deadlines or another Region gets a new value (``with_call_config``, ``in_region``); nothing changes one in place.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Connection:
    aws_conn_id: str | None = "aws_default"
    region_name: str | None = None  # None: the Airflow connection's Region
    verify: bool | str | None = None  # None: the Airflow connection's
    # botocore's Config arguments (retries, timeouts); kept as given, a copy handed out to each client.
    botocore_config: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.botocore_config is not None:  # the caller's dict cannot change this value afterwards
            object.__setattr__(self, "botocore_config", copy.deepcopy(dict(self.botocore_config)))

    @classmethod
    def of_hook_arguments(cls, arguments: Mapping[str, Any]) -> Connection:
        """The value back from ``hook_arguments()`` (what a trigger serialized, or an older one's two keys)."""
        return cls(
            aws_conn_id=arguments.get("aws_conn_id", "aws_default"),
            region_name=arguments.get("region_name"),
            verify=arguments.get("verify"),
            botocore_config=arguments.get("config"),
        )

    def hook_arguments(self) -> dict[str, Any]:
        """The ``AwsBaseHook`` keyword arguments: what a hook is built from, and what a trigger serializes."""
        config = copy.deepcopy(dict(self.botocore_config)) if self.botocore_config is not None else None
        return {
            "aws_conn_id": self.aws_conn_id,
            "region_name": self.region_name,
            "verify": self.verify,
            "config": config,
        }

    def in_region(self, region: str | None) -> Connection:
        return replace(self, region_name=region)

    def with_call_config(self, config: Mapping[str, Any]) -> Connection:
        """This connection with ``config`` over the task's botocore settings: a client's own deadlines."""
        return replace(self, botocore_config={**(self.botocore_config or {}), **config})

    @property
    def key(self) -> str:
        """One text per set of settings: what the process's shared hooks, watchers and log readers are kept by."""
        return json.dumps(self.hook_arguments(), sort_keys=True, default=str)

    @property
    def rate_scope(self) -> tuple[str | None, str | None]:
        """What SageMaker's request rates are counted by: the account behind the connection, and the Region."""
        return (self.aws_conn_id, self.region_name)
