"""``SageMakerPreferenceTrainingOperator`` and ``SageMakerPreferenceProcessingOperator``.

Both are the same operator over a different ``JobKind``: validate (at parse time when static, again after
rendering), claim a job name, create or reattach, then wait deferred (or blocking), announcing the chosen
configuration as soon as SageMaker selects it and returning one flat record at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import pendulum
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_sm_prefs import attempts, progress, record, tagging
from airflow_sm_prefs import preferences as rules
from airflow_sm_prefs.jobs import PROCESSING, TERMINAL_STATUSES, TRAINING, JobKind
from airflow_sm_prefs.links import SageMakerConsoleLink, SageMakerLogsLink, escape_log_group

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.hooks import SageMakerPreferenceHook

DEFAULT_PENDING = timedelta(days=2)  # no documented service default; the training-plan limit is two days
DEFAULT_RUNTIME = timedelta(days=1)  # SageMaker's default MaxRuntimeInSeconds
DEADLINE_SLACK = timedelta(hours=1)  # provisioning, upload and stop time around the pending and run limits
DEFER_TIMEOUT_MARGIN = timedelta(minutes=15)


class NoCapacityError(AirflowException):
    """SageMaker never found capacity for any preference within the allowed wait."""


def _fail(message: str) -> NoReturn:
    """Bad input or a rejected request: retrying cannot help, so fail without retries."""
    raise AirflowFailException(message)


class SageMakerPreferenceBaseOperator(BaseOperator):
    """Shared implementation; use the training or processing subclass.

    :param config: the full ``CreateTrainingJob`` / ``CreateProcessingJob`` request (templated). Integer
        fields rendered by Jinja as strings, including every ``InstancePreferences[].InstanceCount``, are cast.
    :param preferences: the preference list in friendly form (templated): ``InstancePreference`` objects,
        dicts (``instance_type``, ``instance_count``, ``training_plan_arn``, or API field names), plain type
        names, or ``(type, count)`` pairs. Merged into ``config``; give the list in one place only.
    :param max_pending: how long the job may wait for capacity (``timedelta`` or seconds). Training: becomes
        ``StoppingCondition.MaxPendingTimeInSeconds`` (enforced by SageMaker, 30 min to 28 days; only for lists
        with an accelerated type). Processing: enforced by the operator, which stops the job and fails.
    :param job_name: job name (templated). Default: the name in ``config``, else one derived from the DAG,
        task, run and map index. Fixed per task instance; later generations get ``-r2``, ``-r3``, ...
    :param aws_conn_id: Airflow AWS connection (endpoint_url, role, region as with the amazon provider).
    :param region_name: AWS Region; default: the connection's.
    :param deferrable: wait in the triggerer (default) or block a worker slot while polling.
    :param check_interval: base seconds between status checks; queued jobs are checked half as often and
        imminent changes four times as often.
    :param wait_timeout: absolute limit on the whole wait from first submission (default: the pending limit +
        ``MaxRuntimeInSeconds`` + 1 hour). On expiry the job is stopped (``stop_on_timeout``) and the task fails.
    :param stop_on_kill: stop the job when the task is marked failed/success, cleared, or killed.
    :param stop_on_timeout: stop the job when ``wait_timeout`` or the processing ``max_pending`` expires.
    :param resubmit_after_failure: on a retry after the job ended ``Failed``/``Stopped``, launch the next
        generation (default) instead of failing at once.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = ("config", "preferences", "job_name")
    template_fields_renderers: ClassVar[dict[str, str]] = {"config": "json", "preferences": "json"}
    operator_extra_links = (SageMakerConsoleLink(), SageMakerLogsLink())
    ui_color = "#d6e9f8"

    def __init__(
        self,
        *,
        config: dict[str, Any] | str,
        preferences: Sequence[rules.PreferenceLike] | str | None = None,
        max_pending: timedelta | int | None = None,
        job_name: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        deferrable: bool = True,
        check_interval: float = 60.0,
        wait_timeout: timedelta | int | None = None,
        stop_on_kill: bool = True,
        stop_on_timeout: bool = True,
        resubmit_after_failure: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.preferences = self._friendly(preferences)
        self.max_pending = rules.max_pending_seconds(max_pending)
        self.job_name = job_name
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.deferrable = deferrable
        self.check_interval = float(check_interval)
        if self.check_interval <= 0:
            raise ValueError("check_interval must be positive")
        self.wait_timeout = rules.max_pending_seconds(wait_timeout)
        self.stop_on_kill = stop_on_kill
        self.stop_on_timeout = stop_on_timeout
        self.resubmit_after_failure = resubmit_after_failure
        self._active_job: str | None = None
        self._resolved_region: str | None = None
        self._request: dict[str, Any] | None = None
        self._lineage_description: dict[str, Any] | None = None
        if not rules.is_templated(config):
            # Static values are judged now, so a bad list fails the DAG import, not the 2 a.m. run.
            for warning in self._prepare():
                self.log.warning(warning)

    @staticmethod
    def _friendly(value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        return rules.to_api_entries(value)

    # -- request ----------------------------------------------------------------------------------------

    def _prepare(self) -> list[str]:
        """Merge, cast and validate; raises PreferenceValidationError with every problem found."""
        config = self.config
        if isinstance(config, str):
            config = _parse_json(config, "config")
        friendly = self.preferences
        if isinstance(friendly, str) and not rules.is_templated(friendly):
            friendly = _parse_json(friendly, "preferences")
        request = self.job_kind.prepare(config, friendly, self.max_pending)
        if self.max_pending is not None and not self.job_kind.service_enforces_pending_limit and self.max_pending <= 0:
            raise rules.PreferenceValidationError(["max_pending must be positive"])
        warnings = self.job_kind.validate(request)
        self._request = request
        return warnings

    def _rendered_request(self, hook: SageMakerPreferenceHook) -> dict[str, Any]:
        try:
            warnings = self._prepare()
            assert self._request is not None
            _check_instance_types(self.job_kind, self._request, hook)
        except rules.PreferenceValidationError as error:
            _fail(f"{error} (no SageMaker job was created)")
        for warning in warnings:
            self.log.warning(warning)
        return self._request

    def _hook(self) -> SageMakerPreferenceHook:
        from airflow_sm_prefs.hooks import SageMakerPreferenceHook

        hook = SageMakerPreferenceHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        self._resolved_region = self.region_name or hook.conn_region_name
        return hook

    # -- submission -------------------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        hook = self._hook()
        request = self._rendered_request(hook)
        kind = self.job_kind
        ledger = attempts.JobLedger.from_context(context)
        ti = context["ti"]
        try_number = int(getattr(ti, "try_number", 1) or 1)
        raw_map_index = getattr(ti, "map_index", None)
        map_index = -1 if raw_map_index is None else int(raw_map_index)
        base_name = (
            self.job_name
            or request.get(kind.name_field)
            or attempts.default_base_name(ti.dag_id, ti.task_id, ti.run_id, map_index)
        )
        claim = ledger.load()
        if claim is not None and claim.base_name != base_name:
            claim = None  # the task now renders a different name: it is a different job
        live = self._describe_or_none(hook, claim.job_name) if claim else None
        max_tries = getattr(ti, "max_tries", None)
        first_try = attempts.first_try_since_clear(int(max_tries), self.retries or 0) if max_tries is not None else 1
        decision = attempts.decide(
            claim, base_name, live.get(kind.status_field) if live else None, first_try, self.resubmit_after_failure
        )
        self.log.info("SageMaker %s job %s: %s (%s)", kind.name, decision.job_name, decision.action, decision.reason)
        if decision.action == "fail":
            if live is None:
                _fail(decision.reason)
            # A retry starts with no XCom: record the job again, and say again why it ended.
            result = record.build(kind, live, self._region())
            context["ti"].xcom_push(key="record", value=result)
            _fail(f"{_outcome_error(kind, result, live)} Not launched again: {decision.reason}.")
        if decision.action == "supersede" and claim is not None:
            self._stop(hook, claim.job_name)
        submitted_at = claim.submitted_at if claim and decision.action in ("reattach", "finished") else None
        claim = ledger.save(
            attempts.JobClaim(
                job_name=decision.job_name,
                base_name=base_name,
                generation=decision.generation,
                phase=attempts.SUBMITTING,
                try_number=try_number,
                submitted_at=submitted_at or pendulum.now("UTC").isoformat(),
                job_kind=kind.name,
                aws_conn_id=self.aws_conn_id,
                region_name=self._resolved_region,
                stop_on_kill=self.stop_on_kill,
            )
        )
        self._active_job = decision.job_name
        if decision.action in ("create", "supersede"):
            ours = tagging.task_instance_tags(ti.dag_id, ti.task_id, ti.run_id, map_index)
            tags = tagging.with_task_instance_tags(request.get("Tags"), ours)
            self._create(hook, {**request, kind.name_field: decision.job_name, "Tags": tags})
        claim = ledger.save(claim.advanced(attempts.SUBMITTED))
        return self._follow(context, hook, ledger, claim, request)

    def _follow(
        self,
        context: Context,
        hook: SageMakerPreferenceHook,
        ledger: attempts.JobLedger,
        claim: attempts.JobClaim,
        request: Mapping[str, Any],
    ) -> Any:
        """Wait for the claimed job: finish at once if it ended, announce a selection, then defer or block."""
        kind = self.job_kind
        self._active_job = claim.job_name
        self._persist_links(context, hook, claim.job_name)
        description = self._describe(hook, claim.job_name)
        if description.get(kind.status_field) in TERMINAL_STATUSES:
            return self._finish(context, description, announced=False)
        announced = False
        if kind.selected(description) is not None:
            self._announce(context, description)
            announced = True
        deadline, pending_deadline = self._deadlines(request, claim.submitted_at)
        if not self.deferrable:
            ledger.save(claim.advanced(attempts.BLOCKING))
            return self._wait_blocking(context, hook, description, announced, deadline, pending_deadline)
        ledger.save(claim.advanced(attempts.DEFERRED))
        self._defer(claim.job_name, description, announced, deadline, pending_deadline)

    def _create(self, hook: SageMakerPreferenceHook, request: dict[str, Any]) -> None:
        from botocore.exceptions import ClientError, ParamValidationError

        name = request[self.job_kind.name_field]
        try:
            getattr(hook.conn, self.job_kind.create_method)(**request)
        except ParamValidationError as error:
            _fail(f"botocore rejected the request before sending it: {error} (no SageMaker job was created)")
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code")
            message = error.response.get("Error", {}).get("Message")
            if code == "ResourceInUse":
                self.log.info("SageMaker job %s already exists (an earlier attempt created it); reattaching", name)
                return
            if code in ("ValidationException", "ResourceLimitExceeded", "ResourceNotFound"):
                _fail(f"SageMaker rejected {self.job_kind.name} job {name}: {code}: {message}")
            raise
        self.log.info("Created SageMaker %s job %s", self.job_kind.name, name)

    def _describe(self, hook: SageMakerPreferenceHook, job_name: str) -> dict[str, Any]:
        response = getattr(hook.conn, self.job_kind.describe_method)(**{self.job_kind.name_field: job_name})
        return dict(record.jsonable(response))

    def _describe_or_none(self, hook: SageMakerPreferenceHook, job_name: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        try:
            return self._describe(hook, job_name)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("ValidationException", "ResourceNotFound"):
                return None
            raise

    def _latest(self, hook: SageMakerPreferenceHook, job_name: str, fallback: Mapping[str, Any]) -> Mapping[str, Any]:
        """A fresh description for the record; the last one seen if SageMaker cannot be asked right now."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._describe(hook, job_name)
        except (BotoCoreError, ClientError) as error:
            self.log.info("Could not describe %s for its record (%s); recording the last status seen", job_name, error)
            return fallback

    def _stop(self, hook: SageMakerPreferenceHook, job_name: str) -> None:
        from airflow_sm_prefs.hooks import stop_job

        stop_job(hook, self.job_kind, job_name, self.log)

    def _persist_links(self, context: Context, hook: SageMakerPreferenceHook, job_name: str) -> None:
        region = hook.conn_region_name
        partition = hook.conn_partition
        SageMakerConsoleLink.persist(
            context,
            self,
            region_name=region,
            aws_partition=partition,
            job_name=job_name,
            console_fragment=self.job_kind.console_fragment,
        )
        SageMakerLogsLink.persist(
            context,
            self,
            region_name=region,
            aws_partition=partition,
            job_name=job_name,
            escaped_log_group=escape_log_group(self.job_kind.log_group),
        )

    # -- waiting ----------------------------------------------------------------------------------------

    def _deadlines(self, request: Mapping[str, Any], submitted_at: str | None) -> tuple[str, str | None]:
        start = record.to_time(submitted_at) or pendulum.now("UTC")
        stopping = request.get("StoppingCondition") or {}
        runtime = timedelta(seconds=stopping.get("MaxRuntimeInSeconds") or DEFAULT_RUNTIME.total_seconds())
        if self.job_kind.service_enforces_pending_limit:
            pending_seconds = stopping.get("MaxPendingTimeInSeconds")
            pending = timedelta(seconds=pending_seconds) if pending_seconds else DEFAULT_PENDING
            pending_deadline = None
        else:
            pending = timedelta(seconds=self.max_pending) if self.max_pending else DEFAULT_PENDING
            pending_deadline = (start + pending).isoformat() if self.max_pending else None
        if self.wait_timeout is not None:
            deadline = start + timedelta(seconds=self.wait_timeout)
        else:
            deadline = start + pending + runtime + DEADLINE_SLACK
        return deadline.isoformat(), pending_deadline

    def _defer(
        self,
        job_name: str,
        description: Mapping[str, Any],
        announced: bool,
        deadline: str,
        pending_deadline: str | None,
    ) -> NoReturn:
        from airflow_sm_prefs.triggers import SageMakerPreferenceJobTrigger
        from airflow_sm_prefs.watcher import KnownState

        trigger = SageMakerPreferenceJobTrigger(
            job_name=job_name,
            job_kind=self.job_kind.name,
            aws_conn_id=self.aws_conn_id,
            region_name=self.region_name,
            wait_for="completion" if announced else "selection",
            deadline=deadline,
            pending_deadline=pending_deadline,
            poll_interval=self.check_interval,
            stop_on_kill=self.stop_on_kill,
            known_state=KnownState.of(self.job_kind, dict(description)).to_json(),
        )
        remaining = (record.to_time(deadline) or pendulum.now("UTC")) - pendulum.now("UTC")
        # A plain timedelta: the Task SDK's msgpack channel cannot encode pendulum's Duration.
        timeout = timedelta(seconds=remaining.total_seconds()) + DEFER_TIMEOUT_MARGIN
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timeout)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        ledger = attempts.JobLedger.from_context(context)
        claim = ledger.load()
        job_name = event["job_name"]
        if claim is not None and claim.job_name != job_name:
            # Airflow delivered another trigger's event (seen with SQLite, which reuses a deleted trigger's
            # id): the job it reports is not the one this task instance follows now, so keep following ours.
            self.log.warning(
                "Ignoring an event about SageMaker job %s: this task instance follows job %s", job_name, claim.job_name
            )
            hook = self._hook()
            return self._follow(context, hook, ledger, claim, self._rendered_request(hook))
        if claim is not None:
            claim = ledger.save(claim.advanced(attempts.RESUMED))
        status = event.get("status")
        announced = bool(event.get("announced"))
        deadline, pending_deadline = event.get("deadline"), event.get("pending_deadline")
        self._active_job = job_name
        description = event.get("description") or {}
        if status == "selected":
            self._announce(context, description)
            if claim is not None:
                ledger.save(claim.advanced(attempts.DEFERRED))
            self._defer(job_name, description, True, deadline or self._deadlines({}, None)[0], pending_deadline)
        if status == "finished":
            return self._finish(context, description, announced)
        hook = self._hook()
        if not description:
            # A trigger that saw no change since the deferral (a quiet queue) sends no description.
            description = self._latest(hook, job_name, description)
        if status == "pending_timeout":
            self._give_up_waiting(context, hook, job_name, description)
        if status == "timeout":
            self._time_out(context, hook, job_name, description)
        raise RuntimeError(f"lost track of SageMaker job {job_name}: {event.get('message')}; a retry reattaches")

    def _wait_blocking(
        self,
        context: Context,
        hook: SageMakerPreferenceHook,
        description: dict[str, Any],
        announced: bool,
        deadline: str,
        pending_deadline: str | None,
    ) -> Any:
        from airflow_sm_prefs.watcher import backoff_seconds, is_transient, signature

        kind = self.job_kind
        name = description[kind.name_field]
        last = signature(kind, description)
        self.log.info(progress.status_line(kind, description))
        failures = 0
        while True:
            now = pendulum.now("UTC")
            patience = record.to_time(pending_deadline)
            if patience is not None and kind.selected(description) is None and now >= patience:
                self._give_up_waiting(context, hook, name, description)
            limit = record.to_time(deadline)
            if limit is not None and now >= limit:
                self._time_out(context, hook, name, description)
            time.sleep(self.check_interval if kind.selected(description) else self.check_interval * 2)
            try:
                description = self._describe(hook, name)
                failures = 0
            except Exception as error:
                if not is_transient(error)[0]:
                    raise
                failures += 1
                self.log.info("Transient error describing %s (%s); will retry", name, error)
                time.sleep(backoff_seconds(self.check_interval, failures))
                continue
            current = signature(kind, description)
            if current != last:
                last = current
                self.log.info(progress.status_line(kind, description))
            if not announced and kind.selected(description) is not None:
                self._announce(context, description)
                announced = True
            if description.get(kind.status_field) in TERMINAL_STATUSES:
                return self._finish(context, description, announced)

    def on_kill(self) -> None:
        """The blocking wait was killed (SIGTERM): stop the job rather than leave it running unobserved."""
        if self._active_job and self.stop_on_kill:
            self._stop(self._hook(), self._active_job)

    # -- outcomes ---------------------------------------------------------------------------------------

    def _region(self) -> str | None:
        if self._resolved_region is None:
            self._hook()
        return self._resolved_region

    def _announce(self, context: Context, description: Mapping[str, Any]) -> None:
        kind = self.job_kind
        line = progress.selection_line(kind, description)
        if line is None:
            return
        self.log.info(line)
        chosen = record.selection(kind, description, self._region())
        context["ti"].xcom_push(key="selection", value=chosen)
        _emit_selection_metrics(kind, chosen or {})

    @staticmethod
    def _mark_finished(context: Context) -> None:
        """This try reached the job's outcome: a later try of this task instance is a user's new request."""
        ledger = attempts.JobLedger.from_context(context)
        claim = ledger.load()
        if claim is not None:
            ledger.save(claim.advanced(attempts.FINISHED))

    def _finish(self, context: Context, description: Mapping[str, Any], announced: bool) -> dict[str, Any]:
        kind = self.job_kind
        self._mark_finished(context)
        if not announced:
            self._announce(context, description)
        result = record.build(kind, description, self._region())
        self._lineage_description = dict(description)
        status = result["status"]
        self.log.info(
            "SageMaker %s job %s ended %s: %s",
            kind.name,
            result["job_name"],
            status,
            json.dumps(
                {
                    k: result[k]
                    for k in (
                        "selected_instance_type",
                        "selected_instance_count",
                        "selected_rank",
                        "pending_seconds",
                        "run_seconds",
                        "billable_seconds",
                    )
                }
            ),
        )
        if status == "Completed":
            return result
        context["ti"].xcom_push(key="record", value=result)
        raise _outcome_error(kind, result, description)

    def _give_up_waiting(
        self, context: Context, hook: SageMakerPreferenceHook, job_name: str, description: Mapping[str, Any]
    ) -> NoReturn:
        waited = progress.format_seconds(record.pending_seconds(self.job_kind, description))
        message = (
            f"SageMaker {self.job_kind.name} job {job_name} got no capacity within max_pending ({waited} waited) "
            f"for any of: {record.describe_preferences(self.job_kind, description)}"
        )
        self._abandon(context, hook, job_name, description, NoCapacityError, message, "queued")

    def _time_out(
        self, context: Context, hook: SageMakerPreferenceHook, job_name: str, description: Mapping[str, Any]
    ) -> NoReturn:
        message = (
            f"SageMaker {self.job_kind.name} job {job_name} was still "
            f"{description.get(self.job_kind.status_field)} when wait_timeout expired"
        )
        self._abandon(context, hook, job_name, description, AirflowException, message, "running")

    def _abandon(
        self,
        context: Context,
        hook: SageMakerPreferenceHook,
        job_name: str,
        description: Mapping[str, Any],
        error: type[AirflowException],
        message: str,
        left: str,
    ) -> NoReturn:
        """The operator stops waiting: stop the job unless told not to, record it, and fail saying which."""
        self._mark_finished(context)
        if self.stop_on_timeout:
            self._stop(hook, job_name)
            description = self._latest(hook, job_name, description)  # the record shows the job after the stop
        context["ti"].xcom_push(key="record", value=record.build(self.job_kind, description, self._region()))
        raise error(message + ("; the job was stopped" if self.stop_on_timeout else f"; the job was left {left}"))

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow.providers.common.compat.openlineage.facet import Dataset
        from airflow.providers.openlineage.extractors import OperatorLineage

        from airflow_sm_prefs.lineage import s3_datasets

        inputs, outputs = s3_datasets(self.job_kind, self._request or {}, self._lineage_description or {})
        return OperatorLineage(
            inputs=[Dataset(namespace=n, name=k) for n, k in inputs],
            outputs=[Dataset(namespace=n, name=k) for n, k in outputs],
        )


class SageMakerPreferenceTrainingOperator(SageMakerPreferenceBaseOperator):
    """Run a SageMaker training job on the first instance preference with capacity.

    See :class:`SageMakerPreferenceBaseOperator` for the parameters.
    """

    job_kind = TRAINING


class SageMakerPreferenceProcessingOperator(SageMakerPreferenceBaseOperator):
    """Run a SageMaker processing job on the first instance preference with capacity.

    See :class:`SageMakerPreferenceBaseOperator` for the parameters.
    """

    job_kind = PROCESSING


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise rules.PreferenceValidationError([f"{what} rendered to text that is not JSON: {error}"]) from error


def _outcome_error(kind: JobKind, result: Mapping[str, Any], description: Mapping[str, Any]) -> AirflowException:
    """Why a job that ended without completing failed the task, in the words a user needs."""
    status = result["status"]
    if result["selected_instance_type"] is None:
        waited = progress.format_seconds(result["pending_seconds"])
        return NoCapacityError(
            f"SageMaker {kind.name} job {result['job_name']} ended {status} without ever getting capacity "
            f"after waiting {waited} for any of: {record.describe_preferences(kind, description)}. "
            f"{result['failure_reason'] or ''}".strip()
        )
    where = (
        f"{result['selected_instance_count']} x {result['selected_instance_type']} "
        f"(preference #{(result['selected_rank'] or 0) + 1})"
    )
    hint = (
        " It ran on a fallback type: SageMaker does not check that your container works on every preference."
        if result["fell_back"] and status == "Failed"
        else ""
    )
    return AirflowException(
        f"SageMaker {kind.name} job {result['job_name']} ended {status} on {where}: "
        f"{result['failure_reason'] or description.get('SecondaryStatus')}.{hint}"
    )


def _check_instance_types(kind: JobKind, request: Mapping[str, Any], hook: SageMakerPreferenceHook) -> None:
    """R19 against the model of the botocore actually in use (too heavy to load at DAG parse time)."""
    model = hook.conn.meta.service_model  # type: ignore[attr-defined]
    resources_shape = model.shape_for("ResourceConfig" if kind is TRAINING else "ProcessingClusterConfig")
    if "InstancePreferences" not in resources_shape.members:  # type: ignore[attr-defined]
        raise rules.PreferenceValidationError(
            ["the installed botocore does not know InstancePreferences; upgrade boto3/botocore to 1.43.90 or later"]
        )
    enum_shape = model.shape_for("TrainingInstanceType" if kind is TRAINING else "ProcessingInstanceType")
    known = set(getattr(enum_shape, "enum", []))
    problems = [
        f"preference #{index + 1} ({entry.get('InstanceType')}): not a SageMaker {kind.name} instance type [R19]"
        for index, entry in enumerate(kind.resources(request).get("InstancePreferences") or [])
        if entry.get("InstanceType") not in known
    ]
    if problems:
        raise rules.PreferenceValidationError(problems)


def _emit_selection_metrics(kind: JobKind, chosen: Mapping[str, Any]) -> None:
    try:
        from airflow.sdk.observability import stats
    except ImportError:  # pragma: no cover - Airflow < 3.3
        return
    tags = {
        "job_kind": kind.name,
        "instance_type": str(chosen.get("selected_instance_type")),
        "rank": str(chosen.get("selected_rank")),
    }
    stats.incr("sm_prefs.selected", tags=tags)
    stats.gauge("sm_prefs.selected_rank", chosen.get("selected_rank") or 0, tags=tags)
    stats.timing("sm_prefs.pending_seconds", timedelta(seconds=chosen.get("pending_seconds") or 0), tags=tags)
    if chosen.get("fell_back"):
        stats.incr("sm_prefs.fallback", tags=tags)
