"""Policy constants and derived rules, each pinned by its value or by the behaviour it buys.

Every test here fails when a one-line change moves the constant or drops the rule: the polling clock, the
backoff, the deadline slack, the defer margin, the listing overlap, the cost rules and what reaches metrics.
"""

from __future__ import annotations

import datetime as dt
from datetime import timedelta
from typing import Any

import pendulum
import pytest

from airflow_sm_prefs.evidence import metrics
from airflow_sm_prefs.preflight import cost_caps
from airflow_sm_prefs.reference import prices
from airflow_sm_prefs.request.jobs import PROCESSING, TRAINING
from airflow_sm_prefs.task import deadlines
from airflow_sm_prefs.wait import announcement, watcher
from airflow_sm_prefs.wait.polling import (
    MAX_BACKOFF_SECONDS,
    WaitOutcome,
    backoff_seconds,
    interval_for,
    next_limit,
    observe,
    view_interval,
)
from airflow_sm_prefs.wait.ratelimit import AdaptiveRateLimiter
from tests.unit.test_prices import table

# -- the polling clock -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "secondary", "selected", "expected"),
    [
        ("InProgress", "Pending", False, 120.0),  # queued for capacity: half as often
        ("InProgress", "Starting", True, 15.0),  # an imminent change: four times as often
        ("InProgress", "Downloading", True, 15.0),
        ("InProgress", "Uploading", True, 15.0),
        ("InProgress", "Restarting", True, 15.0),
        ("Stopping", "Stopping", True, 15.0),
        ("Stopping", None, False, 15.0),
        ("InProgress", "Training", True, 60.0),  # running: the base interval
        ("Completed", "Completed", True, 240.0),  # ended: rarely, a watcher only confirms it
        ("Failed", "Failed", True, 240.0),
        ("Stopped", "Stopped", False, 240.0),
    ],
)
def test_each_state_is_looked_at_on_its_own_clock(status, secondary, selected, expected):
    assert interval_for(60.0, status, secondary, selected) == expected


def test_the_clock_has_a_floor_for_imminent_changes_and_a_ceiling_while_queued():
    assert interval_for(2.0, "InProgress", "Starting", True) == 1.0  # never faster than once a second
    assert interval_for(400.0, "InProgress", "Pending", False) == 300.0  # queued: at most every 5 minutes
    assert MAX_BACKOFF_SECONDS == 300.0


def test_backoff_doubles_from_half_the_interval_and_stops_at_five_minutes():
    assert [backoff_seconds(4.0, failures) for failures in range(1, 8)] == [2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0]
    assert backoff_seconds(4.0, 9) == 256.0  # the exponent stops at 8
    assert backoff_seconds(4.0, 30) == 256.0
    assert backoff_seconds(60.0, 8) == 300.0


def test_a_view_is_looked_at_on_the_clock_of_its_state():
    from airflow_sm_prefs.sagemaker.job_view import JobView
    from tests.unit.test_task_life import described

    queued = JobView.parse(TRAINING, described("j"))
    running = JobView.parse(TRAINING, described("j", selected="ml.p4d.24xlarge"))
    assert (view_interval(60.0, queued), view_interval(60.0, running)) == (120.0, 60.0)


def test_what_an_observation_means_for_each_wait():
    from airflow_sm_prefs.sagemaker.job_view import JobView
    from tests.unit.test_task_life import described

    queued = JobView.parse(TRAINING, described("j"))
    chosen = JobView.parse(TRAINING, described("j", selected="ml.p4d.24xlarge"))
    ended = JobView.parse(TRAINING, described("j", "Failed"))
    assert (observe(queued, "selection"), observe(queued, "completion")) == (None, None)
    assert (observe(chosen, "selection"), observe(chosen, "completion")) == (WaitOutcome.SELECTED, None)
    assert (observe(ended, "selection"), observe(ended, "completion")) == (WaitOutcome.FINISHED, WaitOutcome.FINISHED)


def test_the_nearest_limit_ends_a_wait_and_the_pending_one_only_before_a_selection():
    now = pendulum.datetime(2026, 12, 1, 0, 0, tz="UTC")
    soon, later = now.add(minutes=10), now.add(hours=1)
    assert next_limit(now, None, None, False) == (None, WaitOutcome.TIMEOUT)
    assert next_limit(now, later, soon, False) == (600.0, WaitOutcome.PENDING_TIMEOUT)
    assert next_limit(now, later, soon, True) == (3600.0, WaitOutcome.TIMEOUT)
    assert next_limit(now, soon, later, False) == (600.0, WaitOutcome.TIMEOUT)
    assert next_limit(now, None, soon, False) == (600.0, WaitOutcome.PENDING_TIMEOUT)
    assert next_limit(now.add(hours=2), later, None, True) == (0.0, WaitOutcome.TIMEOUT), (
        "a limit passed is 0, never less"
    )


