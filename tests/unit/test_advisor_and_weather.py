"""The advisor's replay of a task's nights, and the capacity weather, on histories whose answer is known."""

from __future__ import annotations

import json

from airflow_sm_prefs.analysis import advisor, weather
from airflow_sm_prefs.analysis.counterfactual import Timeline
from airflow_sm_prefs.surface import cli
from tests.unit.test_counterfactual import P4D, P5, _fine_tune, _hours_3_to_5, _job, _p5_only


def _advice(entries: list[dict]) -> dict[str, dict]:
    history = [e for e in entries if e["dag_id"] == "nightly"]
    return {row["candidate"]: row for row in advisor.advise(history, Timeline(entries))["candidates"]}


def test_where_the_fallback_paid_off_the_current_list_beats_the_first_choice_alone():
    advice = _advice(_fine_tune(5400.0) + _p5_only(_hours_3_to_5))
    current, alone = advice["the current list"], advice["the first choice alone"]
    # Half the nights p5 in a minute (1 h run), half p4d at once (1.5 h run).
    assert (current["time_to_result_p50_seconds"], current["time_to_result_p90_seconds"]) == (3660.0, 5400.0)
    # Alone, the fallback nights wait for p5 as the other DAG did (3 to 5 hours), then the 1 h run: 27 of 30
    # nights are over by 4.5 h + 1 h.
    assert alone["time_to_result_p90_seconds"] == 4.5 * 3600 + 3600
    assert not alone["better_than_current"] and current["nights"] == current["nights_with_a_result"] == 30


def test_where_it_did_not_the_first_choice_alone_is_better():
    advice = _advice(_fine_tune(3 * 3600.0) + _p5_only(lambda night: 300.0))
    alone = advice["the first choice alone"]
    assert alone["better_than_current"], alone
    assert alone["time_to_result_p90_seconds"] == 300 + 3600
    assert advice["the current list"]["time_to_result_p90_seconds"] == 3 * 3600


def test_an_entry_that_failed_on_the_request_or_the_code_is_never_offered_away():
    listed = [P5, P4D]
    history = [_job("nightly", "fine_tune", n, listed, 0, 60.0, 3600.0) for n in range(4)]
    for n, reason in enumerate(
        ("ClientError: Artifact upload failed: the bucket 'b' does not exist", "AlgorithmError: KeyError")
    ):
        failed = {"outcome": "failed_after_start", "failure_reason": reason}
        history.append({**_job("nightly", "fine_tune", 4 + n, listed, 1, 0.0, 60.0), **failed})
    labels = [c.label for c in advisor.candidates(listed, history)]
    assert not any(label.startswith("without") for label in labels), labels


def test_an_entry_that_failed_on_its_hardware_is_offered_away_and_one_never_chosen_too():
    listed = [P5, P4D, ("ml.g5.48xlarge", 1)]
    history = [_job("nightly", "fine_tune", n, listed, 0, 60.0, 3600.0) for n in range(4)]
    cuda = "AlgorithmError: CUDA error: no kernel image is available for execution on the device"
    failed = {"outcome": "failed_after_start", "failure_reason": cuda}
    history.append({**_job("nightly", "fine_tune", 4, listed, 1, 0.0, 60.0), **failed})
    labels = [c.label for c in advisor.candidates(listed, history)]
    assert "without #2 (failed on its hardware in 1 of 1)" in labels
    assert "without #3 (never chosen in 5 jobs)" in labels
    assert "the first choice alone" in labels and "#3 (1 x ml.g5.48xlarge) first" in labels


def test_a_night_where_no_entry_was_seen_free_waits_past_the_evidence():
    history = [_job("nightly", "fine_tune", n, [P5, P4D], None, 7200.0, 0.0) for n in range(3)]
    (current, *_) = advisor.advise(history)["candidates"]
    assert (current["nights_with_a_result"], current["nights_waiting_past_the_evidence"]) == (0, 3)
    assert current["time_to_result_p50_seconds"] is None


def test_weather_counts_only_what_says_something_about_the_configuration():
    entries = _fine_tune(5400.0) + _p5_only(_hours_3_to_5)
    rows = {(r["instance_type"], r["instance_count"]): r for r in weather.weather(entries)}
    p5 = rows[P5]
    # Fallback nights: fine_tune got p4d at once (says nothing of p5), p5_only waited 3-5 h (busy); other
    # nights both got p5 within two minutes.
    assert p5["jobs"] == 15 * 2 + 15
    shares = {cell["day"]: cell["got_it_within_15m_share"] for cell in p5["cells"]}
    assert all(cell["hour"] == 2 for cell in p5["cells"]) and set(shares) == set(weather.DAYS)
    assert round(sum(c["jobs"] * c["got_it_within_15m_share"] for c in p5["cells"])) == 30
    assert rows[P4D]["jobs"] == 15 and all(c["got_it_within_15m_share"] == 1.0 for c in rows[P4D]["cells"])
    assert weather.weather(entries, region="eu-west-1") == []
    text = weather.render(list(rows.values()), "table")
    assert "us-east-1  1 x ml.p5.48xlarge  (45 job(s))" in text and "Mon  " in text


