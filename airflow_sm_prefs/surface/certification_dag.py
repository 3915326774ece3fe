"""``certification_dag``: benchmark every candidate configuration once, keep the ones that pass.

The DAG runs the workload on each candidate as a single-entry job, all in parallel, each with its own pending
bound; checks each finished run (``validate``, a callable given the job's record, e.g. reading a metric from
its output); then writes the candidates that completed and passed to the certification registry, with their
measured run time, image and who certified them. A candidate that got no capacity, failed, or did not pass
is reported with why, and never written.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from airflow_sm_prefs.sagemaker import job_status

CheckResult = bool | str | Mapping[str, Any] | None
# validate(record) -> True / None: passed; False or a text: failed (the text says why); a mapping:
# {"passed": bool, "reason": str, "throughput": {"value": float, "unit": str}}. An exception fails it too.
Validate = Callable[[dict[str, Any]], CheckResult]


def _slug(instance_type: str, count: int) -> str:
    return re.sub(r"[^a-z0-9]+", "_", f"{instance_type.removeprefix('ml.')}_x{count}").strip("_")


def _image(kind: str, request: Mapping[str, Any]) -> str:
    from airflow_sm_prefs.request.jobs import KINDS

    section, field = KINDS[kind].image_path
    return str((request.get(section) or {}).get(field) or "")


def _image_run(kind: str, job_name: str, aws_conn_id: str) -> str:
    """The image the job ran, as SageMaker describes it (the DAG's config may hold a template)."""
    from airflow_sm_prefs.request.jobs import KINDS
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    return _image(kind, SageMakerPreferenceHook(aws_conn_id=aws_conn_id).describe_job(KINDS[kind], job_name))


def verdict(record: Mapping[str, Any] | None, validate: Validate | None) -> dict[str, Any]:
    """Whether a candidate's run passed: it completed, and ``validate`` (if any) accepts its record."""
    if record is None:
        return {"passed": False, "reason": "the job left no record (it was never created, or its task failed first)"}
    if not job_status.succeeded(record.get("status")):
        why = record.get("failure_reason") or record.get("secondary_status") or "no reason given"
        if record.get("selected_instance_type") is None:
            return {"passed": False, "reason": f"no capacity: the job ended {record.get('status')} ({why})"}
        if record.get("failure_cause") == "configuration":
            return {
                "passed": False,
                "reason": f"the request itself failed, which says nothing of this configuration: {why} (fix the "
                "request and run the certification again)",
            }
        return {"passed": False, "reason": f"the job ended {record.get('status')} after starting: {why}"}
    if validate is None:
        return {"passed": True, "reason": "completed"}
    try:
        result = validate(dict(record))
    except Exception as error:  # the user's check failing is that candidate's failure, not the DAG's
        return {"passed": False, "reason": f"validate raised {type(error).__name__}: {error}"}
    if result is None or result is True:
        return {"passed": True, "reason": "completed and validated"}
    if result is False or isinstance(result, str):
        return {"passed": False, "reason": result or "validate returned False"}
    checked = dict(result)
    return {
        "passed": bool(checked.get("passed", True)),
        "reason": str(checked.get("reason") or ("validated" if checked.get("passed", True) else "not validated")),
        "throughput": checked.get("throughput"),
    }


def certification_dag(
    dag_id: str,
    *,
    workload: str,
    config: dict[str, Any],
    candidates: Sequence[Any],
    registry: str | None = None,
    kind: Literal["training", "processing"] = "training",
    validate: Validate | None = None,
    max_pending: dt.timedelta | int = dt.timedelta(hours=2),
    aws_conn_id: str = "aws_default",
    check_interval: float = 60.0,
    operator_kwargs: Mapping[str, Any] | None = None,
    **dag_kwargs: Any,
) -> Any:
    """A DAG that certifies ``candidates`` (``(type, count)`` pairs or ``InstancePreference``) for
    ``workload`` by running ``config`` on each, and records the ones that pass in ``registry`` (default:
    ``[sm_prefs] certification_registry``, else ``$AIRFLOW_HOME/sm_prefs/certified.yaml``)."""
    from airflow.sdk import DAG, task

    from airflow_sm_prefs.preflight import certification
    from airflow_sm_prefs.request.friendly_preferences import to_api_entries
    from airflow_sm_prefs.request.preferences import RequestValidationError
    from airflow_sm_prefs.surface.operators import (
        SageMakerPreferenceProcessingOperator,
        SageMakerPreferenceTrainingOperator,
    )

    # Judged before any job can run: a workload the registry cannot hold would be found only after every
    # candidate's benchmark was paid for, and two equal candidates would be two tasks of one id.
    problems = []
    if not certification.is_workload_name(workload):
        problems.append(f"workload must name the registry's workload (text), got {workload!r:.60}")
    entries = to_api_entries(candidates)
    if not entries:
        problems.append("certification_dag needs at least one candidate")
    missing = [e["InstanceType"] for e in entries if not isinstance(e.get("InstanceCount"), int)]
    if missing:
        problems.append(f"give each candidate a count: {', '.join(missing)}")
    listed = Counter((e["InstanceType"], e.get("InstanceCount")) for e in entries)
    problems.extend(f"{count} x {kind} is a candidate twice" for (kind, count), times in listed.items() if times > 1)
    if problems:
        raise RequestValidationError(problems)
    path = certification.registry_path(registry)
    operator = next(
        op
        for op in (SageMakerPreferenceTrainingOperator, SageMakerPreferenceProcessingOperator)
        if op.job_kind.name == kind
    )
    runs = {}
    dag_kwargs.setdefault("schedule", None)
    dag_kwargs.setdefault("tags", ["sm-prefs-certification"])
    with DAG(dag_id, **dag_kwargs) as dag:
        for entry in entries:
            slug = _slug(entry["InstanceType"], entry["InstanceCount"])
            runs[slug] = (
                entry,
                operator(
                    task_id=f"run_{slug}",
                    config=config,
                    preferences=[entry],
                    max_pending=max_pending,
                    aws_conn_id=aws_conn_id,
                    check_interval=check_interval,
                    retries=0,  # a benchmark that needed a retry did not pass
                    resubmit_after_failure=False,
                    **dict(operator_kwargs or {}),
                ),
            )

        @task(trigger_rule="all_done")
        def record_passing(**context: Any) -> dict[str, Any]:
            ti = context["ti"]
            run_id = context["run_id"]
            passed, results = [], {}
            for entry, run in runs.values():
                record = ti.xcom_pull(task_ids=run.task_id) or ti.xcom_pull(task_ids=run.task_id, key="record")
                result = verdict(record, validate)
                label = f"{entry['InstanceCount']} x {entry['InstanceType']}"
                results[label] = {"passed": result["passed"], "reason": result["reason"]}
                if not result["passed"]:
                    print(f"Not certified: {label}: {result['reason']}")
                    continue
                throughput = result.get("throughput")
                image = _image_run(kind, record["job_name"], aws_conn_id)
                passed.append(
                    certification.CertifiedConfiguration(
                        instance_type=entry["InstanceType"],
                        instance_count=entry["InstanceCount"],
                        run_seconds=float(record["run_seconds"]),
                        image_uri=image,
                        image_digest=image.split("@", 1)[1] if "@" in image else None,
                        throughput=certification.Throughput(float(throughput["value"]), str(throughput["unit"]))
                        if throughput
                        else None,
                        certified_at=dt.datetime.now(dt.UTC).date().isoformat(),
                        certified_by=f"{dag_id} / {run_id}",
                        notes=f"job {record.get('job_name')}: {result['reason']}",
                    )
                )
                print(f"Certified: {label}: ran {record['run_seconds']:.0f} s ({result['reason']})")
            if passed:
                certification.record(path, workload, passed)
            print(f"{len(passed)} of {len(runs)} candidate(s) certified for {workload!r} in {path}")
            return {"registry": path, "workload": workload, "candidates": results}

        written = record_passing()
        for _, run in runs.values():
            run >> written
    return dag
