"""``SageMakerPreferenceTrainingOperator`` and ``SageMakerPreferenceProcessingOperator``: the Airflow glue.

Both are the same operator over a different ``JobKind``: validate (at parse time when static, again after
rendering), claim a job name, create or reattach, then wait deferred (or blocking), announcing the chosen
configuration as soon as SageMaker selects it and returning one flat record at the end. The request is
``job_request``'s, the claim and create ``submission``'s, the SageMaker calls the hook's, the waiting rules
``polling``'s, what the task leaves behind ``task_outcome``'s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import pendulum
from airflow.providers.common.compat.sdk import AirflowException
from airflow.sdk import BaseOperator

from airflow_sm_prefs import attempts, certification, guardrails, job_request, record
from airflow_sm_prefs import finish_by as finish_by_module
from airflow_sm_prefs import preferences as rules
from airflow_sm_prefs.deadlines import wait_deadlines
from airflow_sm_prefs.job_view import JobView, to_time
from airflow_sm_prefs.jobs import PROCESSING, TRAINING, JobKind
from airflow_sm_prefs.links import SageMakerConsoleLink, SageMakerLogsLink, escape_log_group
from airflow_sm_prefs.outcomes import NoCapacityError, no_capacity_message, wait_timeout_message
from airflow_sm_prefs.polling import Outcome, WaitFor
from airflow_sm_prefs.progress import format_seconds
from airflow_sm_prefs.requirements import InstanceRequirements
from airflow_sm_prefs.submission import Prepared, Submission
from airflow_sm_prefs.task_outcome import DROPPED_XCOM_KEY, UNCERTIFIED_XCOM_KEY, TaskOutcome, latest_description

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.hooks import SageMakerPreferenceHook

DEFER_TIMEOUT_MARGIN = timedelta(minutes=15)

__all__ = ["NoCapacityError", "SageMakerPreferenceProcessingOperator", "SageMakerPreferenceTrainingOperator"]


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
    :param max_hourly_cost_usd: the most one job may cost per hour at on-demand prices (instance price x
        count, from the price table: ``airflow-sm-prefs prices``); entries above it, or with no known price,
        are violations. Templated.
    :param max_cost_usd: the most one job may cost in the worst case (hourly cost x ``MaxRuntimeInSeconds``).
        Templated.
    :param on_violation: ``"fail"`` (default) refuses the task, before any job exists, naming every offending
        entry; ``"drop"`` removes them, logs each with its reason, keeps the order of the rest, records them
        in the record's ``dropped_preferences``, and fails only if nothing is left.
    :param quota_preflight: read the account's SageMaker quotas (Service Quotas, cached a few minutes) and
        treat an entry asking for more instances than its type's quota as a violation: SageMaker would refuse
        the whole list. Default on; needs ``servicequotas:ListServiceQuotas``, and without it says so once in
        the log and goes on.
    :param requires: the hardware the workload needs (``InstanceRequirements`` or a dict of its fields:
        ``min_gpu_memory_gib``, ``gpu_architectures``, ``min_total_gpus``, ``efa``, ``accelerator``,
        ``min_vcpus``, ``min_memory_gib``, ``cpu_architectures``), checked for every preference against the
        instance catalogue; a type missing from it is a violation. A static list that cannot meet it fails the
        DAG import (with ``on_violation="fail"``).
    :param finish_by: a deadline for the job's result (an aware datetime, an ISO 8601 time, or a template such
        as ``"{{ data_interval_end.add(hours=6) }}"``). Before submission each preference's run time is
        expected from this task's ledger history on that configuration (else ``MaxRuntimeInSeconds``); entries
        that can no longer finish in time are dropped and recorded, the task fails at once if none can, and the
        job may wait for capacity until the deadline less the longest expected run kept (as
        ``MaxPendingTimeInSeconds`` where SageMaker takes it, else enforced by the task). Templated.
    :param workload: the certification registry's name for this job's workload.
    :param certified: ``"strict"`` refuses (at parse time when the list is static) any preference the registry
        does not certify for the workload, naming it; ``"warn"`` logs it and records it in the record's
        ``uncertified_preferences``; ``"off"`` skips the check. Default: ``"warn"`` with a workload, else off.
    :param certification_registry: the registry file (default ``[sm_prefs] certification_registry``).
    :param stream_logs: show the job's CloudWatch log lines in the task log while it runs, each as
        ``[<stream>] <message>``, none twice; a failed job's error message ends with its last lines. Needs
        ``logs:FilterLogEvents``, ``logs:DescribeLogStreams`` and ``logs:GetLogEvents``; without them the task
        says so once and carries on.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = (
        "config",
        "preferences",
        "job_name",
        "aws_conn_id",
        "region_name",
        "max_hourly_cost_usd",
        "max_cost_usd",
        "finish_by",
    )
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
        stream_logs: bool = True,
        max_hourly_cost_usd: float | str | None = None,
        max_cost_usd: float | str | None = None,
        on_violation: guardrails.OnViolation = "fail",
        quota_preflight: bool = True,
        requires: InstanceRequirements | Mapping[str, Any] | None = None,
        finish_by: datetime | str | None = None,
        workload: str | None = None,
        certified: certification.Mode | None = None,
        certification_registry: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config = config
        self.job_name = job_name
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.verify = verify
        self.botocore_config = botocore_config
        self.deferrable = deferrable
        self.stop_on_kill = stop_on_kill
        self.stop_on_timeout = stop_on_timeout
        self.resubmit_after_failure = resubmit_after_failure
        self.stream_logs = stream_logs
        self.max_hourly_cost_usd = max_hourly_cost_usd
        self.max_cost_usd = max_cost_usd
        self.on_violation = on_violation
        self.quota_preflight = quota_preflight
        self.requires = requires
        self.finish_by = finish_by
        self.workload = workload
        self.certified = certified
        self.certification_registry = certification_registry
        self._active_job: str | None = None
        self._request: dict[str, Any] | None = None
        self._lineage_description: dict[str, Any] | None = None
        self._variables_read: list[tuple[str, bool]] = []  # by the templates: the trigger masks them too
        # Every argument is judged here, and every value of the request that is not templated: a bad list
        # fails the DAG import, not the 2 a.m. run (a mapped task's arguments are judged when it expands).
        markers = job_request.template_markers_of(self.get_dag())  # the DAG may change Jinja's delimiters
        with job_request.refusing(), rules.template_markers(markers):
            self.preferences = job_request.friendly_preferences(preferences)
            self.max_pending = rules.duration_seconds(max_pending, "max_pending")
            self.wait_timeout = rules.duration_seconds(wait_timeout, "wait_timeout")
            self.check_interval = rules.interval_seconds(check_interval, "check_interval")
            checks = self._guardrails()
            finish_by_module.judged(finish_by)
            certifying = self._certification()
            problems = rules.job_name_problems(job_name, "job_name")
            if not isinstance(stream_logs, bool):
                problems.append(f"stream_logs must be True or False, got {type(stream_logs).__name__}")
            if botocore_config is not None and not isinstance(botocore_config, dict):
                problems.append("botocore_config must be a dict of botocore.config.Config keyword arguments")
            if problems:
                raise rules.PreferenceValidationError(problems)
        if not isinstance(config, str):  # JSON text is judged once rendered
            for warning in self._prepare(markers):
                self.log.warning(warning)
            if certifying.mode == "strict" and certifying.checked_at_parse and self._request is not None:
                # A static list naming an uncertified configuration fails the DAG import (with a local
                # registry; a remote one is read just before the job would be created).
                with job_request.refusing():
                    self._refuse_uncertified(self._request, certifying)
            if checks.requires is not None and checks.on_violation == "fail" and self._request is not None:
                # A static list that cannot meet requires= fails the DAG import; with "drop", the run decides.
                with job_request.refusing(), rules.template_markers(markers):
                    guardrails.apply(
                        self.job_kind,
                        self._request,
                        guardrails.requirement_violations(self.job_kind, self._request, checks.requires),
                        "fail",
                    )

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

    def _outcome(self, context: Context) -> TaskOutcome:
        return TaskOutcome(context, self.job_kind, self._region, self.log, self._certification())

    def _prepare(self, markers: tuple[str, ...]) -> list[str]:
        self._request, warnings = job_request.prepare(
            self.job_kind, self.config, self.preferences, self.max_pending, markers, self.job_name
        )
        return warnings

    def _rendered_request(self) -> dict[str, Any]:
        """The request after rendering, judged whole: nothing in it is a template any more."""
        try:
            warnings = self._prepare(markers=())
            assert self._request is not None
            with job_request.refusing():
                self.hook.check_instance_types(self.job_kind, self._request)
        except rules.PreferenceValidationError as error:
            raise job_request.InvalidJobRequest([*error.problems, "no SageMaker job was created"]) from None
        for warning in warnings:
            self.log.warning(warning)
        return self._request

    def _guardrails(self) -> guardrails.Guardrails:
        return guardrails.Guardrails.judged(
            self.max_hourly_cost_usd, self.max_cost_usd, self.on_violation, self.quota_preflight, self.requires
        )

    def _certification(self) -> certification.Certification:
        return certification.Certification.judged(self.workload, self.certified, self.certification_registry)

    def _uncertified(self, request: Mapping[str, Any], certifying: certification.Certification) -> list[str]:
        listed = [(e.instance_type, e.count, e.label) for e in guardrails.entries(self.job_kind, request)]
        try:
            return certifying.uncertified(listed)
        except certification.RegistryError as error:
            raise rules.PreferenceValidationError([str(error)]) from None

    def _refuse_uncertified(self, request: Mapping[str, Any], certifying: certification.Certification) -> None:
        uncertified = self._uncertified(request, certifying)
        if uncertified:
            raise rules.PreferenceValidationError(
                [*uncertified, "certified='strict' lists certified configurations only; no SageMaker job was created"]
            )

    def _quota_client(self) -> Any:
        from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

        return AwsBaseHook(**{**self.hook_kwargs, "region_name": self._region}, client_type="service-quotas").get_conn()

    def _guarded_request(self, context: Context, request: dict[str, Any]) -> Prepared:
        """The request past the guardrails and the deadline, just before a job is created from it: refused,
        or shortened with what was dropped recorded (XCom ``dropped_preferences``)."""
        with job_request.refusing():
            certifying = self._certification()
            if certifying.mode == "strict":
                self._refuse_uncertified(request, certifying)
            elif certifying.mode == "warn":
                uncertified = self._uncertified(request, certifying)
                for problem in uncertified:
                    self.log.warning("Uncertified %s", problem)
                if uncertified:
                    context["ti"].xcom_push(key=UNCERTIFIED_XCOM_KEY, value=uncertified)
            guarded, dropped = guardrails.enforce(
                self.job_kind,
                request,
                self._guardrails(),
                self._region,
                self._quota_client,
                (self.aws_conn_id, self._region, self.hook.conn_config.endpoint_url),
                self.log,
            )
            pending_until = None
            if self.finish_by is not None:
                # Judged on the full list, past what the guardrails dropped, so ranks stay the user's own.
                guarded, dropped, pending_until = self._fitted_to_deadline(context, request, dropped)
            # What is left is still a request SageMaker accepts; warn of what only the changes brought
            # (a list left with CPU types only makes a pending bound meaningless).
            already_warned = set(self.job_kind.validate(request))
            for warning in self.job_kind.validate(guarded):
                if warning not in already_warned:
                    self.log.warning(warning)
            request = guarded
        if dropped:
            context["ti"].xcom_push(key=DROPPED_XCOM_KEY, value=dropped)
        return Prepared(request, pending_until)

    def _fitted_to_deadline(
        self, context: Context, request: dict[str, Any], guarded_out: list[guardrails.DroppedPreference]
    ) -> tuple[dict[str, Any], list[guardrails.DroppedPreference], str | None]:
        ti = context["ti"]
        now = pendulum.now("UTC")
        earlier = {removed["rank"]: removed["reason"] for removed in guarded_out}
        deadline = finish_by_module.plan(
            self.job_kind,
            request,
            finish_by_module.deadline_of(self.finish_by),
            now,
            finish_by_module.ledger_history(ti.dag_id, ti.task_id, self.job_kind),
            excluded=earlier,
        )
        request, dropped = guardrails.apply(self.job_kind, request, {**deadline.dropped, **earlier}, "drop")
        for removed in dropped:
            if removed["rank"] in deadline.dropped:
                self.log.warning("Dropped %s", removed["reason"])
        request, pending_until = finish_by_module.applied(self.job_kind, request, deadline, now)
        self.log.info(
            "finish_by=%s: the job may wait for capacity %s, until %s (the longest expected run kept: %s), %s",
            deadline.finish_by.to_iso8601_string(),
            format_seconds(deadline.pending_seconds),
            now.add(seconds=deadline.pending_seconds).to_iso8601_string(),
            format_seconds(max(deadline.expected_seconds.values())),
            "enforced by this task" if pending_until else "as MaxPendingTimeInSeconds",
        )
        return request, dropped, pending_until

    # -- Airflow's entry points -------------------------------------------------------------------------

    def _do_render_template_fields(self, parent: Any, *args: Any, **kwargs: Any) -> None:
        # Where both a task's and a mapped task's templates are rendered (a MappedOperator renders its
        # unmapped task through this, not through render_template_fields): which Variables they read.
        from airflow_sm_prefs.redaction import variables_read

        if parent is not self:  # a nested templated object of this task's, inside the call below
            super()._do_render_template_fields(parent, *args, **kwargs)
            return
        context = kwargs["context"] if "context" in kwargs else args[1]
        with variables_read(context) as read:
            super()._do_render_template_fields(parent, *args, **kwargs)
        self._variables_read = sorted(read)

    def execute(self, context: Context) -> Any:
        request = self._rendered_request()
        submission = Submission(
            hook=self.hook,
            kind=self.job_kind,
            connection={**self.hook_kwargs, "region_name": self._region},
            stop_on_kill=self.stop_on_kill,
            resubmit_after_failure=self.resubmit_after_failure,
            retries=self.retries or 0,
            log=self.log,
        )
        submitted = submission.submit(
            context,
            request,
            self.job_name,
            self._outcome(context),
            prepare=lambda rendered: self._guarded_request(context, rendered),
        )
        claims = attempts.ClaimStore.from_context(context)
        return self._follow(context, claims, submitted.claim, submitted.request, reattached=submitted.reattached)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        claims = attempts.ClaimStore.from_context(context)
        claim = claims.load()
        job_name = event["job_name"]
        if claim is not None and claim.job_name != job_name:
            # Airflow delivered another trigger's event (seen with SQLite, which reuses a deleted trigger's
            # id): the job it reports is not the one this task instance follows now, so keep following ours.
            self.log.warning(
                "Ignoring an event about SageMaker job %s: this task instance follows job %s", job_name, claim.job_name
            )
            return self._follow(context, claims, claim, self._rendered_request())
        if claim is not None:
            claims.save(claim.advanced(attempts.RESUMED))
        self._active_job = job_name
        deadline = event.get("deadline") or wait_deadlines(self.job_kind, {}, None, None, None)[0]
        description = event.get("description") or {}
        if not description:
            # A trigger that saw no change since the deferral (a quiet queue) sends no description.
            description = latest_description(self.hook, self.job_kind, {self.job_kind.name_field: job_name}, self.log)
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

    def on_kill(self) -> None:
        """The blocking wait was killed (SIGTERM): stop the job rather than leave it running unobserved."""
        if self._active_job and self.stop_on_kill:
            self.hook.stop_job(self.job_kind, self._active_job, self.log)

    # -- waiting ----------------------------------------------------------------------------------------

    def _follow(
        self,
        context: Context,
        claims: attempts.ClaimStore,
        claim: attempts.JobClaim,
        request: Mapping[str, Any],
        reattached: bool = False,
    ) -> Any:
        """Wait for the claimed job: finish at once if it ended, announce a selection, then defer or block."""
        self._active_job = claim.job_name
        self._persist_links(context, claim.job_name)
        description, service_now = self.hook.describe_job_at(self.job_kind, claim.job_name)
        view = self._view(description)
        if self.stream_logs and reattached and view.started is not None and not view.terminal:
            self._skip_earlier_log_lines(context, claim.job_name, service_now)
        deadline, pending_deadline = wait_deadlines(
            self.job_kind, request, claim.submitted_at, self.max_pending, self.wait_timeout, claim.pending_until
        )
        if view.terminal:
            return self._finish(context, description, announced=False)
        announced = view.selected is not None
        if announced:
            self._outcome(context).announce(view)
        claims.save(claim.advanced(attempts.DEFERRED if self.deferrable else attempts.BLOCKING))
        return self._wait(context, description, announced, deadline, pending_deadline)

    def _skip_earlier_log_lines(self, context: Context, job_name: str, service_now: float | None) -> None:
        """A retry reattached to a running job: the lines an earlier try showed are in that try's log, so this
        try shows the lines written from now on (in the service's clock), none of them twice."""
        from airflow_sm_prefs.log_follower import LogCursor
        from airflow_sm_prefs.log_stream import CURSOR_XCOM_KEY

        now = service_now if service_now is not None else pendulum.now("UTC").timestamp()
        cursor = LogCursor(after=int(now) * 1000)
        context["ti"].xcom_push(key=CURSOR_XCOM_KEY, value=cursor.to_json())
        self.log.info(
            "SageMaker job %s was already running: its log lines up to %s are in the earlier tries' logs and in "
            "CloudWatch; showing the lines written from then on",
            job_name,
            pendulum.from_timestamp(int(now)).to_iso8601_string(),
        )

    def _saved_log_cursor(self, context: Context) -> dict[str, Any] | None:
        from airflow_sm_prefs.log_stream import CURSOR_XCOM_KEY

        ti = context["ti"]
        saved = ti.xcom_pull(key=CURSOR_XCOM_KEY, task_ids=ti.task_id, map_indexes=ti.map_index)
        return saved if isinstance(saved, dict) else None

    def _persist_links(self, context: Context, job_name: str) -> None:
        common = {"region_name": self._region, "aws_partition": self.hook.conn_partition, "job_name": job_name}
        SageMakerConsoleLink.persist(context, self, console_fragment=self.job_kind.console_fragment, **common)
        SageMakerLogsLink.persist(context, self, escaped_log_group=escape_log_group(self.job_kind.log_group), **common)

    def _wait(
        self, context: Context, description: dict[str, Any], announced: bool, deadline: str, pending: str | None
    ) -> Any:
        """Wait for the selection (unless announced), then for the end: in the triggerer or in this slot."""
        wait_for: WaitFor = "completion" if announced else "selection"
        log_cursor = self._saved_log_cursor(context) if self.stream_logs else None
        if self.deferrable:
            self._defer(description, wait_for, deadline, pending, log_cursor)
        from airflow_sm_prefs import blocking

        outcome, description = blocking.wait(
            self.hook,
            self._view(description),
            description,
            wait_for,
            deadline,
            pending,
            self.check_interval,
            self.log,
            observed=self._blocking_log_reader(description, log_cursor),
        )
        return self._handle(context, outcome, description, announced, deadline, pending)

    def _blocking_log_reader(
        self, description: dict[str, Any], log_cursor: dict[str, Any] | None
    ) -> Callable[[JobView], None] | None:
        """What a blocking wait calls with each view: show the job's new lines once it runs."""
        if not self.stream_logs:
            return None
        from airflow_sm_prefs.log_follower import LogCursor
        from airflow_sm_prefs.worker_logs import BlockingLogReader, logs_client

        name = self._view(description).name
        assert name is not None
        reader = BlockingLogReader(
            logs_client(self.hook_kwargs), self.job_kind, name, self.log, LogCursor.from_json(log_cursor) or LogCursor()
        )

        def observed(view: JobView) -> None:
            if view.started is not None:
                reader.read()

        return observed

    def _defer(
        self,
        description: dict[str, Any],
        wait_for: WaitFor,
        deadline: str,
        pending: str | None,
        log_cursor: dict[str, Any] | None,
    ) -> NoReturn:
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
            stream_logs=self.stream_logs,
            log_cursor=log_cursor,
            mask_variables=[list(read) for read in self._variables_read],
        )
        remaining = (to_time(deadline) or pendulum.now("UTC")) - pendulum.now("UTC")
        # A plain timedelta: the Task SDK's msgpack channel cannot encode pendulum's Duration.
        timeout = timedelta(seconds=remaining.total_seconds()) + DEFER_TIMEOUT_MARGIN
        self.defer(trigger=trigger, method_name="execute_complete", timeout=timeout)

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
            self._outcome(context).announce(view)
            claims = attempts.ClaimStore.from_context(context)
            claim = claims.load()
            if claim is not None:
                claims.save(claim.advanced(attempts.DEFERRED if self.deferrable else attempts.BLOCKING))
            return self._wait(context, description, True, deadline, pending)
        if outcome is Outcome.FINISHED:
            return self._finish(context, description, announced)
        stop = self.stop_on_timeout
        if outcome is Outcome.PENDING_TIMEOUT:
            bound = "in time to finish by finish_by" if self.finish_by is not None else "within max_pending"
            why = no_capacity_message(view, bound)
            self._outcome(context).abandon(self.hook, description, NoCapacityError, why, stop, "queued")
        if outcome is Outcome.TIMEOUT:
            why = wait_timeout_message(view)
            self._outcome(context).abandon(self.hook, description, AirflowException, why, stop, "running")
        raise RuntimeError(f"lost track of SageMaker job {view.name}: {message}; a retry reattaches")

    def _finish(self, context: Context, description: dict[str, Any], announced: bool) -> record.JobRecord:
        self._lineage_description = dict(description)
        view = self._view(description)
        tail: list[str] = []
        if self.stream_logs and view.status == "Failed" and view.started is not None and view.name is not None:
            from airflow_sm_prefs.worker_logs import last_lines, logs_client

            tail = last_lines(logs_client(self.hook_kwargs), self.job_kind, view.name, self.log)
        return self._outcome(context).finish(view, announced, tail)

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