def test_the_cli_advises_and_forecasts_from_the_whole_ledger(tmp_path, monkeypatch, capsys):
    from airflow_sm_prefs.evidence import ledger_writing

    monkeypatch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{tmp_path}/ledger")
    for entry in _fine_tune(5400.0) + _p5_only(_hours_3_to_5):
        assert ledger_writing.write(entry)  # type: ignore[arg-type]
    assert cli.main(["advise", "--dag-id", "nightly", "--task-id", "fine_tune", "--format", "json"]) == 0
    advice = json.loads(capsys.readouterr().out)
    assert advice["nights"] == 30 and advice["candidates"][0]["candidate"] == "the current list"
    assert cli.main(["weather", "--format", "json"]) == 0
    assert {r["instance_type"] for r in json.loads(capsys.readouterr().out)} == {P5[0], P4D[0]}
    assert cli.main(["report", "--dag-id", "nightly", "--format", "json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["verdict"] == "paid_off", "one DAG's report still draws on the other DAG's jobs"
    assert cli.main(["advise", "--dag-id", "nightly", "--task-id", "nope"]) == 2
    assert "no job of nightly.nope" in capsys.readouterr().err


def test_every_figure_of_the_advice_on_three_nights_with_costs():
    """Three nights, whole: p5 in a minute (1 h run, $100), p4d at once (1.5 h, $150), p5 in two minutes ($110)."""
    history = [
        {**_job("nightly", "fine_tune", 0, [P5, P4D], 0, 60.0, 3600.0), "estimated_cost_usd": 100.0},
        {**_job("nightly", "fine_tune", 1, [P5, P4D], 1, 0.0, 5400.0), "estimated_cost_usd": 150.0},
        {**_job("nightly", "fine_tune", 2, [P5, P4D], 0, 120.0, 3600.0), "estimated_cost_usd": 110.0},
    ]
    both = [{"instance_type": P5[0], "instance_count": 1}, {"instance_type": P4D[0], "instance_count": 2}]

    def candidate(label: str, preferences: list, p50: float, p90: float, answered: int, better: bool) -> dict:
        return {
            "candidate": label,
            "preferences": preferences,
            "time_to_result_p50_seconds": p50,
            "time_to_result_p90_seconds": p90,
            # Each night's cost is the median of what its configuration cost on this task: p5 $100, p4d $150.
            "estimated_cost_usd_p50": 100.0,
            "nights": 3,
            "nights_with_a_result": answered,
            "nights_waiting_past_the_evidence": 3 - answered,
            "nights_without_a_run_time": 0,
            "nights_without_evidence": 0,
            "never_seen": [],
            "better_than_current": better,
        }

    assert advisor.advise(history) == {
        "current": both,
        "nights": 3,
        "candidates": [
            candidate("the current list", both, 3720.0, 5400.0, 3, False),
            # The night p4d was taken, nothing says how long p5 stayed busy: waiting past the evidence.
            candidate("the first choice alone", both[:1], 3660.0, 3720.0, 2, True),
            candidate(f"#2 (2 x {P4D[0]}) first", both[::-1], 3720.0, 5400.0, 3, False),
        ],
    }
    assert advisor.advise([{**history[0], "preferences": []}]) == {
        "current": [],
        "nights": 0,
        "candidates": [],
        "note": "the task's latest job lists no configuration",
    }


def test_a_configuration_no_job_ever_saw_is_not_replayed_with_anothers_figures():
    """g5 listed third, never reached: "g5 first" must not borrow p4d's nights (the night says nothing of g5)."""
    g5 = ("ml.g5.48xlarge", 4)
    listed = [P5, P4D, g5]
    history = [_job("nightly", "fine_tune", n, listed, 1, 0.0, 3600.0) for n in range(3)]  # p5 busy, p4d at once
    advice = advisor.advise(history)
    rows = {row["candidate"]: row for row in advice["candidates"]}
    g5_first = rows[f"#3 (4 x {g5[0]}) first"]
    assert (g5_first["time_to_result_p50_seconds"], g5_first["nights_without_evidence"]) == (None, 3)
    assert g5_first["never_seen"] == [f"4 x {g5[0]}"] and not g5_first["better_than_current"]
    current = rows["the current list"]
    assert (current["nights_without_evidence"], current["nights_with_a_result"]) == (0, 3), "p4d ahead of g5"
    assert f"3 not replayable (no job ever saw 4 x {g5[0]})" in advisor.render(advice, "table")


def test_the_candidates_of_a_list_each_in_its_order():
    g5 = ("ml.g5.48xlarge", 1)
    listed = [P5, P4D, g5]
    placed = [_job("nightly", "fine_tune", n, listed, 0, 60.0, 3600.0) for n in range(3)]  # MIN_NIGHTS jobs, all p5
    assert [(c.label, c.configurations) for c in advisor.candidates(listed, placed)] == [
        ("the current list", (P5, P4D, g5)),
        ("the first choice alone", (P5,)),
        (f"#2 (2 x {P4D[0]}) first", (P4D, P5, g5)),
        (f"#3 (1 x {g5[0]}) first", (g5, P5, P4D)),
        ("without #2 (never chosen in 3 jobs)", (P5, g5)),
        ("without #3 (never chosen in 3 jobs)", (P5, P4D)),
    ]
    fewer = [c.label for c in advisor.candidates(listed, placed[:2])]
    assert not any(label.startswith("without") for label in fewer), "two jobs are too few to call an entry unused"
    assert [c.label for c in advisor.candidates([P5], placed)] == ["the current list"]


def test_better_means_sooner_somewhere_and_later_nowhere_or_as_soon_and_cheaper():
    def row(p50: float | None, p90: float | None, cost: float | None = 10.0) -> dict:
        return {"time_to_result_p50_seconds": p50, "time_to_result_p90_seconds": p90, "estimated_cost_usd_p50": cost}

    current = row(100.0, 200.0)
    assert advisor._better(row(90.0, 200.0), current)
    assert not advisor._better(row(90.0, 210.0), current), "later at the 90th percentile"
    assert not advisor._better(row(None, 100.0), current) and not advisor._better(current, row(100.0, None))
    assert advisor._better(row(100.0, 200.0, 9.0), current), "as soon, and cheaper"
    assert not advisor._better(row(100.0, 200.0, 10.0), current) and not advisor._better(
        row(100.0, 200.0, None), current
    )
