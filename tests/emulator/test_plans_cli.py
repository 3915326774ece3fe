"""``airflow-sm-prefs plans`` against the emulator: offerings shown and kept, the account's plans listed, and
``plans reserve``, which calls ``CreateTrainingPlan`` only for an offering this host was shown, at a fee within
``--max-usd``, confirmed by a person (or ``--yes``)."""

from __future__ import annotations

import io
import json

import pytest

from airflow_sm_prefs.surface import cli
from sm_prefs_devkit.emulator.scenario import parse_faults
from tests.helpers import boto_client

pytestmark = pytest.mark.emulator

P5 = "ml.p5.48xlarge"
SUPPLY = f"""
speed: 1
capacity: {{{P5}: 0}}
plan_supply:
  - {{instance_type: {P5}, count: 2, start: 3600, end: 2592000, usd_per_instance_hour: 30}}
"""


@pytest.fixture
def emulated(start_emulator, aws_connection, tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "home"))  # where the offerings shown are kept
    scenario = tmp_path / "supply.yaml"
    scenario.write_text(SUPPLY)
    server = start_emulator(str(scenario))
    return server, aws_connection(server)


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        status = cli.main(list(argv))
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return status, out, err


def _shown(capsys, conn: str, count: int = 2) -> list[dict]:
    status, out, _ = _run(
        capsys, "plans", "offerings", "--aws-conn-id", conn, "--instance-type", P5, "--count", str(count),
        "--format", "json",
    )  # fmt: skip
    assert status == 0
    return json.loads(out)


def _bought(server) -> int:
    return server.engine.calls["CreateTrainingPlan"]


def test_offerings_are_shown_with_their_fee_and_how_to_buy_one(emulated, capsys):
    _, conn = emulated
    status, out, _ = _run(capsys, "plans", "offerings", "--aws-conn-id", conn, "--instance-type", P5, "--count", "2")
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 4 and all("2 x ml.p5.48xlarge" in line and "$1,440.00" in line for line in lines[:3])
    assert lines[-1] == "Buy one with: airflow-sm-prefs plans reserve OFFERING_ID --max-usd AMOUNT"


def test_reserve_buys_within_the_cap_when_told_yes_and_list_shows_it(emulated, capsys):
    server, conn = emulated
    offering = _shown(capsys, conn)[0]
    status, out, err = _run(
        capsys, "plans", "reserve", offering["offering_id"], "--max-usd", "1500", "--yes", "--aws-conn-id", conn
    )
    assert status == 0, err
    start = offering["start"][:16].replace("-", "").replace(":", "").replace("T", "-")
    name = f"p5-48xlarge-x2-{start}"
    assert out.splitlines()[0].startswith(f"Bought training plan {name}: {offering['offering_id']}")
    assert f"ARN: arn:aws:sagemaker:us-east-1:123456789012:training-plan/{name}" in out
    assert _bought(server) == 1
    status, out, _ = _run(capsys, "plans", "list", "--aws-conn-id", conn, "--format", "json")
    (plan,) = json.loads(out)
    assert (plan["name"], plan["status"], plan["instance_count"], plan["upfront_fee"]) == (name, "Pending", 2, 1440.0)
    status, out, _ = _run(capsys, "plans", "used", "--aws-conn-id", conn)
    assert (status, out.strip()) == (0, f"{name} is Pending: it has held no instance-hours yet")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--max-usd", "1000", "--yes"],
            "upfront fee is $1,440.00, more than --max-usd $1,000.00 (nothing was bought)",
        ),
        (["--max-usd", "1500"], "not confirmed (run it at a terminal, or add --yes); nothing was bought"),
        (["--max-usd", "1500", "--yes", "--name", "no spaces"], "--name 'no spaces': letters, digits"),
        # `$` would let a trailing newline through (re.match): the whole name is matched.
        (["--max-usd", "1500", "--yes", "--name", "plan-a\n"], "--name 'plan-a\\n': letters, digits"),
        (["--yes"], "the following arguments are required: --max-usd"),
        (["--max-usd", "-5", "--yes"], "a positive amount of US dollars, not '-5'"),
    ],
)
def test_reserve_refuses_without_buying(emulated, capsys, argv, message):
    server, conn = emulated
    offering = _shown(capsys, conn)[0]
    status, _, err = _run(capsys, "plans", "reserve", offering["offering_id"], "--aws-conn-id", conn, *argv)
    assert status == 2 and message in err, err
    assert _bought(server) == 0


