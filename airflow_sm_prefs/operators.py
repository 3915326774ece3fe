"""``SageMakerPreferenceTrainingOperator`` and ``SageMakerPreferenceProcessingOperator``: the Airflow glue.

Both are the same operator over a different ``JobKind``: validate (at parse time when static, again after
rendering), claim a job name, create or reattach, then wait deferred (or blocking), announcing the chosen
configuration as soon as SageMaker selects it and returning one flat record at the end. The SageMaker calls
are the hook's, the waiting rules ``polling``'s, the naming ``attempts``'s, the messages ``outcomes``'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import pendulum
from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from airflow_sm_prefs import attempts, progress, record, tagging
from airflow_sm_prefs import preferences as rules
from airflow_sm_prefs.deadlines import wait_deadlines
from airflow_sm_prefs.job_view import JobView, to_time
from airflow_sm_prefs.jobs import PROCESSING, TRAINING, JobKind
from airflow_sm_prefs.links import SageMakerConsoleLink, SageMakerLogsLink, escape_log_group
from airflow_sm_prefs.outcomes import (
    FINISH_SUMMARY_FIELDS,
    NoCapacityError,
    no_capacity_message,
    outcome_error,
    wait_timeout_message,
)
from airflow_sm_prefs.polling import Outcome, WaitFor

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.hooks import SageMakerPreferenceHook

DEFER_TIMEOUT_MARGIN = timedelta(minutes=15)

__all__ = ["NoCapacityError", "SageMakerPreferenceProcessingOperator", "SageMakerPreferenceTrainingOperator"]


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
    :param aws_conn_id: Airflow AWS connection (templated; endpoint_url, role, region as with the amazon
        provider).
    :param region_name: AWS Region (templated); default: the connection's.
    :param verify: whether to verify TLS certificates, or the path of a CA bundle; default: the connection's.
    :param botocore_config: keyword arguments of ``botocore.config.Config`` (retries, timeouts, proxies) for
        every client the task and its trigger build; a dict, so the trigger can carry it.
    :param deferrable: wait in the triggerer (default) or block a worker slot while polling.
    :param check_interval: base seconds between status checks; queued jobs are checked half as often and
        imminent changes four times as often, whichever way the task waits.
    :param wait_timeout: absolute limit on the whole wait from first submission (default: the pending limit +
        ``MaxRuntimeInSeconds`` + 1 hour). On expiry the job is stopped (``stop_on_timeout``) and the task fails.
    :param stop_on_kill: stop the job when the task is marked failed/success, cleared, or killed.
    :param stop_on_timeout: stop the job when ``wait_timeout`` or the processing ``max_pending`` expires.
    :param resubmit_after_failure: on a retry after the job ended ``Failed``/``Stopped``, launch the next
        generation (default) instead of failing at once.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = ("config", "preferences", "job_name", "aws_conn_id", "region_name")
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
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
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
        self.verify = verify
        if botocore_config is not None and not isinstance(botocore_config, dict):
            raise ValueError("botocore_config must be a dict of botocore.config.Config keyword arguments")
        self.botocore_config = botocore_config
        self.deferrable = deferrable
        self.check_interval = float(check_interval)
        if self.check_interval <= 0:
            raise ValueError("check_interval must be positive")
        self.wait_timeout = rules.max_pending_seconds(wait_timeout)
        self.stop_on_kill = stop_on_kill
        self.stop_on_timeout = stop_on_timeout
        self.resubmit_after_failure = resubmit_after_failure
        self._active_job: str | None = None
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

    @property
    def hook_kwargs(self) -> dict[str, Any]:
        """The connection settings, for this task's hook and its trigger's alike."""
        return attempts.hook_kwargs(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)

    @cached_property
    def hook(self) -> SageMakerPreferenceHook:
        from airflow_sm_prefs.hooks import SageMakerPreferenceHook

        return SageMakerPreferenceHook(**self.hook_kwargs)

    @property
    def _region(self) -> str | None:
        return self.region_name or self.hook.conn_region_name

    def _view(self, description: Mapping[str, Any]) -> JobView:
        return JobView.parse(self.job_kind, description)

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

    def _rendered_request(self) -> dict[str, Any]:
        try:
            warnings = self._prepare()
            assert self._request is not None
            self.hook.check_instance_types(self.job_kind, self._request)
        except rules.PreferenceValidationError as error:
            _fail(f"{error} (no SageMaker job was created)")
        for warning in warnings:
            self.log.warning(warning)
        return self._request

    # -- submission -------------------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        request = self._rendered_request()
        kind = self.job_kind
        ledger = attempts.JobLedger.from_context(context)
        ti = context["ti"]
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
        live = self.hook.describe_job_or_none(kind, claim.job_name) if claim else None
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
            result = record.build(self._view(live), self._region)
            ti.xcom_push(key="record", value=result)
            _fail(f"{outcome_error(self._view(live), result)} Not launched again: {decision.reason}.")
        if decision.action == "supersede" and claim is not None:
            self.hook.stop_job(kind, claim.job_name, self.log)
        keeps_job = claim is not None and decision.action in ("reattach", "finished")
        claim = ledger.save(
            attempts.JobClaim(
                job_name=decision.job_name,
                base_name=base_name,
                generation=decision.generation,
                phase=attempts.SUBMITTING,
                try_number=int(getattr(ti, "try_number", 1) or 1),
                submitted_at=(claim.submitted_at if claim and keeps_job else None) or pendulum.now("UTC").isoformat(),
                job_kind=kind.name,
                aws_conn_id=self.aws_conn_id,
                region_name=self._region,
                stop_on_kill=self.stop_on_kill,
                verify=self.verify,
                botocore_config=self.botocore_config,
            )
        )
        self._active_job = decision.job_name
        if decision.action in ("create", "supersede"):
            ours = tagging.task_instance_tags(ti.dag_id, ti.task_id, ti.run_id, map_index)
            tags = tagging.with_task_instance_tags(request.get("Tags"), ours)
            self._create({**request, kind.name_field: decision.job_name, "Tags": tags})
        claim = ledger.save(claim.advanced(attempts.SUBMITTED))
        return self._follow(context, ledger, claim, request)

    def _create(self, request: dict[str, Any]) -> None:
        from botocore.exceptions import ClientError, ParamValidationError

        from airflow_sm_prefs.hooks import error_code

        name = request[self.job_kind.name_field]
        try:
            self.hook.create_job(self.job_kind, request)
        except ParamValidationError as error:
            _fail(f"botocore rejected the request before sending it: {error} (no SageMaker job was created)")
        except ClientError as error:
            code = error_code(error)
            if code == "ResourceInUse":
                self.log.info("SageMaker job %s already exists (an earlier attempt created it); reattaching", name)
                return
            if code in ("ValidationException", "ResourceLimitExceeded", "ResourceNotFound"):
                message = error.response["Error"].get("Message")
                _fail(f"SageMaker rejected {self.job_kind.name} job {name}: {code}: {message}")
            raise
        self.log.info("Created SageMaker %s job %s", self.job_kind.name, name)

    def _follow(
        self, context: Context, ledger: attempts.JobLedger, claim: attempts.JobClaim, request: Mapping[str, Any]
    ) -> Any:
        """Wait for the claimed job: finish at once if it ended, announce a selection, then defer or block."""
        self._active_job = claim.job_name
        self._persist_links(context, claim.job_name)
        description = self.hook.describe_job(self.job_kind, claim.job_name)
        view = self._view(description)
        deadline, pending_deadline = wait_deadlines(
            self.job_kind, request, claim.submitted_at, self.max_pending, self.wait_timeout
        )
        if view.terminal:
            return self._finish(context, description, announced=False)
        announced = view.selected is not None
        if announced:
            self._announce(context, view)
        ledger.save(claim.advanced(attempts.DEFERRED if self.deferrable else attempts.BLOCKING))
        return self._wait(context, description, announced, deadline, pending_deadline)

    def _persist_links(self, context: Context, job_name: str) -> None:
        common = {"region_name": self._region, "aws_partition": self.hook.conn_partition, "job_name": job_name}
        SageMakerConsoleLink.persist(context, self, console_fragment=self.job_kind.console_fragment, **common)
        SageMakerLogsLink.persist(context, self, escaped_log_group=escape_log_group(self.job_kind.log_group), **common)

    # -- waiting ----------------------------------------------------------------------------------------

    def _wait(
        self, context: Context, description: dict[str, Any], announced: bool, deadline: str, pending: str | None
    ) -> Any:
        """Wait for the selection (unless announced), then for the end: in the triggerer or in this slot."""
        wait_for: WaitFor = "completion" if announced else "selection"
        if self.deferrable:
            self._defer(description, wait_for, deadline, pending)
        from airflow_sm_prefs import blocking

        outcome, description = blocking.wait(
            self.hook, self._view(description), description, wait_for, deadline, pending, self.check_interval, self.log
        )
        return self._handle(context, outcome, description, announced, deadline, pending)

    def _defer(self, description: dict[str, Any], wait_for: WaitFor, deadline: str, pending: str | None) -> NoReturn:
        from airflow_sm_prefs.triggers import SageMakerPreferenceJobTrigger
        from airflow_sm_prefs.watcher import KnownState

        view = self._view(description)
        assert view.name is not None
        trigger = SageMakerPreferenceJobTrigger(
            job_name=view.name,
            job_kind=self.job_kind.name,
            hook_kwargs=self.hook_kwargs,
            wait_for=wait_for,
            deadline=deadline,
            pending_deadline=pending,
            poll_interval=self.check_interval,
            stop_on_kill=self.stop_on_kill,
            known_state=KnownState.of(view).to_json(),
        )
        remaining = (to_time(deadline) or pendulum.now("UTC")) - pendulum.now("UTC")
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
            return self._follow(context, ledger, claim, self._rendered_request())
        if claim is not None:
            ledger.save(claim.advanced(attempts.RESUMED))
        self._active_job = job_name
        deadline = event.get("deadline") or wait_deadlines(self.job_kind, {}, None, None, None)[0]
        description = event.get("description") or {}
        if not description:
            # A trigger that saw no change since the deferral (a quiet queue) sends no description.
            description = self._latest(job_name, {self.job_kind.name_field: job_name})
        status = event.get("status")
        return self._handle(
            context,
            Outcome(status) if status in tuple(Outcome) else Outcome.ERROR,
            description,
            bool(event.get("announced")),
            deadline,
            event.get("pending_deadline"),
            event.get("message"),
        )

    def _handle(
        self,
        context: Context,
        outcome: Outcome,
        description: dict[str, Any],
        announced: bool,
        deadline: str,
        pending: str | None,
        message: str | None = None,
    ) -> Any:
        """What the task does once a wait ended, whichever way it waited."""
        view = self._view(description)
        if outcome is Outcome.SELECTED:
            self._announce(context, view)
            ledger = attempts.JobLedger.from_context(context)
            claim = ledger.load()
            if claim is not None:
                ledger.save(claim.advanced(attempts.DEFERRED if self.deferrable else attempts.BLOCKING))
            return self._wait(context, description, True, deadline, pending)
        if outcome is Outcome.FINISHED:
            return self._finish(context, description, announced)
        if outcome is Outcome.PENDING_TIMEOUT:
            self._abandon(context, view, NoCapacityError, no_capacity_message(view), "queued")
        if outcome is Outcome.TIMEOUT:
            self._abandon(context, view, AirflowException, wait_timeout_message(view), "running")
        raise RuntimeError(f"lost track of SageMaker job {view.name}: {message}; a retry reattaches")

    def _latest(self, job_name: str, fallback: dict[str, Any]) -> dict[str, Any]:
        """A fresh description for the record; the last one seen if SageMaker cannot be asked right now."""
        try:
            return self.hook.describe_job(self.job_kind, job_name)
        except Exception as error:
            self.log.info("Could not describe %s for its record (%s); recording the last status seen", job_name, error)
            return fallback

    def on_kill(self) -> None:
        """The blocking wait was killed (SIGTERM): stop the job rather than leave it running unobserved."""
        if self._active_job and self.stop_on_kill:
            self.hook.stop_job(self.job_kind, self._active_job, self.log)

    # -- outcomes ---------------------------------------------------------------------------------------

    def _announce(self, context: Context, view: JobView) -> None:
        from airflow_sm_prefs.metrics import emit_selection

        chosen = record.selection(view, self._region)
        if chosen is None:
            return
        self.log.info(progress.selection_line(view))
        context["ti"].xcom_push(key="selection", value=chosen)
        emit_selection(chosen)

    @staticmethod
    def _mark_finished(context: Context) -> None:
        """This try reached the job's outcome: a later try of this task instance is a user's new request."""
        ledger = attempts.JobLedger.from_context(context)
        claim = ledger.load()
        if claim is not None:
            ledger.save(claim.advanced(attempts.FINISHED))

    def _finish(self, context: Context, description: dict[str, Any], announced: bool) -> record.JobRecord:
        self._mark_finished(context)
        view = self._view(description)
        if not announced:
            self._announce(context, view)
        result = record.build(view, self._region)
        self._lineage_description = dict(description)
        summary = json.dumps({k: result[k] for k in FINISH_SUMMARY_FIELDS})  # type: ignore[literal-required]
        self.log.info("SageMaker %s job %s ended %s: %s", view.kind.name, view.name, view.status, summary)
        if result["status"] == "Completed":
            return result
        context["ti"].xcom_push(key="record", value=result)
        raise outcome_error(view, result)

    def _abandon(
        self, context: Context, view: JobView, error: type[AirflowException], message: str, left: str
    ) -> NoReturn:
        """The operator stops waiting: stop the job unless told not to, record it, and fail saying which."""
        assert view.name is not None
        self._mark_finished(context)
        if self.stop_on_timeout:
            self.hook.stop_job(self.job_kind, view.name, self.log)
            # The record shows the job after the stop.
            view = self._view(self._latest(view.name, {self.job_kind.name_field: view.name}))
        context["ti"].xcom_push(key="record", value=record.build(view, self._region))
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
