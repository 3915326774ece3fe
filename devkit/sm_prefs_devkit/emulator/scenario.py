"""Scenario files: the capacity, quotas, timings, faults and service behaviours an emulator run plays.

Unknown keys are errors, so a typo never silently turns a shortage rehearsal into an ample one.
"""

from __future__ import annotations

import hashlib
from dataclasses import field
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass

BUNDLED = (
    "ample",
    "gpu-shortage",
    "all-busy-then-free",
    "quota-short",
    "incompatible-fallback",
    "failure-causes",
    "reserved-first",
    "nightly-weather",
    "shared-region",
)
_T = TypeVar("_T")


class ScenarioError(ValueError):
    """A scenario file that cannot be played as written."""


# Typed with pydantic (already an Airflow dependency) so every wrong value, anywhere in a file or a control
# call, is refused with its path: strings where numbers go, booleans where counts go, NaN, infinities,
# negative times, lists where mappings go. Bounds keep every virtual time finite once added up.
_MAX_SECONDS = 1e9  # about 31 years
_MAX_COUNT = 1_000_000
Seconds = Annotated[StrictFloat, Field(ge=0, le=_MAX_SECONDS, allow_inf_nan=False)]
Speed = Annotated[StrictFloat, Field(ge=0, le=1e6, allow_inf_nan=False)]  # virtual seconds a real one; 0: stopped
Count = Annotated[StrictInt, Field(ge=0, le=_MAX_COUNT)]
Rate = Annotated[StrictFloat, Field(ge=0, le=1, allow_inf_nan=False)]
Name = Annotated[StrictStr, Field(min_length=1, max_length=256)]
BucketName = Annotated[StrictStr, Field(pattern=r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")]
ObjectKey = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
Region = Annotated[StrictStr, Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")]
Price = Annotated[StrictFloat | StrictInt, Field(ge=0, le=1e6, allow_inf_nan=False)]
_SETTINGS = ConfigDict(extra="forbid")


@dataclass(frozen=True, config=_SETTINGS)
class AfterWaiting:
    """An event's moment set by the queue rather than the clock: ``seconds`` after the first job listing
    ``instance_type`` began waiting for capacity (at or after the event's ``at``). How long that job waits is
    then the scenario's, however long a busy client took to create it."""

    instance_type: Name
    seconds: Seconds


@dataclass(frozen=True, config=_SETTINGS)
class CapacityEvent:
    at: Seconds
    set_capacity: dict[Name, Count]
    after_waiting: AfterWaiting | None = None


@dataclass(frozen=True, config=_SETTINGS)
class Failure:
    instance_type: Name
    after_seconds: Seconds
    reason: Annotated[StrictStr, Field(max_length=4096)]
    # What the job writes to its log just before it dies (the reason itself is always the last line).
    log_lines: tuple[Annotated[StrictStr, Field(max_length=4096)], ...] = ()


@dataclass(frozen=True, config=_SETTINGS)
class Faults:
    throttle_rate: Rate = 0.0
    error_rate: Rate = 0.0
    latency_ms: Seconds = 0.0
    # Operations answered with AccessDeniedException, as IAM would; S3's DeleteObject and DeleteObjects with its 403.
    deny: tuple[Name, ...] = ()
    # Extra delay in milliseconds for the named operations only (e.g. hold a client between two calls).
    slow_operations: dict[Name, Seconds] = field(default_factory=dict)
    # The request is carried out but the reply is lost (a 500), as when a connection drops after the
    # service acted: the client's retry of a create then meets ResourceInUse.
    lost_reply_rate: Rate = 0.0

    def __post_init__(self) -> None:
        if self.throttle_rate + self.error_rate > 1.0:
            raise ValueError("throttle_rate + error_rate must not exceed 1")


@dataclass(frozen=True, config=_SETTINGS)
class TrainingPlan:
    arn: Name
    instance_type: Name
    count: Count
    start: Seconds = 0.0
    end: Seconds | None = None
    in_use: Count = 0  # reserved instances already taken by work outside this emulator run


@dataclass(frozen=True, config=_SETTINGS)
class PlanSupply:
    """Capacity SageMaker would sell as Flexible Training Plans: ``count`` instances reservable between
    ``start`` and ``end`` (seconds after the run starts), at ``usd_per_instance_hour`` paid upfront."""

    instance_type: Name
    count: Annotated[StrictInt, Field(ge=1, le=256)]
    end: Seconds
    usd_per_instance_hour: Price
    start: Seconds = 0.0
    region: Region | None = None  # default: the scenario's
    availability_zone: Annotated[StrictStr, Field(pattern=r"^[a-z]+-[0-9a-z-]+$")] | None = None

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError("end must be later than start")


@dataclass(frozen=True, config=_SETTINGS)
class Behaviour:
    """Answers to open questions (docs/open-questions.md) that change what clients meet; docs/emulator.md, "Guesses"."""

    pending_timeout_status: Literal["Stopped", "Failed"] = "Stopped"
    default_max_pending_seconds: Seconds | None = 172800.0
    processing_without_capacity: Literal["accelerated-waits", "wait", "fail"] = "accelerated-waits"
    echo_instance_count: StrictBool = True
    reject_zero_count: StrictBool = True
    # With per-entry counts the request has no ResourceConfig.InstanceCount; whether Describe then reports
    # one (the selected entry's) is unknown. "absent" breaks clients that read it (the amazon provider's
    # print_log path); "selected" fills it in once a configuration is selected.
    instance_count_with_per_entry_counts: Literal["absent", "selected"] = "absent"
    # The API reference lists ResourceNotFound for Describe and Stop of a job that does not exist. Describe
    # is observed to answer ValidationException (the amazon provider relies on it); Stop is not known.
    describe_unknown_job: Literal["ValidationException", "ResourceNotFound"] = "ValidationException"
    stop_unknown_job: Literal["ResourceNotFound", "ValidationException"] = "ResourceNotFound"
    # How long a bought plan stays Pending (its payment settling) before it is Scheduled or Active.
    training_plan_pending_seconds: Seconds = 60.0


Percent = Annotated[StrictFloat | StrictInt, Field(ge=0, le=100, allow_inf_nan=False)]


@dataclass(frozen=True, config=_SETTINGS)
class Utilization:
    """How busy a job keeps each instance of a type, as a share of one device (CloudWatch multiplies: SageMaker
    reports GPU figures as the percent x the instance's GPUs, CPU as the percent x its vCPUs)."""

    gpus: StrictInt = 0
    vcpus: StrictInt = 1
    GPUUtilization: Percent = 0.0
    GPUMemoryUtilization: Percent = 0.0
    CPUUtilization: Percent = 0.0
    MemoryUtilization: Percent = 0.0


@dataclass(frozen=True, config=_SETTINGS)
class Scenario:
    name: Name = "custom"
    description: Annotated[StrictStr, Field(max_length=4096)] = ""
    speed: Annotated[StrictFloat, Field(gt=0, le=1e6, allow_inf_nan=False)] = 1.0
    seed: StrictInt = 0
    region: Region = "us-east-1"
    account_id: Annotated[StrictStr, Field(pattern=r"^\d{12}$")] = "123456789012"
    capacity: dict[Name, Count] = field(default_factory=dict)
    default_capacity: Count = 0
    quotas: dict[Name, Count | None] = field(default_factory=dict)  # None: unlimited
    default_quota: Count | None = None
    runtime_seconds: dict[Name, Seconds] = field(default_factory=lambda: {"default": 300.0})
    # A job whose name starts with a key runs that long on any type (the longest key that matches wins): one
    # team's day-long pretraining beside another's short nightly jobs on the same types.
    job_runtime_seconds: dict[Name, Seconds] = field(default_factory=dict)
    startup_seconds: Seconds = 60.0
    # A job that could be placed at create is selected this much later instead, per job a delay from the range
    # (lowest, highest), drawn from the seed and the job's name: capacity freeing seconds after the create, as on
    # a busy account. (0, 0): placed at create. The job is Pending meanwhile, and a capacity change does not
    # place it sooner.
    selection_delay_seconds: tuple[Seconds, Seconds] = (0.0, 0.0)
    download_seconds: Seconds = 10.0
    upload_seconds: Seconds = 10.0
    stop_seconds: Seconds = 20.0
    events: tuple[CapacityEvent, ...] = ()
    failures: tuple[Failure, ...] = ()
    # The instance metrics a job's hosts publish while it runs (CloudWatch's /aws/sagemaker/TrainingJobs and
    # ProcessingJobs), by instance type; a type not named publishes none.
    utilization: dict[Name, Utilization] = field(default_factory=dict)
    faults: Faults = Faults()
    training_plans: tuple[TrainingPlan, ...] = ()
    plan_supply: tuple[PlanSupply, ...] = ()
    algorithms: dict[Name, tuple[Name, ...]] = field(default_factory=dict)
    # S3 buckets that exist when the emulator starts, each with the (empty) objects listed: the data a
    # scenario's jobs read. Created again on every start, so they survive a restart without a state file.
    buckets: dict[BucketName, tuple[ObjectKey, ...]] = field(default_factory=dict)
    behaviour: Behaviour = Behaviour()
    # The jobs' containers, not SageMaker: many launch scripts print their environment when they start. On,
    # every job's first instance logs ``env NAME=value`` for each of its Environment entries, a rehearsal for
    # secrets a job echoes into its log.
    echo_environment: StrictBool = False
    # On-demand USD per instance-hour the Price List API answers with: Region -> kind -> instance type. A
    # scenario's prices are made up for rehearsal; they are not AWS's.
    prices: dict[Region, dict[Literal["training", "processing"], dict[Name, Price]]] = field(default_factory=dict)

    def runtime_for(self, instance_type: str, job_name: str = "") -> float:
        by_name = [prefix for prefix in self.job_runtime_seconds if job_name.startswith(prefix)]
        if by_name:
            return float(self.job_runtime_seconds[max(by_name, key=len)])
        return float(self.runtime_seconds.get(instance_type, self.runtime_seconds.get("default", 300.0)))

    def selection_delay_for(self, job_name: str) -> float:
        lowest, highest = self.selection_delay_seconds
        if highest <= lowest:
            return float(lowest)
        digest = hashlib.sha256(f"{self.seed}\0{job_name}".encode()).digest()
        return lowest + (highest - lowest) * int.from_bytes(digest[:8], "big") / 2**64

    def capacity_for(self, instance_type: str) -> int:
        return int(self.capacity.get(instance_type, self.default_capacity))

    def quota_for(self, instance_type: str) -> int | None:
        if instance_type in self.quotas:
            return self.quotas[instance_type]
        return self.default_quota


def validated(kind: Any, raw: Any, where: str) -> Any:
    """``raw`` checked against a type of this module (``Seconds``, ``dict[Name, Count]``, a dataclass)."""
    try:
        return TypeAdapter(kind).validate_python(raw)
    except ValidationError as error:
        raise ScenarioError(f"{where}: {_explain(error)}") from None


def _validated(cls: type[_T], raw: Any, where: str) -> _T:
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: expected a mapping, got {type(raw).__name__}")
    result: _T = validated(cls, raw, where)
    return result


def _explain(error: ValidationError) -> str:
    """Every problem on one line, each with its path; never the offending value (it may be huge)."""
    problems = []
    for item in error.errors(include_input=False, include_url=False):
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in item["loc"]).lstrip(".")
        message = "unknown key" if item["type"] == "extra_forbidden" else item["msg"]
        problems.append(f"{path}: {message}" if path else message)
    return "; ".join(problems)


def parse(raw: Any, where: str = "scenario") -> Scenario:
    return _validated(Scenario, raw, where)


def parse_faults(raw: Any, where: str = "faults") -> Faults:
    """Fault settings from a scenario file or from the control surface's ``POST /_emulator/faults``."""
    return _validated(Faults, raw, where)


def load(name_or_path: str) -> Scenario:
    """Load a bundled scenario by name (e.g. ``gpu-shortage``) or a YAML file by path."""
    if name_or_path in BUNDLED:
        text = resources.files(__package__).joinpath("scenarios", f"{name_or_path}.yaml").read_text()
        where = f"{name_or_path}.yaml"
    else:
        path = Path(name_or_path)
        if path.suffix not in (".yaml", ".yml") and not path.exists():
            raise ScenarioError(f"no scenario named {name_or_path!r}; bundled: {', '.join(BUNDLED)}")
        where = str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ScenarioError(f"{where}: not UTF-8 text") from None
        except OSError as error:
            raise ScenarioError(f"cannot read scenario file {where}: {error.strerror or error}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ScenarioError(f"{where}: not valid YAML: {error}") from None
    return parse(raw, where)