def test_reserve_asks_a_person_at_a_terminal(emulated, capsys, monkeypatch):
    server, conn = emulated
    offering = _shown(capsys, conn)[0]["offering_id"]

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("sys.stdin", Terminal("n\n"))
    status, _, err = _run(capsys, "plans", "reserve", offering, "--max-usd", "1500", "--aws-conn-id", conn)
    assert status == 2 and "Buy training plan" in err and _bought(server) == 0
    monkeypatch.setattr("sys.stdin", Terminal("y\n"))
    status, _, err = _run(capsys, "plans", "reserve", offering, "--max-usd", "1500", "--aws-conn-id", conn)
    assert status == 0 and _bought(server) == 1


def test_reserve_refuses_an_offering_never_shown_here_or_gone_since(emulated, capsys):
    server, conn = emulated
    status, _, err = _run(capsys, "plans", "reserve", "tpo-made-up", "--max-usd", "9", "--yes", "--aws-conn-id", conn)
    assert status == 2 and "was not shown on this host" in err
    offering = _shown(capsys, conn)[0]["offering_id"]
    # Another team buys the whole supply for that window meanwhile.
    boto_client(server.endpoint_url).create_training_plan(TrainingPlanName="theirs", TrainingPlanOfferingId=offering)
    status, _, err = _run(capsys, "plans", "reserve", offering, "--max-usd", "1500", "--yes", "--aws-conn-id", conn)
    assert status == 2 and f"SageMaker no longer offers {offering}" in err
    assert _bought(server) == 1  # theirs only


def test_offerings_this_host_cannot_keep_are_shown_with_a_warning_and_cannot_be_bought(emulated, capsys, tmp_path):
    server, conn = emulated
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "sm_prefs").write_text("a file where the cache folder goes")  # nothing can be kept
    status, out, err = _run(capsys, "plans", "offerings", "--aws-conn-id", conn, "--instance-type", P5, "--count", "2")
    assert status == 0 and "$1,440.00" in out
    (said,) = [line for line in err.splitlines() if line.startswith("airflow-sm-prefs:")]
    assert said.startswith(
        "airflow-sm-prefs: warning: could not keep the offerings shown, so `plans reserve` cannot buy them: "
    )
    offering = out.split()[0]
    status, _, err = _run(capsys, "plans", "reserve", offering, "--max-usd", "1500", "--yes", "--aws-conn-id", conn)
    assert status == 2 and "was not shown on this host" in err and _bought(server) == 0


def test_a_listing_the_page_cannot_keep_is_said_once_without_the_stores_password(emulated, capsys, monkeypatch):
    from airflow_sm_prefs.evidence import plan_snapshots

    def store_down(*_: object) -> None:
        raise OSError("cannot write to http://ledger:hunter2@store.internal/plans.json")

    monkeypatch.setattr(plan_snapshots, "save_plans", store_down)
    _, conn = emulated
    status, out, err = _run(capsys, "plans", "list", "--aws-conn-id", conn)
    assert status == 0 and "No training plans in this account" in out
    (said,) = [line for line in err.splitlines() if line.startswith("airflow-sm-prefs:")]
    assert said == (
        "airflow-sm-prefs: warning: not kept for the Capacity page: OSError: cannot write to "
        "http://ledger:***@store.internal/plans.json"
    )
    assert "hunter2" not in out + err


def test_a_refused_listing_is_one_line_naming_the_code(emulated, capsys):
    server, conn = emulated
    server.emulator.faults = parse_faults({"deny": ["ListTrainingPlans"]})
    status, _, err = _run(capsys, "plans", "list", "--aws-conn-id", conn)
    assert status == 2
    (said,) = [line for line in err.splitlines() if line.startswith("airflow-sm-prefs:")]
    assert said.startswith("airflow-sm-prefs: error: listing training plans failed: AccessDeniedException")
    assert said.endswith("sagemaker:ListTrainingPlans action (check the connection's role)")


def _record(night: dict, **fields: object) -> None:
    """One of the unit tests' synthetic nights as the task would have written it to the ledger."""
    from airflow_sm_prefs.evidence import ledger_writing

    assert ledger_writing.write(
        {  # type: ignore[typeddict-item]
            **night,
            "format": 1,
            "run_id": night["job_name"],
            "map_index": -1,
            "plan_backed": False,
            "billable_instance_seconds": None,
            "cost_basis": "on-demand",
            "workload": None,
            "certified_run_seconds": None,
            "failure_reason": None,
            "started_at": None,
            "ended_at": None,
            "recorded_at": night["created_at"],
            "source": "task",
            **fields,
        }
    )


