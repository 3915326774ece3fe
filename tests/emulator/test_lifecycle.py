"""Capacity, queueing and lifecycle behaviour of the emulator, driven with unmodified boto3 over HTTP."""

from __future__ import annotations

import datetime
import time
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from sm_prefs_devkit.emulator import scenario as scenario_module
from sm_prefs_devkit.emulator import service_model
from sm_prefs_devkit.local_stack import control
from tests.helpers import GPU_PAIR, boto_client, processing_request, training_request

pytestmark = pytest.mark.emulator


def _at_real_speed(tmp_path: Path, name: str) -> str:
    """A bundled scenario at speed 1: what a test reads between two calls then cannot pass by on a slow or
    busy machine (at 60x, a 20 s phase is a third of a real second)."""
    bundled = Path(scenario_module.__file__).parent / "scenarios" / f"{name}.yaml"
    copy = tmp_path / f"{name}.yaml"
    copy.write_text(bundled.read_text().replace("speed: 60", "speed: 1"))
    return str(copy)


def _resources(description: dict) -> dict:
    return description["ResourceConfig"]


def test_gpu_shortage_selects_second_preference(start_emulator):
    server = start_emulator("gpu-shortage")
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("fallback", GPU_PAIR))
    description = client.describe_training_job(TrainingJobName="fallback")
    assert _resources(description)["SelectedInstanceType"] == "ml.p4d.24xlarge"
    assert _resources(description)["SelectedInstanceCount"] == 2  # the per-preference count, not the first one's
    assert "InstanceType" not in _resources(description)
    assert description["SecondaryStatus"] == "Starting"


def test_uniform_count_applies_to_selected_type(start_emulator):
    server = start_emulator("gpu-shortage")
    client = boto_client(server.endpoint_url)
    preferences = [{"InstanceType": "ml.p5.48xlarge"}, {"InstanceType": "ml.g5.48xlarge"}]
    client.create_training_job(**training_request("uniform", preferences, InstanceCount=3))
    resources = _resources(client.describe_training_job(TrainingJobName="uniform"))
    assert (resources["SelectedInstanceType"], resources["SelectedInstanceCount"]) == ("ml.g5.48xlarge", 3)


def test_job_completes_with_billing_and_transitions(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("done", GPU_PAIR))
    control(server.endpoint_url, "advance", {"seconds": 10_000})
    description = client.describe_training_job(TrainingJobName="done")
    assert description["TrainingJobStatus"] == "Completed"
    assert [t["Status"] for t in description["SecondaryStatusTransitions"]] == [
        "Starting",
        "Downloading",
        "Training",
        "Uploading",
        "Completed",
    ]
    elapsed = (description["TrainingEndTime"] - description["TrainingStartTime"]).total_seconds()
    assert description["BillableTimeInSeconds"] == pytest.approx(elapsed, abs=1)
    assert description["ModelArtifacts"]["S3ModelArtifacts"].endswith("/done/output/model.tar.gz")


def test_queued_job_starts_on_highest_ranked_type_when_capacity_appears(start_emulator):
    server = start_emulator("all-busy-then-free", clock_stopped=True)
    client = boto_client(server.endpoint_url)
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g6.12xlarge", "InstanceCount": 1},
    ]
    client.create_training_job(**training_request("queued", preferences))
    waiting = client.describe_training_job(TrainingJobName="queued")
    assert (waiting["TrainingJobStatus"], waiting["SecondaryStatus"]) == ("InProgress", "Pending")
    assert "SelectedInstanceType" not in _resources(waiting)
    control(server.endpoint_url, "advance", {"seconds": 601})  # the scenario frees both types at t=600
    started = client.describe_training_job(TrainingJobName="queued")
    assert _resources(started)["SelectedInstanceType"] == "ml.p5.48xlarge"
    assert started["SecondaryStatus"] in ("Starting", "Downloading")


