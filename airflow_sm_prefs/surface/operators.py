"""``SageMakerPreferenceTrainingOperator`` and ``SageMakerPreferenceProcessingOperator``: the Airflow surface.

Both are the same operator over a different ``JobKind``. The operator takes the arguments, judges them (at
parse time when static, again after rendering), and hands the rest on: the request is ``job_request``'s, what
is checked before a job exists ``preflight``'s, the task's life with its job (claim, create or reattach, wait
deferred or blocking, finish) ``task_life``'s, the SageMaker calls the hook's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow.sdk import BaseOperator

from airflow_sm_prefs.platform.redaction import SecretsRead
from airflow_sm_prefs.preflight import certification, guardrails
from airflow_sm_prefs.preflight.requirements import InstanceRequirements
from airflow_sm_prefs.preflight.runner import Account, Preflight, PreflightArguments
from airflow_sm_prefs.request import job_request
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING, JobKind
from airflow_sm_prefs.request.preferences import (
    RequestValidationError,
    duration_seconds,
    interval_seconds,
    job_name_problems,
    template_markers,
)
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.surface import links
from airflow_sm_prefs.surface.links import SageMakerConsoleLink, SageMakerLogsLink
from airflow_sm_prefs.task.task_failures import NoCapacityError
from airflow_sm_prefs.wait.wait_event import WaitEnded

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook
    from airflow_sm_prefs.task.task_life import Step, TaskLife, Waiting

DEFAULT_CHECK_INTERVAL = 60.0  # seconds; a queued job's state changes in minutes, at AWS's pace

# The task's life with its job (task_life and what it uses: the claim, the wait, the ledger) is imported when a
# task runs, never when a DAG file is parsed.

__all__ = ["NoCapacityError", "SageMakerPreferenceProcessingOperator", "SageMakerPreferenceTrainingOperator"]


class SageMakerPreferenceBaseOperator(BaseOperator, PreflightArguments):
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
    :param aws_conn_id: Airflow AWS connection (templated; endpoint_url, role, region as the amazon provider).
    :param region_name: AWS Region (templated); default: the connection's.
    :param verify: verify TLS certificates (or a CA bundle's path); default: the connection's.
    :param botocore_config: ``botocore.config.Config`` keyword arguments (retries, timeouts, proxies) for every
        client the task and its trigger build; a dict, so the trigger can carry it.
    :param deferrable: wait in the triggerer (default) or block a worker slot while polling.
    :param check_interval: base seconds between status checks; queued jobs are checked half as often and
        imminent changes four times as often, whichever way the task waits (default ``[sm_prefs] check_interval``).
    :param wait_timeout: absolute limit on the whole wait from first submission (default: the pending limit +
        ``MaxRuntimeInSeconds`` + 1 hour). On expiry the job is stopped (``stop_on_timeout``) and the task fails.
    :param stop_on_kill: stop the job when the task is marked failed/success, cleared, or killed.
    :param stop_on_timeout: stop the job when ``wait_timeout`` or the processing ``max_pending`` expires.
    :param resubmit_after_failure: on a retry after the job ended ``Failed``/``Stopped``, launch the next
        generation (default) instead of failing at once.
    :param max_hourly_cost_usd: the most one job may cost per hour at on-demand prices (instance price x
        count, from the price table: ``airflow-sm-prefs prices``); entries above it, or with no known price,
        are violations. Templated.
    :param max_cost_usd: the most one job may cost at worst (hourly cost x ``MaxRuntimeInSeconds``). Templated.
    :param on_violation: ``"fail"`` (default) refuses the task, before any job exists, naming every offending
        entry; ``"drop"`` removes them, logs each with its reason, keeps the order of the rest, records them
        in the record's ``dropped_preferences``, and fails only if nothing is left.
    :param quota_preflight: an entry asking for more instances than its type's SageMaker quota (Service Quotas,
        cached a few minutes) is a violation: SageMaker would refuse the whole list. Default on; needs
        ``servicequotas:ListServiceQuotas``, and without it says so once in the log and goes on.
    :param requires: the hardware the workload needs (``InstanceRequirements`` or a dict of its fields:
        ``min_gpu_memory_gib``, ``gpu_architectures``, ``min_total_gpus``, ``efa``, ``accelerator``, ``min_vcpus``,
        ``min_memory_gib``, ``cpu_architectures``), checked for each preference against the instance catalogue (a
        type missing from it is a violation). A static list that cannot meet it fails the DAG import with ``"fail"``.
    :param finish_by: a deadline for the job's result (an aware datetime, an ISO 8601 time, or a template such
        as ``"{{ data_interval_end.add(hours=6) }}"``). Before submission each preference's run time is
        expected from this task's ledger history on that configuration (else ``MaxRuntimeInSeconds``); entries
        that can no longer finish in time are dropped and recorded, the task fails at once if none can, and the job
        may wait for capacity until the deadline less the longest expected run kept (as ``MaxPendingTimeInSeconds``
        where SageMaker takes it, else enforced by the task). Templated.
    :param workload: the certification registry's name for this job's workload.
    :param certified: ``"strict"`` refuses (at parse time when the list is static) any preference the registry
        does not certify for the workload, naming it; ``"warn"`` logs it and records it in the record's
        ``uncertified_preferences``; ``"off"`` skips the check. Default: ``"warn"`` with a workload, else off.
    :param certification_registry: the registry file (default ``[sm_prefs] certification_registry``).
    :param training_plans: ``"auto"`` (training only): just before the create call, put the account's
        Flexible Training Plan that can take the job first in the list (docs/capacity-planning.md).
    :param stream_logs: the job's CloudWatch log lines in the task log as it runs (``[<stream>] <message>``, none
        twice); a failed job's error ends with its last lines. Needs ``logs:FilterLogEvents``,
        ``logs:DescribeLogStreams`` and ``logs:GetLogEvents``; without them the task says so once and carries on.
    """

    job_kind: ClassVar[JobKind]
    template_fields: Sequence[str] = (
        "config",
        "preferences",
        "job_name",
        "aws_conn_id",
        "region_name",
        *Preflight.templated_arguments(),
    )
    template_fields_renderers: ClassVar[dict[str, str]] = {"config": "json", "preferences": "json"}
    operator_extra_links = (SageMakerConsoleLink(), SageMakerLogsLink())
    ui_color = "#d6e9f8"

    def __init__(
        self,
        *,
        config: dict[str, Any] | str,
        preferences: job_request.PreferencesArgument = None,
        max_pending: timedelta | int | None = None,
        job_name: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        verify: bool | str | None = None,
        botocore_config: dict[str, Any] | None = None,
        deferrable: bool = True,
        check_interval: float | None = None,
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
        training_plans: Literal["auto"] | None = None,
        **kwargs: Any,
    ) -> None:
        # Preflight's arguments as one value: those named above and any a check in the registry adds (no change
        # here). ``locals()``, before any other local, holds exactly the arguments: no second list of the ten.
        given = locals()
        preflight_arguments = {name: kwargs.pop(name, given.get(name)) for name in Preflight.argument_names()}
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
        for name, value in preflight_arguments.items():  # attributes, for Airflow to render the templated ones
            setattr(self, name, value)
        self._life: TaskLife | None = None
        self._request: dict[str, Any] | None = None
        self._lineage_description: Mapping[str, Any] = {}
        self._secrets_read = SecretsRead()  # what the templates read that Airflow masks: the trigger masks it too
        # Every argument and untemplated value, judged at import (a mapped task's at expansion), not at the 2 a.m. run.
        markers = job_request.template_markers_of(self.get_dag())  # the DAG may change Jinja's delimiters
        with job_request.refusing(), template_markers(markers):
            self.preferences = job_request.friendly_preferences(preferences)
            self.max_pending = duration_seconds(max_pending, "max_pending")
            self.wait_timeout = duration_seconds(wait_timeout, "wait_timeout")
            self.check_interval = _check_interval(check_interval)
            preflight = self._preflight()
            problems = job_name_problems(job_name, "job_name")
            if not isinstance(stream_logs, bool):
                problems.append(f"stream_logs must be True or False, got {type(stream_logs).__name__}")
            if botocore_config is not None and not isinstance(botocore_config, dict):
                problems.append("botocore_config must be a dict of botocore.config.Config keyword arguments")
            if problems:
                raise RequestValidationError(problems)
        if not isinstance(config, str):  # JSON text is judged once rendered
            self._request, warnings = job_request.prepare(
                self.job_kind, config, self.preferences, self.max_pending, markers=markers, job_name=job_name
            )
            for warning in warnings:
                self.log.warning(warning)
            preflight.at_parse(self._request, markers)

    def _preflight(self) -> Preflight:
        return Preflight.of(self.job_kind, Preflight.arguments_of(self))

    @property
    def connection(self) -> Connection:
        """How this task, its trigger and the listener reach AWS, from the settings as rendered."""
        return Connection(self.aws_conn_id, self.region_name, self.verify, self.botocore_config)

    @cached_property
    def hook(self) -> SageMakerPreferenceHook:
        from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

        return SageMakerPreferenceHook(**self.connection.hook_arguments())

    @property
    def _region(self) -> str | None:
        return self.region_name or self.hook.conn_region_name

    def _rendered_request(self) -> dict[str, Any]:
        self._request = job_request.rendered(
            self.job_kind,
            self.config,
            self.preferences,
            max_pending=self.max_pending,
            job_name=self.job_name,
            check_instance_types=self.hook.check_instance_types,
            log=self.log,
        )
        return self._request

    def _do_render_template_fields(self, parent: Any, *args: Any, **kwargs: Any) -> None:
        # Which Variables and connections the templates read, where both a task's and a mapped task's are rendered
        # (a MappedOperator renders its unmapped task through this, not through render_template_fields).
        from airflow_sm_prefs.platform.redaction import secrets_read

        if parent is not self:  # a nested templated object of this task's, inside the call below
            super()._do_render_template_fields(parent, *args, **kwargs)
            return
        context = kwargs["context"] if "context" in kwargs else args[1]
        with secrets_read(context) as self._secrets_read:
            super()._do_render_template_fields(parent, *args, **kwargs)

    def _start_life(self, context: Context, certified: certification.Certification) -> TaskLife:
        from airflow_sm_prefs.task.task_life import TaskLife

        persist_links = partial(
            links.persist, context, self, self.job_kind, region=self._region, partition=self.hook.conn_partition
        )
        self._life = TaskLife(
            self.job_kind,
            self.hook,
            connection=self.connection,
            region=self._region,
            waiting=waiting_of(self),
            certification=certified,
            context=context,
            log=self.log,
            persist_links=persist_links,
        )
        return self._life

    def _carry_out(self, step: Step) -> Any:
        from airflow_sm_prefs.task.task_life import Defer

        if isinstance(step, Defer):
            self.defer(trigger=step.trigger, method_name="execute_complete", timeout=step.timeout)
        self._lineage_description = step.view.source
        return step.record

    # -- Airflow's entry points -------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        _refuse_an_unusable_connection(self.hook, "no SageMaker job was created")
        request = self._rendered_request()
        preflight = self._preflight()

        def before_create(rendered: dict[str, Any]) -> Any:  # only when a job is to be created, not to reattach
            account = Account.of(self.connection.in_region(self._region), self.hook.conn_config.endpoint_url)
            return preflight.before_create(context, rendered, account, self.log)

        life = self._start_life(context, preflight.certification)
        return self._carry_out(life.start(request, self.job_name, before_create))

    def execute_complete(self, context: Context, event: dict[str, Any]) -> Any:
        _refuse_an_unusable_connection(self.hook, "this host cannot see how the task's SageMaker job ended")
        life = self._start_life(context, Preflight.certification_of(self.job_kind, Preflight.arguments_of(self)))
        return self._carry_out(life.resume(WaitEnded.parse(event), self._rendered_request))

    @property
    def active_job(self) -> str | None:
        """The job this try created or reattached to, known in the process running the try; None before one."""
        return None if self._life is None else self._life.active_job

    def on_kill(self) -> None:
        """The blocking wait was killed (SIGTERM): stop the job rather than leave it running unobserved."""
        if self.active_job and self.stop_on_kill:
            self.hook.stop_job(self.job_kind, self.active_job, self.log)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        from airflow_sm_prefs.surface.lineage import operator_lineage

        return operator_lineage(self.job_kind, self._request or {}, self._lineage_description)