def test_the_report_says_what_ran_on_plans_and_what_they_held_once_listed(emulated, capsys, monkeypatch, tmp_path):
    """Without a listing kept, the report names the plans its jobs ran on and the command that asks SageMaker;
    once ``plans list`` kept one, it says what each plan held against what the jobs used."""
    from tests.unit.test_plan_advice import _night

    server, conn = emulated
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path / 'ledger'}")
    client = boto_client(server.endpoint_url)
    (offering, *_) = client.search_training_plan_offerings(
        InstanceType=P5, InstanceCount=1, DurationHours=24, TargetResources=["training-job"]
    )["TrainingPlanOfferings"]
    arn = client.create_training_plan(
        TrainingPlanName="nightly-p5", TrainingPlanOfferingId=offering["TrainingPlanOfferingId"]
    )["TrainingPlanArn"]
    _record(_night(0, sold_out=True))
    _record(_night(1, sold_out=False), training_plan_arn=arn, plan_backed=True, cost_basis="plan-backed")

    status, out, err = _run(capsys, "report")
    assert status == 0, err
    assert out.rstrip().endswith(
        "Training plans: 1 job(s) on nightly-p5. What each plan held is not known here: `airflow-sm-prefs plans "
        "used` asks SageMaker (and keeps its listing for this report and the Capacity page)."
    )
    assert _run(capsys, "plans", "list", "--aws-conn-id", conn)[0] == 0
    status, out, err = _run(capsys, "report")
    assert status == 0, err
    heading, line = out.rstrip().splitlines()[-2:]
    assert heading.startswith("Training plans, as SageMaker listed them at ")
    assert line == "  nightly-p5 is Pending: it has held no instance-hours yet"
    status, out, _ = _run(capsys, "report", "--format", "json")
    assert [row["task_id"] for row in json.loads(out)] == ["train"]  # the JSON report keeps its shape


def test_advise_for_a_dag_or_task_the_ledger_has_no_job_of_is_an_error(emulated, capsys, monkeypatch, tmp_path):
    """As `advise` of an unknown task: an empty answer would read as "nothing to reserve"."""
    from tests.unit.test_plan_advice import _ledger

    server, conn = emulated
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path / 'ledger'}")
    for night in _ledger(3, 1):
        _record(night)
    known = json.loads(_run(capsys, "plans", "advise", "--aws-conn-id", conn, "--format", "json")[1])[0]["tasks"][0]
    dag_id, task_id = known.split(".", 1)
    for argv, named in (
        (["--dag-id", "nightly_eval"], "DAG nightly_eval"),
        (["--dag-id", dag_id, "--task-id", "evaluate"], f"{dag_id}.evaluate"),
    ):
        searched = server.engine.calls["SearchTrainingPlanOfferings"]
        status, out, err = _run(capsys, "plans", "advise", "--aws-conn-id", conn, *argv)
        assert (status, out) == (2, "")
        assert err == f"airflow-sm-prefs: error: no job of {named} in the capacity ledger\n"
        assert server.engine.calls["SearchTrainingPlanOfferings"] == searched, "nothing searched"
    assert _run(capsys, "plans", "advise", "--aws-conn-id", conn, "--dag-id", dag_id, "--task-id", task_id)[0] == 0


def test_advise_weighs_the_ledger_against_an_offering_that_reserve_then_buys(emulated, capsys, monkeypatch, tmp_path):
    """The demo's story in one test: eight of ten nights sold out, an offering whose fee repays it, bought."""
    from tests.unit.test_plan_advice import _ledger

    server, conn = emulated
    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path / 'ledger'}")
    for night in _ledger(10, 8):
        _record(night)
    status, out, err = _run(capsys, "plans", "advise", "--aws-conn-id", conn, "--format", "json")
    assert status == 0, err
    (group,) = json.loads(out)
    # 1 x p5 for 7 days at $30 an instance-hour: $5,040, $720 a job against $100 on demand: it does not pay.
    assert (group["first_choice"], group["verdict"]) == ("1 x ml.p5.48xlarge", "do not reserve")
    assert group["offering"]["upfront_fee"] == 5040.0 and group["break_even_share"] > 1
    searched = server.engine.calls["SearchTrainingPlanOfferings"]
    _run(capsys, "plans", "advise", "--aws-conn-id", conn)
    assert server.engine.calls["SearchTrainingPlanOfferings"] == searched  # kept for the hour
    status, out, err = _run(
        capsys,
        "plans",
        "reserve",
        group["offering"]["offering_id"],
        "--max-usd",
        "6000",
        "--yes",
        "--aws-conn-id",
        conn,
    )
    assert status == 0 and out.startswith("Bought training plan p5-48xlarge-x1-"), err
