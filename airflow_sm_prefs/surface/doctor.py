"""``airflow-sm-prefs doctor``: what a host needs, checked from that host, one line per check.

Run it on each kind of host after installing (worker, triggerer, API server): they share nothing but the
metadata database and the shared store, and each may have its own role, network path and pins. Every check is
harmless: SageMaker is asked about a job that cannot exist (``ValidationException`` means the action is allowed,
``AccessDenied`` that it is not), the store gets a probe object that is removed again, and nothing is created.
Creating a job is never harmless, so ``CreateTrainingJob`` / ``CreateProcessingJob`` are not tried (``skip``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from airflow_sm_prefs.storage.object_storage import shown_url

Status = Literal["ok", "warn", "fail", "skip"]
PROBE_JOB = "sm-prefs-doctor-no-such-job"
# A price table older than this is said to be refreshed: AWS changes SageMaker prices a few times a year.
STALE_PRICES_DAYS = 90
# Each SageMaker call of the checks: a host that cannot reach the endpoint hears so in seconds, not minutes.
CALL_CONFIG = {"connect_timeout": 5, "read_timeout": 10, "retries": {"total_max_attempts": 2, "mode": "standard"}}
ON_THE_STORE = frozenset({"store", "prices", "registry"})  # what a failure of the shared store explains
DENIED = {"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnrecognizedClientException"}


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str = ""

    def line(self) -> str:
        return f"{self.status:<4}  {self.check:<12}  {self.detail}" + (f"; {self.fix}" if self.fix else "")


def run(aws_conn_id: str, region: str | None) -> list[Finding]:
    """Every check, in the order a new host fails them; one that raises is its own failure, never the end."""
    findings: list[Finding] = []
    client = _checked(findings, "connection", lambda: _connection(aws_conn_id, region, findings))
    if client is not None:
        _checked(findings, "sagemaker", lambda: findings.extend(_permissions(client)))
        _checked(findings, "botocore", lambda: findings.append(_model(client)))
    _checked(findings, "airflow", lambda: findings.append(_airflow_line()))
    _checked(findings, "store", lambda: findings.append(_store()))
    store_failed = findings[-1].check == "store" and findings[-1].status == "fail"
    for check, on_the_store, probe in (
        ("prices", _prices_on_the_store, _prices),
        ("registry", _registry_on_the_store, _registry),
    ):
        # What the store holds is not read through a store that just failed: its answer is known (the store's
        # line says it), and each read would wait out another storage deadline.
        if store_failed and _answers_yes(on_the_store):
            findings.append(Finding(check, "skip", "not checked: the store failed (see its line)"))
        else:
            _checked(findings, check, lambda probe=probe: findings.append(probe()))  # type: ignore[misc]
    return findings


def _checked(findings: list[Finding], check: str, probe: Callable[[], Any]) -> Any:
    from airflow_sm_prefs.storage import object_storage, store_errors

    try:
        return probe()
    except Exception as error:  # each check says its own failure in one line
        problem = store_errors.explained(error) if check in ON_THE_STORE else None
        said = problem.line(object_storage.store_named()) if problem else f"{type(error).__name__}: {error}"
        findings.append(Finding(check, "fail", said.splitlines()[0][:300]))
        return None


def _answers_yes(question: Callable[[], bool]) -> bool:
    """False when the question cannot be answered: the check itself then says what is wrong."""
    try:
        return question()
    except Exception:
        return False


def _connection(aws_conn_id: str, region: str | None, findings: list[Finding]) -> Any:
    from airflow.sdk import BaseHook

    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    # Airflow logs a traceback for an extra that is not JSON, and goes on without it: said below in one line.
    parsing = logging.getLogger("airflow.sdk.definitions.connection")
    level = parsing.level
    parsing.setLevel(logging.CRITICAL)
    try:
        connection = BaseHook.get_connection(aws_conn_id)
    except Exception as error:
        if type(error).__name__ != "AirflowNotFoundException":
            raise
        findings.append(
            Finding(
                "connection",
                "fail",
                f"{aws_conn_id!r} does not exist",
                "create it (or pass --aws-conn-id); the operators would fall back to the host's default credentials",
            )
        )
        return None
    finally:
        parsing.setLevel(level)
    if connection.extra:
        try:
            json.loads(connection.extra)
        except ValueError as error:  # Airflow would log a traceback and go on with no extra at all
            findings.append(
                Finding(
                    "connection",
                    "fail",
                    f"{aws_conn_id!r}: its extra is not valid JSON ({error})",
                    'correct the extra (a JSON object such as {"region_name": "us-east-1"})',
                )
            )
            return None
    hook = SageMakerPreferenceHook(aws_conn_id=aws_conn_id, region_name=region, config=CALL_CONFIG)
    if not hook.conn_region_name:
        findings.append(
            Finding("connection", "fail", f"{aws_conn_id!r} names no Region", "set region_name in its extra")
        )
        return None
    endpoint = hook.conn_config.get_service_endpoint_url(service_name="sagemaker")
    endpoint = shown_url(endpoint) if endpoint else "AWS's own endpoint"
    findings.append(Finding("connection", "ok", f"{aws_conn_id!r}, Region {hook.conn_region_name}, {endpoint}"))
    return hook.conn


def _permissions(client: Any) -> list[Finding]:
    """Each SageMaker action the package calls, tried on a job that cannot exist."""
    from botocore.exceptions import ClientError

    arn = f"arn:aws:sagemaker:{client.meta.region_name}:000000000000:training-job/{PROBE_JOB}"
    probes: dict[str, Callable[[], Any]] = {
        "DescribeTrainingJob": lambda: client.describe_training_job(TrainingJobName=PROBE_JOB),
        "DescribeProcessingJob": lambda: client.describe_processing_job(ProcessingJobName=PROBE_JOB),
        "ListTrainingJobs": lambda: client.list_training_jobs(MaxResults=1),
        "ListProcessingJobs": lambda: client.list_processing_jobs(MaxResults=1),
        "StopTrainingJob": lambda: client.stop_training_job(TrainingJobName=PROBE_JOB),
        "StopProcessingJob": lambda: client.stop_processing_job(ProcessingJobName=PROBE_JOB),
        "ListTags": lambda: client.list_tags(ResourceArn=arn),
    }
    denied, unanswered = [], []
    for action, probe in probes.items():
        try:
            probe()
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            if code in DENIED:
                denied.append(f"sagemaker:{action}")
            elif code in ("ThrottlingException", "InternalFailure", "ServiceUnavailable"):
                unanswered.append(f"{action} ({code})")
    findings = []
    if denied:
        findings.append(
            Finding(
                "sagemaker",
                "fail",
                f"denied: {', '.join(denied)}",
                "allow them in the role's policy (deploy/iam-policy.json lists what the package calls)",
            )
        )
    elif unanswered:
        findings.append(Finding("sagemaker", "warn", f"no answer to {', '.join(unanswered)}", "run doctor again"))
    else:
        findings.append(Finding("sagemaker", "ok", f"{len(probes)} actions allowed ({', '.join(probes)})"))
    findings.append(
        Finding("sagemaker", "skip", "CreateTrainingJob, CreateProcessingJob not tried: creating is never harmless")
    )
    return findings


def _model(client: Any) -> Finding:
    from airflow_sm_prefs.sagemaker import botocore_model

    version = botocore_model.installed_botocore()
    members = client.meta.service_model.shape_for("ResourceConfig").members
    if "InstancePreferences" not in members:
        return Finding(
            "botocore",
            "fail",
            f"botocore {version} does not know ResourceConfig.InstancePreferences",
            "upgrade botocore, or let the package supply the shapes (docs/platforms.md)",
        )
    supplied = botocore_model.model_needs_extras(version)
    return Finding(
        "botocore",
        "ok",
        f"botocore {version}: InstancePreferences " + ("supplied by the package" if supplied else "in its own model"),
    )


def _airflow_line() -> Finding:
    from airflow import __version__

    from airflow_sm_prefs.platform import airflow_lines

    missing = []
    if not airflow_lines.has_task_state_store():
        missing.append("no task state store (a later try finds its job through XCom and SageMaker's tags)")
    if not airflow_lines.triggerer_calls_on_kill():
        missing.append("a deferred task's kill stops its job from the worker's cleanup, not the trigger")
    if missing:
        return Finding("airflow", "ok", f"Airflow {__version__}: {'; '.join(missing)}")
    return Finding("airflow", "ok", f"Airflow {__version__}: everything the package uses")


def _prices_on_the_store() -> bool:
    from airflow_sm_prefs.reference import prices
    from airflow_sm_prefs.storage import object_storage

    return not object_storage.on_local_disk(prices.user_table_path())


def _registry_on_the_store() -> bool:
    from airflow_sm_prefs.preflight import certification

    return certification.is_remote(certification.registry_path(None))


def _store() -> Finding:
    """The shared store (or the local folder when none is set): reachable, readable and writable, all within one
    storage deadline whatever the store does."""
    from airflow_sm_prefs.storage import bounded, object_storage

    url = object_storage.setting("storage")
    if url is None:
        return Finding(
            "store",
            "warn",
            "[sm_prefs] storage is not set: the ledger, prices and registry are on this host's disk",
            "set it to one location every host shares (s3://bucket/prefix) unless this is the only host",
        )
    root = object_storage.place(url, object_storage.setting("storage_conn_id"), "[sm_prefs] storage")
    url = shown_url(url)  # what the lines print
    probe = root / f".doctor-{socket.gethostname()}-{os.getpid()}"
    data = b"airflow-sm-prefs doctor probe"

    def round_trip() -> Finding:
        missing = object_storage.missing_bucket_said(root, "[sm_prefs] storage")
        if missing is not None:
            return Finding("store", "fail", shown_url(missing), object_storage.MISSING_BUCKET_FIX)
        object_storage.make_folder(root)
        probe.write_bytes(data)
        try:
            if probe.read_bytes() != data:
                return Finding("store", "fail", f"{url}: a probe object read back different bytes", "check the store")
        finally:
            probe.unlink()
        return Finding("store", "ok", f"{url}: written, read back and removed a probe object")

    return bounded.within(f"the doctor's probe {object_storage.shown(probe)}", round_trip)


def _prices() -> Finding:
    import datetime as dt

    from airflow_sm_prefs.reference import prices
    from airflow_sm_prefs.storage import object_storage, store_errors

    try:
        prices.users_table()
    except Exception as error:  # what a task would leave out, with a warning, to price with the shipped table
        problem = store_errors.explained(error)
        said = problem.line(object_storage.store_named()) if problem else f"{type(error).__name__}: {error}"
        return Finding(
            "prices",
            "warn",
            f"the team's price table could not be read ({said.splitlines()[0][:200]}); tasks price with the "
            "shipped table alone",
            "fix what the store's line says, or the table",
        )
    table = prices.current()
    if not table.entries:
        return Finding(
            "prices",
            "warn",
            "no prices: cost estimates and cost caps see every cost as unknown",
            "run `airflow-sm-prefs prices refresh`, or give a table of your own ([sm_prefs] price_table)",
        )
    dated = [source for source in table.sources if source.retrieved]
    if not dated:
        return Finding("prices", "warn", "no price table with a date", "run `airflow-sm-prefs prices refresh`")
    newest = max(dated, key=lambda source: str(source.retrieved))
    age = (dt.date.today() - dt.date.fromisoformat(str(newest.retrieved)[:10])).days
    detail = f"{len(table.entries)} prices, newest from {newest.source} of {newest.retrieved} ({age} days old)"
    if age > STALE_PRICES_DAYS:
        return Finding("prices", "warn", detail, "run `airflow-sm-prefs prices refresh`")
    return Finding("prices", "ok", detail)


def _registry() -> Finding:
    from airflow_sm_prefs.preflight import certification

    where = certification.registry_path(None)
    try:
        registry = certification.read(where)
    except certification.RegistryError as error:
        return Finding("registry", "fail", str(error).splitlines()[0][:300], "correct the file or write it again")
    if not registry:
        return Finding("registry", "ok", f"{where}: none yet (certified= is off until a certification DAG writes it)")
    configurations = sum(len(entries) for entries in registry.values())
    return Finding("registry", "ok", f"{where}: {len(registry)} workload(s), {configurations} configuration(s)")


def render(findings: list[Finding], output_format: str) -> str:
    """The findings, every URL's password replaced whatever a check quoted (an endpoint in botocore's error)."""
    if output_format == "json":
        return shown_url(json.dumps([asdict(finding) for finding in findings], indent=2))
    return shown_url("\n".join(finding.line() for finding in findings))