def waiting_of(task: SageMakerPreferenceBaseOperator) -> Waiting:
    """How ``task`` waits for its job: its arguments as judged when it was built, and what its templates read that
    the trigger must mask."""
    from airflow_sm_prefs.task.task_life import Waiting

    return Waiting(
        deferrable=bool(task.deferrable),
        check_interval=float(task.check_interval),
        max_pending=task.max_pending,
        wait_timeout=task.wait_timeout,
        stop_on_kill=task.stop_on_kill,
        stop_on_timeout=task.stop_on_timeout,
        resubmit_after_failure=task.resubmit_after_failure,
        stream_logs=task.stream_logs,
        retries=task.retries or 0,
        mask_variables=tuple(sorted(task._secrets_read.variables)),
        mask_connections=tuple(sorted(task._secrets_read.connections)),
    )


def _refuse_an_unusable_connection(hook: SageMakerPreferenceHook, consequence: str) -> None:
    """A connection no call can use (botocore's NoRegionError) fails the task once, never retried."""
    from airflow.providers.common.compat.sdk import AirflowFailException

    problem = hook.connection_problem()
    if problem is not None:
        raise AirflowFailException(f"{problem}; {consequence}")


def _check_interval(given: float | None) -> float:
    """The task's own, else ``[sm_prefs] check_interval``: one deployment's pace (seconds against the emulator,
    whose clock runs ahead; a minute at AWS)."""
    from airflow.configuration import conf

    if given is not None:
        return interval_seconds(given, "check_interval")
    configured = conf.get("sm_prefs", "check_interval", fallback=None)
    if not configured:
        return DEFAULT_CHECK_INTERVAL
    try:
        value: Any = float(configured)
    except ValueError:
        value = configured
    return interval_seconds(value, "[sm_prefs] check_interval")


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