# -- deadlines -------------------------------------------------------------------------------------------------

SUBMITTED = "2026-12-01T00:00:00+00:00"


def _deadlines(*args: Any, **kwargs: Any) -> tuple[str, str | None]:
    """``wait_deadlines``, times inside, as the trigger serializes them."""
    deadline, pending = deadlines.wait_deadlines(*args, **kwargs)
    assert isinstance(deadline, dt.datetime) and (pending is None or isinstance(pending, dt.datetime))
    return deadline.isoformat(), pending.isoformat() if pending else None


def test_the_wait_deadline_is_the_pending_and_run_limits_plus_an_hour():
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 7200, "MaxPendingTimeInSeconds": 3600}}
    deadline, pending = _deadlines(TRAINING, request, submitted_at=SUBMITTED, max_pending=None, wait_timeout=None)
    assert deadline == "2026-12-01T04:00:00+00:00"  # 1 h pending + 2 h run + 1 h slack
    assert pending is None, "SageMaker enforces a training job's pending limit"


def test_without_limits_the_wait_lasts_two_days_pending_one_day_running_and_an_hour():
    deadline, _ = _deadlines(TRAINING, {}, submitted_at=SUBMITTED, max_pending=None, wait_timeout=None)
    assert deadline == "2026-12-04T01:00:00+00:00"


def test_a_processing_jobs_pending_limit_is_the_tasks_to_enforce():
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 600}}
    deadline, pending = _deadlines(PROCESSING, request, submitted_at=SUBMITTED, max_pending=1800, wait_timeout=None)
    assert (deadline, pending) == ("2026-12-01T01:40:00+00:00", "2026-12-01T00:30:00+00:00")


def test_a_processing_job_without_max_pending_waits_two_days_and_the_task_enforces_none():
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 600}}
    deadline, pending = _deadlines(PROCESSING, request, submitted_at=SUBMITTED, max_pending=None, wait_timeout=None)
    assert (deadline, pending) == ("2026-12-03T01:10:00+00:00", None)


def test_the_earlier_of_max_pending_and_finish_by_bounds_a_processing_jobs_wait():
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 600}}
    later = "2026-12-01T02:00:00+00:00"
    deadline, pending = _deadlines(
        PROCESSING, request, submitted_at=SUBMITTED, max_pending=1800, wait_timeout=None, pending_until=later
    )
    assert (deadline, pending) == ("2026-12-01T01:40:00+00:00", "2026-12-01T00:30:00+00:00")


def test_wait_timeout_replaces_the_derived_deadline():
    deadline, _ = _deadlines(TRAINING, {}, submitted_at=SUBMITTED, max_pending=None, wait_timeout=900)
    assert deadline == "2026-12-01T00:15:00+00:00"


def test_finish_by_brings_the_pending_deadline_forward_and_the_deadline_with_it():
    request = {"StoppingCondition": {"MaxRuntimeInSeconds": 3600, "MaxPendingTimeInSeconds": 86400}}
    until = "2026-12-01T02:00:00+00:00"
    deadline, pending = _deadlines(
        TRAINING, request, submitted_at=SUBMITTED, max_pending=None, wait_timeout=None, pending_until=until
    )
    assert (deadline, pending) == ("2026-12-01T04:00:00+00:00", until)


# -- the watcher's listing -------------------------------------------------------------------------------------


class _ListingClient:
    """Answers ``ListTrainingJobs`` as SageMaker does: jobs modified after the time asked, whole seconds."""

    def __init__(self, modified: dict[str, float]) -> None:
        self.modified = modified
        self.asked: list[dt.datetime] = []

    async def list_training_jobs(self, LastModifiedTimeAfter: dt.datetime, MaxResults: int, **_: Any) -> dict:
        self.asked.append(LastModifiedTimeAfter)
        summaries = [
            {
                "TrainingJobName": name,
                "TrainingJobStatus": "InProgress",
                "SecondaryStatus": "Starting",
                "LastModifiedTime": dt.datetime.fromtimestamp(at, tz=dt.UTC),
            }
            for name, at in self.modified.items()
            if at > LastModifiedTimeAfter.timestamp()
        ]
        return {"TrainingJobSummaries": summaries}