def test_queue_is_served_oldest_first(start_emulator):
    server = start_emulator("all-busy-then-free")
    client = boto_client(server.endpoint_url)
    only_p5 = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 3}]
    client.create_training_job(**training_request("first", only_p5))
    client.create_training_job(**training_request("second", only_p5))
    control(server.endpoint_url, "capacity", {"ml.p5.48xlarge": 3})
    assert "SelectedInstanceType" in _resources(client.describe_training_job(TrainingJobName="first"))
    assert client.describe_training_job(TrainingJobName="second")["SecondaryStatus"] == "Pending"


def test_pending_timeout_stops_job_without_selection(start_emulator):
    server = start_emulator("all-busy-then-free")
    client = boto_client(server.endpoint_url)
    request = training_request("patience", [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1}])
    request["StoppingCondition"]["MaxPendingTimeInSeconds"] = 1800
    client.create_training_job(**request)
    control(server.endpoint_url, "advance", {"seconds": 1801})
    description = client.describe_training_job(TrainingJobName="patience")
    assert description["TrainingJobStatus"] == "Stopped"
    assert "MaxPendingTimeInSeconds" in description["FailureReason"]
    assert "SelectedInstanceType" not in _resources(description)
    assert "BillableTimeInSeconds" not in description


def test_cpu_only_list_without_capacity_fails_with_capacity_error(start_emulator):
    server = start_emulator("ample")
    control(server.endpoint_url, "capacity", {"ml.m5.xlarge": 0, "ml.c5.xlarge": 0})
    client = boto_client(server.endpoint_url)
    cpu = [
        {"InstanceType": "ml.m5.xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
    ]
    client.create_training_job(**training_request("cpu", cpu))
    description = client.describe_training_job(TrainingJobName="cpu")
    assert description["TrainingJobStatus"] == "Failed"
    assert description["FailureReason"].startswith("CapacityError")


def test_stop_while_pending(start_emulator, tmp_path):
    server = start_emulator(_at_real_speed(tmp_path, "all-busy-then-free"))
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("stop-pending", GPU_PAIR))
    client.stop_training_job(TrainingJobName="stop-pending")
    assert client.describe_training_job(TrainingJobName="stop-pending")["TrainingJobStatus"] == "Stopping"
    control(server.endpoint_url, "advance", {"seconds": 30})
    description = client.describe_training_job(TrainingJobName="stop-pending")
    assert (description["TrainingJobStatus"], description["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "SelectedInstanceType" not in _resources(description)
    with pytest.raises(ClientError) as error:
        client.stop_training_job(TrainingJobName="stop-pending")
    assert error.value.response["Error"]["Code"] == "ValidationException"


def test_stop_while_running_releases_capacity_to_the_queue(start_emulator):
    server = start_emulator("all-busy-then-free")
    control(server.endpoint_url, "capacity", {"ml.p5.48xlarge": 1})
    client = boto_client(server.endpoint_url)
    only_p5 = [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}]
    client.create_training_job(**training_request("running", only_p5))
    client.create_training_job(**training_request("waiting", only_p5))
    client.stop_training_job(TrainingJobName="running")
    control(server.endpoint_url, "advance", {"seconds": 60})
    stopped = client.describe_training_job(TrainingJobName="running")
    assert stopped["TrainingJobStatus"] == "Stopped"
    assert _resources(stopped)["SelectedInstanceType"] == "ml.p5.48xlarge"
    assert (
        _resources(client.describe_training_job(TrainingJobName="waiting"))["SelectedInstanceType"] == "ml.p5.48xlarge"
    )


def test_max_runtime_is_enforced(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    request = training_request("slow", GPU_PAIR)
    request["StoppingCondition"]["MaxRuntimeInSeconds"] = 60
    client.create_training_job(**request)
    control(server.endpoint_url, "advance", {"seconds": 1000})
    description = client.describe_training_job(TrainingJobName="slow")
    assert (description["TrainingJobStatus"], description["SecondaryStatus"]) == (
        "Stopped",
        "MaxRuntimeExceeded",
    )


def test_incompatible_fallback_fails_after_starting(start_emulator):
    server = start_emulator("incompatible-fallback")
    client = boto_client(server.endpoint_url)
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.48xlarge", "InstanceCount": 1},
    ]
    client.create_training_job(**training_request("cuda", preferences))
    control(server.endpoint_url, "advance", {"seconds": 400})
    description = client.describe_training_job(TrainingJobName="cuda")
    assert description["TrainingJobStatus"] == "Failed"
    assert "no kernel image" in description["FailureReason"]
    assert _resources(description)["SelectedInstanceType"] == "ml.g5.48xlarge"


def test_full_training_plan_moves_on_to_on_demand(start_emulator):
    server = start_emulator("reserved-first")
    client = boto_client(server.endpoint_url)
    plan = server.engine.scenario.training_plans[0].arn
    preferences = [
        {"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "TrainingPlanArns": [plan]},
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
    ]
    client.create_training_job(**training_request("reserved", preferences))
    resources = _resources(client.describe_training_job(TrainingJobName="reserved"))
    assert resources["SelectedInstanceType"] == "ml.p4d.24xlarge"


def test_training_plan_with_room_is_used_even_without_on_demand_capacity(start_emulator, tmp_path):
    scenario = tmp_path / "plan.yaml"
    scenario.write_text(
        "capacity: {ml.p5.48xlarge: 0}\n"
        "training_plans:\n"
        "  - {arn: 'arn:aws:sagemaker:us-east-1:123456789012:training-plan/free-plan', "
        "instance_type: ml.p5.48xlarge, count: 2}\n"
    )
    server = start_emulator(str(scenario))
    client = boto_client(server.endpoint_url)
    preferences = [
        {
            "InstanceType": "ml.p5.48xlarge",
            "InstanceCount": 2,
            "TrainingPlanArns": ["arn:aws:sagemaker:us-east-1:123456789012:training-plan/free-plan"],
        }
    ]
    client.create_training_job(**training_request("on-plan", preferences))
    assert (
        _resources(client.describe_training_job(TrainingJobName="on-plan"))["SelectedInstanceType"] == "ml.p5.48xlarge"
    )


def test_processing_job_selects_and_completes(start_emulator):
    server = start_emulator("gpu-shortage")
    client = boto_client(server.endpoint_url)
    preferences = [
        {"InstanceType": "ml.g6.12xlarge", "InstanceCount": 1},
        {"InstanceType": "ml.g5.12xlarge", "InstanceCount": 2},
    ]
    client.create_processing_job(**processing_request("prep", preferences))
    cluster = client.describe_processing_job(ProcessingJobName="prep")["ProcessingResources"]["ClusterConfig"]
    assert (cluster["SelectedInstanceType"], cluster["SelectedInstanceCount"]) == ("ml.g5.12xlarge", 2)
    control(server.endpoint_url, "advance", {"seconds": 1000})
    description = client.describe_processing_job(ProcessingJobName="prep")
    assert description["ProcessingJobStatus"] == "Completed"
    assert description["ProcessingEndTime"] > description["ProcessingStartTime"]


def test_describe_unknown_job_is_a_validation_exception(start_emulator):
    client = boto_client(start_emulator().endpoint_url)
    for call, kwargs in (
        (client.describe_training_job, {"TrainingJobName": "nope"}),
        (client.describe_processing_job, {"ProcessingJobName": "nope"}),
    ):
        with pytest.raises(ClientError) as error:
            call(**kwargs)
        assert error.value.response["Error"]["Code"] == "ValidationException"


def test_unsupported_operation_is_a_clear_error(start_emulator):
    client = boto_client(start_emulator().endpoint_url)
    with pytest.raises(ClientError) as error:
        client.describe_endpoint(EndpointName="anything")
    assert error.value.response["Error"]["Code"] == "UnknownOperationException"
    assert "not supported by the airflow-sm-prefs emulator" in error.value.response["Error"]["Message"]


def test_list_filters_sorting_pagination_and_status_quirk(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    for index in range(5):
        client.create_training_job(**training_request(f"listed-{index}", GPU_PAIR))
        control(server.endpoint_url, "advance", {"seconds": 10})
    client.create_training_job(**training_request("other", GPU_PAIR))
    client.stop_training_job(TrainingJobName="listed-0")
    control(server.endpoint_url, "advance", {"seconds": 30})
    names: list[str] = []
    token = None
    while True:
        kwargs = {"NameContains": "listed", "MaxResults": 2, **({"NextToken": token} if token else {})}
        page = client.list_training_jobs(**kwargs)
        names += [s["TrainingJobName"] for s in page["TrainingJobSummaries"]]
        token = page.get("NextToken")
        if not token:
            break
    assert names == [f"listed-{i}" for i in range(5)]
    newest_first = client.list_training_jobs(SortOrder="Descending", MaxResults=100)["TrainingJobSummaries"]
    assert newest_first[0]["TrainingJobName"] == "other"
    # The documented quirk: MaxResults jobs are taken first, then filtered by status.
    quirky = client.list_training_jobs(StatusEquals="Stopped", MaxResults=1, SortOrder="Descending")
    assert quirky["TrainingJobSummaries"] == [] and "NextToken" in quirky
    stopped = client.list_training_jobs(StatusEquals="Stopped", MaxResults=100)["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in stopped] == ["listed-0"]
    control(server.endpoint_url, "advance", {"seconds": 10_000})  # everything terminal: nothing changes now
    everything = client.list_training_jobs(MaxResults=100)["TrainingJobSummaries"]
    latest = max(everything, key=lambda s: s["LastModifiedTime"])
    # botocore sends timestamps in whole seconds, so "after" is only exact to the second.
    one_second_later = latest["LastModifiedTime"] + datetime.timedelta(seconds=1)
    assert client.list_training_jobs(LastModifiedTimeAfter=one_second_later)["TrainingJobSummaries"] == []
    just_before = latest["LastModifiedTime"] - datetime.timedelta(seconds=1)
    recent = client.list_training_jobs(LastModifiedTimeAfter=just_before)["TrainingJobSummaries"]
    assert latest["TrainingJobName"] in [s["TrainingJobName"] for s in recent]


def test_every_response_validates_against_the_output_shapes(start_emulator):
    server = start_emulator("all-busy-then-free")
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("shape-t", GPU_PAIR))
    client.create_processing_job(**processing_request("shape-p", None, InstanceType="ml.m5.xlarge", InstanceCount=1))
    for seconds in (0, 700, 5000):
        control(server.endpoint_url, "advance", {"seconds": seconds})
        for operation, response in (
            ("DescribeTrainingJob", server.engine.describe("training", "shape-t")),
            ("DescribeProcessingJob", server.engine.describe("processing", "shape-p")),
            ("ListTrainingJobs", server.engine.list_jobs("training", {})),
            ("ListProcessingJobs", server.engine.list_jobs("processing", {})),
        ):
            assert service_model.response_violations(operation, response) == [], operation


def test_faults_throttle_and_fail(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    control(server.endpoint_url, "faults", {"throttle_rate": 1.0})
    with pytest.raises(ClientError) as error:
        client.list_training_jobs()
    assert error.value.response["Error"]["Code"] == "ThrottlingException"
    control(server.endpoint_url, "faults", {"error_rate": 1.0})
    with pytest.raises(ClientError) as error:
        client.list_training_jobs()
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 500
    control(server.endpoint_url, "faults", {})
    assert client.list_training_jobs()["TrainingJobSummaries"] == []


def test_lost_reply_carries_out_the_create_and_the_clients_retry_meets_resource_in_use(start_emulator):
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    control(server.endpoint_url, "faults", {"lost_reply_rate": 1.0})
    with pytest.raises(ClientError) as error:
        client.create_training_job(**training_request("lost-reply", GPU_PAIR))
    # botocore retried the 500 by itself; the retry found the job the first attempt had created.
    assert error.value.response["Error"]["Code"] == "ResourceInUse"
    assert error.value.response["ResponseMetadata"]["RetryAttempts"] == 1
    assert control(server.endpoint_url, "calls")["calls"]["CreateTrainingJob"] == 2
    assert [job["name"] for job in control(server.endpoint_url, "jobs")["jobs"]] == ["lost-reply"]


def test_slow_operations_delay_only_the_named_operation(start_emulator, monkeypatch):
    from sm_prefs_devkit.emulator import service as service_module

    slept: list[float] = []  # the emulator's own sleeps, recorded instead of timed
    monkeypatch.setattr(service_module.time, "sleep", slept.append)
    server = start_emulator("ample")
    client = boto_client(server.endpoint_url)
    control(server.endpoint_url, "faults", {"slow_operations": {"DescribeTrainingJob": 600}})
    client.create_training_job(**training_request("slow", GPU_PAIR))
    client.list_training_jobs()
    client.stop_training_job(TrainingJobName="slow")
    assert slept == []
    client.describe_training_job(TrainingJobName="slow")
    assert slept == [0.6]


def test_fault_settings_from_the_control_surface_are_validated(start_emulator):
    import urllib.error

    server = start_emulator("ample")
    with pytest.raises(urllib.error.HTTPError) as error:
        control(server.endpoint_url, "faults", {"throttle_rate": 0.8, "error_rate": 0.5})
    assert error.value.code == 400
    with pytest.raises(urllib.error.HTTPError):
        control(server.endpoint_url, "faults", {"throtle_rate": 0.5})


def test_state_file_keeps_jobs_and_clock_across_restart(start_emulator, tmp_path):
    state = tmp_path / "state.json"
    # At real speed, the seconds the restart takes count as seconds, not minutes.
    real_time = _at_real_speed(tmp_path, "all-busy-then-free")
    first = start_emulator(real_time, state_file=state)
    client = boto_client(first.endpoint_url)
    client.create_training_job(**training_request("survivor", GPU_PAIR))
    control(first.endpoint_url, "advance", {"seconds": 300})
    before = first.engine.clock.now()
    first.stop()
    time.sleep(1.5)  # the emulator is down: SageMaker's clock goes on meanwhile
    second = start_emulator(real_time, state_file=state)
    client = boto_client(second.endpoint_url)
    assert client.describe_training_job(TrainingJobName="survivor")["SecondaryStatus"] == "Pending"
    assert second.engine.clock.now() >= before + 1.5, "the clock never runs back, and the time down counts"
    control(second.endpoint_url, "advance", {"seconds": 301})  # the t=600 capacity event survived the restart
    resources = client.describe_training_job(TrainingJobName="survivor")["ResourceConfig"]
    assert resources["SelectedInstanceType"] == "ml.p5.48xlarge"


def test_a_restored_engine_is_the_engine_that_was_saved(start_emulator):
    from sm_prefs_devkit.emulator.engine import Engine

    server = start_emulator("all-busy-then-free")
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("queued", GPU_PAIR))
    client.create_processing_job(**processing_request("prep", [{"InstanceType": "ml.m5.xlarge"}], InstanceCount=1))
    saved = server.engine.to_state()
    restored = Engine.from_state(server.engine.scenario, saved)
    again = restored.to_state()
    moments = {"now", "saved_at"}
    assert {k: v for k, v in again.items() if k not in moments} == {k: v for k, v in saved.items() if k not in moments}
    # The scenario's capacity event is in the saved queue once, not scheduled a second time on restore.
    assert len(restored.events) == len(server.engine.events)
    assert restored.describe("training", "queued") == server.engine.describe("training", "queued")


def test_a_control_call_missing_a_field_is_a_bad_request(start_emulator):
    import urllib.error

    server = start_emulator("ample")
    with pytest.raises(urllib.error.HTTPError) as error:
        control(server.endpoint_url, "advance", {})
    assert error.value.code == 400
    assert control(server.endpoint_url, "health")["ok"] is True


def test_after_a_kill_the_clock_resumes_ahead_of_every_date_it_served(start_emulator, tmp_path):
    """A SIGKILL leaves the state file as at the last change; the virtual clock ran on after it (60x here),
    and clients list from the Date headers they saw. Resuming at the saved moment would move SageMaker's
    clock back by minutes and hide every change made in those minutes from a client's incremental listing
    (the fault campaign's emulator restart)."""
    import email.utils
    import shutil

    state = tmp_path / "state.json"
    first = start_emulator("all-busy-then-free", state_file=state)
    client = boto_client(first.endpoint_url)
    client.create_training_job(**training_request("queued", GPU_PAIR))  # the last change: the state is saved
    as_killed = tmp_path / "as-killed.json"
    shutil.copy(state, as_killed)
    time.sleep(1.0)  # a minute of virtual time with no change: nothing is saved

    def served_at(c) -> float:
        headers = c.list_training_jobs()["ResponseMetadata"]["HTTPHeaders"]
        return email.utils.parsedate_to_datetime(headers["date"]).timestamp()

    seen = served_at(client)
    first.stop()
    shutil.copy(as_killed, state)  # what a SIGKILL leaves behind
    second = start_emulator("all-busy-then-free", state_file=state)
    assert served_at(boto_client(second.endpoint_url)) >= seen


def test_a_job_runs_as_long_as_its_name_says_in_the_scenario(start_emulator, tmp_path):
    """``job_runtime_seconds``: one team's day-long job beside short ones on the same type; the longest prefix
    that matches wins, and a job no prefix matches runs its type's time."""
    scenario = tmp_path / "long-and-short.yaml"
    scenario.write_text(
        "name: long-and-short\ndefault_capacity: 8\nruntime_seconds: {default: 300}\n"
        "job_runtime_seconds: {team-b: 3600, team-b-pretrain: 72000}\n"
    )
    server = start_emulator(str(scenario))
    client = boto_client(server.endpoint_url)
    for name in ("team-b-pretrain-1", "team-b-eval-1", "nightly-1"):
        request = training_request(name, GPU_PAIR)
        request["StoppingCondition"]["MaxRuntimeInSeconds"] = 86400
        client.create_training_job(**request)
    control(server.endpoint_url, "advance", {"seconds": 200_000})
    ran = {}
    for name in ("team-b-pretrain-1", "team-b-eval-1", "nightly-1"):
        description = client.describe_training_job(TrainingJobName=name)
        assert description["TrainingJobStatus"] == "Completed", name
        ran[name] = description["TrainingTimeInSeconds"]
    # Each adds the scenario's download and upload phases (10 s each) to its workload's time.
    assert ran == {"team-b-pretrain-1": 72020, "team-b-eval-1": 3620, "nightly-1": 320}


def _with_selection_delay(tmp_path: Path, lowest: float, highest: float) -> str:
    copy = tmp_path / "delayed.yaml"
    copy.write_text(
        f"name: delayed\nspeed: 1\ndefault_capacity: 8\nselection_delay_seconds: [{lowest}, {highest}]\nseed: 4\n"
    )
    return str(copy)


def test_a_selection_delay_keeps_a_job_that_fits_pending_until_its_delay_passes(start_emulator, tmp_path):
    """Capacity frees seconds after the create: the Describe right after it says Pending, and the job is
    selected once its own delay (from the scenario's range) has passed, not before, even if capacity changes."""
    server = start_emulator(_with_selection_delay(tmp_path, 30, 30))
    client = boto_client(server.endpoint_url)
    client.create_training_job(**training_request("delayed", GPU_PAIR))
    first = client.describe_training_job(TrainingJobName="delayed")
    assert (first["SecondaryStatus"], _resources(first).get("SelectedInstanceType")) == ("Pending", None)
    control(server.endpoint_url, "capacity", {"ml.p5.48xlarge": 8})
    control(server.endpoint_url, "advance", {"seconds": 29})
    assert _resources(client.describe_training_job(TrainingJobName="delayed")).get("SelectedInstanceType") is None
    control(server.endpoint_url, "advance", {"seconds": 2})
    chosen = client.describe_training_job(TrainingJobName="delayed")
    assert (_resources(chosen)["SelectedInstanceType"], chosen["SecondaryStatus"]) == ("ml.p5.48xlarge", "Starting")


def test_each_job_draws_its_own_delay_from_the_range_the_same_on_every_run():
    scenario = scenario_module.parse({"selection_delay_seconds": [0, 10], "seed": 4})
    delays = [scenario.selection_delay_for(f"job-{number}") for number in range(200)]
    assert all(0 <= delay <= 10 for delay in delays)
    assert min(delays) < 1 and max(delays) > 9, "the whole range is used"
    assert delays == [scenario.selection_delay_for(f"job-{number}") for number in range(200)]
    assert scenario_module.parse({}).selection_delay_for("job") == 0.0
    with pytest.raises(scenario_module.ScenarioError, match="selection_delay_seconds"):
        scenario_module.parse({"selection_delay_seconds": [-1, 5]})


AFTER_WAITING = """
speed: 1
capacity: {ml.p5.48xlarge: 0, ml.p4d.24xlarge: 0}
events:
  - at: 3600  # from an hour in: back half an hour after the first job listing ml.p4d.24xlarge began waiting
    after_waiting: {instance_type: ml.p4d.24xlarge, seconds: 1800}
    set_capacity: {ml.p4d.24xlarge: 4}
"""


def _pending_seconds(client, name: str) -> float:
    described = client.describe_training_job(TrainingJobName=name)
    started = next(t["StartTime"] for t in described["SecondaryStatusTransitions"] if t["Status"] == "Starting")
    return (started - described["CreationTime"]).total_seconds()


def test_an_event_after_a_wait_comes_that_long_after_the_first_job_listing_its_type_began_waiting(
    start_emulator, tmp_path
):
    scenario = tmp_path / "after-waiting.yaml"
    scenario.write_text(AFTER_WAITING)
    state = tmp_path / "state.json"
    server = start_emulator(str(scenario), state_file=state, clock_stopped=True)
    client = boto_client(server.endpoint_url)
    p4d_alone = [{"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2}]
    client.create_training_job(**training_request("too-early", p4d_alone))  # before `at`: arms nothing
    control(server.endpoint_url, "advance", {"seconds": 4000})
    client.create_training_job(
        **training_request("other-type", [{"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1}])
    )
    control(server.endpoint_url, "advance", {"seconds": 5000})  # however long the client took to create it
    assert _resources(client.describe_training_job(TrainingJobName="too-early")).get("SelectedInstanceType") is None
    client.create_training_job(**training_request("waits", GPU_PAIR))
    began_waiting = client.describe_training_job(TrainingJobName="waits")["CreationTime"].timestamp()
    server.stop()  # the armed event is kept across a restart
    server = start_emulator(str(scenario), state_file=state, clock_stopped=True)
    client = boto_client(server.endpoint_url)
    # The clock moved while the emulator was down, as long as the restart took: count from where it stands.
    waited = control(server.endpoint_url, "health")["virtual_time"] - began_waiting
    control(server.endpoint_url, "advance", {"seconds": 1799 - waited})
    assert _resources(client.describe_training_job(TrainingJobName="waits")).get("SelectedInstanceType") is None
    control(server.endpoint_url, "advance", {"seconds": 2})
    for name in ("too-early", "waits"):
        assert _resources(client.describe_training_job(TrainingJobName=name))["SelectedInstanceType"] == (
            "ml.p4d.24xlarge"
        )
    assert abs(_pending_seconds(client, "waits") - 1800) < 1, "placed when the event came, half an hour in"
    assert _resources(client.describe_training_job(TrainingJobName="other-type")).get("SelectedInstanceType") is None


def test_the_clock_stops_while_a_client_does_several_things_and_still_moves_when_told(start_emulator):
    server = start_emulator("nightly-weather")  # 60 virtual seconds a real second
    said = control(server.endpoint_url, "clock", {"speed": 0})
    assert (said["speed"], said["was"]) == (0, server.engine.scenario.speed)
    stopped = control(server.endpoint_url, "health")["virtual_time"]
    time.sleep(0.5)  # 30 virtual seconds at the scenario's speed
    assert control(server.endpoint_url, "health")["virtual_time"] == stopped
    moved = control(server.endpoint_url, "advance", {"seconds": 3600})["virtual_time"]
    assert moved == stopped + 3600
    assert control(server.endpoint_url, "clock", {"speed": said["was"]})["was"] == 0
    time.sleep(0.1)
    assert control(server.endpoint_url, "health")["virtual_time"] > moved
    with pytest.raises(Exception, match="400"):
        control(server.endpoint_url, "clock", {"speed": -1})