async def test_the_listing_re_reads_ten_seconds_so_a_change_within_the_same_second_is_not_missed():
    job = watcher._Watched("queued", 1.0, summary_key=("InProgress", "Pending", 990.0))
    watching = watcher.JobWatcher(("k",), TRAINING, None, AdaptiveRateLimiter())  # type: ignore[arg-type]
    watching._jobs = {"queued": job}
    watching._cursor = 1000.9  # the service's clock when it last answered
    client = _ListingClient({"queued": 1000.0})  # it changed in that second, shown truncated
    assert await watching._list_changes(client) == ["queued"]
    assert client.asked == [dt.datetime.fromtimestamp(1000.9 - 10.0, tz=dt.UTC)]
    assert watcher.LIST_OVERLAP_SECONDS == 10.0


# -- costs -----------------------------------------------------------------------------------------------------


def _with_plan(request: dict[str, Any]) -> dict[str, Any]:
    request["ResourceConfig"]["InstancePreferences"][0]["TrainingPlanArns"] = ["arn:aws:sagemaker:plan/p"]
    return request


def _request() -> dict[str, Any]:
    return {
        "ResourceConfig": {
            "InstancePreferences": [
                {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 2},
                {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
            ]
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 3600},
    }


def test_a_plan_backed_entry_is_exempt_from_the_cost_caps():
    caps = cost_caps.CostCaps(max_hourly_cost_usd=50.0)
    priced = prices.parse(table({"us-east-1": {"training": {"ml.p5.48xlarge": 100, "ml.p4d.24xlarge": 10}}}), "t")
    assert set(cost_caps.cost_violations(TRAINING, _request(), caps, table=priced, region="us-east-1")) == {0}
    assert cost_caps.cost_violations(TRAINING, _with_plan(_request()), caps, table=priced, region="us-east-1") == {}


def test_a_plan_backed_job_has_no_on_demand_cost_and_a_job_without_capacity_cost_nothing():
    priced = prices.parse(table({"us-east-1": {"training": {"ml.p5.48xlarge": 36}}}), "t")
    p5_for_200s = {
        "region": "us-east-1",
        "kind": "training",
        "instance_type": "ml.p5.48xlarge",
        "instance_seconds": 200,
    }
    assert prices.estimate(priced, **p5_for_200s, plan_backed=True) == prices.CostEstimate(None, "plan-backed")
    assert prices.estimate(priced, **p5_for_200s, plan_backed=False) == prices.CostEstimate(2.0, "on-demand")
    assert prices.estimate(
        priced, region="us-east-1", kind="training", instance_type=None, instance_seconds=None, plan_backed=False
    ) == prices.CostEstimate(0.0, "not-billed")


class _Stats:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def incr(self, name: str, tags: Any = None) -> None:
        self.sent.append(("incr", name, 1))

    def gauge(self, name: str, value: Any, tags: Any = None) -> None:
        self.sent.append(("gauge", name, value))

    def timing(self, name: str, value: Any, tags: Any = None) -> None:
        self.sent.append(("timing", name, value))


def _ended(cost: float | None, run_seconds: float | None) -> dict[str, Any]:
    return {
        "job_kind": "training",
        "selected_instance_type": "ml.p5.48xlarge",
        "selected_rank": 0,
        "outcome": "completed",
        "run_seconds": run_seconds,
        "estimated_cost_usd": cost,
    }


def test_an_unknown_cost_or_run_time_is_never_sent_to_metrics_as_zero(monkeypatch):
    stats = _Stats()
    monkeypatch.setattr(metrics, "_stats", lambda: stats)
    metrics.emit_end(_ended(None, None))  # type: ignore[arg-type]
    assert stats.sent == [("incr", "sm_prefs.ended", 1)]
    metrics.emit_end(_ended(0.0, 60.0))  # type: ignore[arg-type]
    assert stats.sent[1:] == [
        ("incr", "sm_prefs.ended", 1),
        ("timing", "sm_prefs.run_seconds", timedelta(seconds=60)),
        ("gauge", "sm_prefs.estimated_cost_usd", 0.0),
    ]


def test_a_selection_sends_its_rank_wait_and_whether_it_fell_back(monkeypatch):
    stats = _Stats()
    monkeypatch.setattr(announcement, "stats", lambda: stats)
    chosen = {
        "job_kind": "training",
        "selected_instance_type": "ml.p4d.24xlarge",
        "selected_rank": 1,
        "pending_seconds": 90.0,
        "fell_back": True,
    }
    announcement.emit_selection(chosen)  # type: ignore[arg-type]
    assert stats.sent == [
        ("incr", "sm_prefs.selected", 1),
        ("gauge", "sm_prefs.selected_rank", 1),
        ("timing", "sm_prefs.pending_seconds", timedelta(seconds=90)),
        ("incr", "sm_prefs.fallback", 1),
    ]
