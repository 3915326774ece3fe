"""``airflow-sm-prefs`` command line: the report, the advisor, capacity weather, the ledger and prices.

The development kit (airflow-sm-prefs-devkit: the emulator and the demo) adds its commands through the
``airflow_sm_prefs.commands`` entry point group, so the runtime never imports it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import importlib.metadata
import logging
import os
import sys
from pathlib import Path
from typing import Any

from airflow_sm_prefs.storage import bounded, object_storage
from airflow_sm_prefs.surface import arguments, command_output
from airflow_sm_prefs.surface.command_output import (
    CommandError,
    fail,
    if_the_store_failed,
    say,
    store_problem,
    tell,
    warn,
)


def _aws(arguments: list[str]) -> int:
    """The AWS CLI with this environment's SageMaker model: awscli 1.x from PyPI carries its own older
    botocore, whose model predates InstancePreferences; AWS_DATA_PATH makes it load the newer one."""
    import importlib.util
    import subprocess

    botocore = importlib.util.find_spec("botocore")
    if importlib.util.find_spec("awscli") is None or botocore is None or not botocore.submodule_search_locations:
        return fail("the AWS CLI is not installed in this environment (pip install awscli)")
    models = Path(next(iter(botocore.submodule_search_locations))) / "data"
    env = {**os.environ, "AWS_DATA_PATH": os.pathsep.join(filter(None, [str(models), os.environ.get("AWS_DATA_PATH")]))}
    return subprocess.run([sys.executable, "-m", "awscli", *arguments], env=env, check=False).returncode


def _ledger_setting() -> str:
    return object_storage.setting_behind("ledger_path", "ledger")


def _ledger_root() -> Any:
    """The ledger's root, refused when its bucket does not exist: else an empty report, as if no job had ended."""
    from airflow_sm_prefs.evidence import ledger

    return bounded.in_an_existing_bucket(ledger.location(), _ledger_setting())


def _read_ledger() -> Any:
    """Every DAG's entries: a report of one task still takes its evidence from all of them. On object storage,
    only the objects changed since this host's last run are fetched."""
    from airflow_sm_prefs.evidence import report_reading

    try:
        root = _ledger_root()
        if root.exists() and not root.is_dir():
            raise CommandError(f"{_ledger_setting()}: {object_storage.shown(root)} is a file, not a folder")
        reading, fold = report_reading.on_this_host(root)
    except (ValueError, OSError) as error:  # an unknown scheme, an unreachable store
        if_the_store_failed(error)
        raise CommandError(f"the ledger ({_ledger_setting()}) cannot be read: {error}") from None
    if fold is not None and fold.refused is not None:  # a role that may not delete: the reading stands
        warn(f"could not fold the ledger's old entries: {store_problem(fold.refused)}")
    elif fold is not None and fold.folded:
        warn(
            f"folded {fold.folded} old ledger entries into {fold.files} month object(s), so later "
            "readings fetch a few objects per month ([sm_prefs] ledger_compact_after)"
        )
    if reading.bad:
        warn(
            f"{reading.bad} ledger entr{'y' if reading.bad == 1 else 'ies'} could not be read and were skipped "
            f"(e.g. {'; '.join(reading.bad_examples)})"
        )
    return reading


def _report(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.analysis import kept_reports, report, report_text

    reading = _read_ledger()
    question = (args.since, args.dag_id, args.task_id, args.max_cost_premium, args.drift_tolerance)
    rows = kept_reports.remembered_rows(
        reading,
        question,
        lambda: report.summarize(
            reading.entries,
            since=args.since,
            dag_id=args.dag_id,
            task_id=args.task_id,
            max_cost_premium=args.max_cost_premium / 100.0,
            drift_tolerance=args.drift_tolerance / 100.0,
        ),
    )
    say(report_text.render(rows, args.format))
    if args.format == "table":
        from airflow_sm_prefs.analysis import plan_usage
        from airflow_sm_prefs.analysis.counterfactual import task_of

        filtered = (args.since, args.dag_id, args.task_id) != (None, None, None)
        scoped = {task_of(e) for e in reading.entries if report.in_scope(e, args.since, args.dag_id, args.task_id)}
        section = plan_usage.report_section(reading.entries, _plans_last_listed(), scoped if filtered else None)
        if section:
            say("\n" + "\n".join(section))
    return 0


def _plans_last_listed() -> tuple[dt.datetime, list[Any]] | None:
    """The account's plans as ``plans list|used`` last kept them in the shared store; None (and one warning)
    when that listing cannot be read: the report stands without it."""
    from airflow_sm_prefs.evidence import plan_snapshots
    from airflow_sm_prefs.storage import bounded

    try:
        listed = bounded.within("the training plans last listed", plan_snapshots.load_plans)
    except Exception as error:  # the store's failure costs the report its plans section, never the report
        warn(f"training plans left out of the report: {store_problem(error)}")
        return None
    if listed is None:
        return None
    taken_at, _, plans = listed
    return dt.datetime.fromisoformat(taken_at), plans


def _advise(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.analysis import advisor
    from airflow_sm_prefs.analysis.counterfactual import Timeline

    reading = _read_ledger()
    history = [e for e in reading.entries if (e["dag_id"], e["task_id"]) == (args.dag_id, args.task_id)]
    if not history:
        return fail(f"no job of {args.dag_id}.{args.task_id} in the capacity ledger")
    say(advisor.render(advisor.advise(history, Timeline(reading.entries)), args.format))
    return 0


def _weather(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.analysis import weather

    reading = _read_ledger()
    say(weather.render(weather.weather(reading.entries, region=args.region), args.format))
    return 0


def _doctor(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.surface import doctor

    findings = doctor.run(args.aws_conn_id, args.region)
    say(doctor.render(findings, args.format))
    return 1 if any(finding.status == "fail" for finding in findings) else 0


def _backfill(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.evidence.ledger_backfill import backfill
    from airflow_sm_prefs.sagemaker.hooks import SageMakerPreferenceHook

    hook = SageMakerPreferenceHook(aws_conn_id=args.aws_conn_id, region_name=args.region)
    try:
        counts = backfill(hook, args.since, region=hook.conn_region_name)
    except Exception as error:  # no connection, no permission, no service: one line, not a traceback
        return fail(f"backfill failed: {type(error).__name__}: {error}")
    if counts.kept_sent:
        say(f"{counts.kept_sent} entry(ies) this host kept while the store failed: sent")
    say(
        f"{counts.listed} job(s) listed: {counts.added} added, {counts.already} already in the ledger, "
        f"{counts.running} still running, {counts.not_ours} not launched by this provider"
    )
    return 0


def _compact(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.evidence import ledger, ledger_compaction

    try:
        result = ledger_compaction.compact(_ledger_root(), older_than=args.older_than)
    except (ValueError, OSError) as error:
        if_the_store_failed(error)
        return fail(
            str(error)
            if isinstance(error, ledger.LedgerError)
            else f"the ledger ({_ledger_setting()}) cannot be used: {error}"
        )
    if result.busy:
        tell("error", f"not compacted: {result.busy} holds the ledger's compaction lease; try again later")
        return 1  # the store's state, not a mistake in the command (as the store's failures)
    say(
        f"{result.folded} entr{'y' if result.folded == 1 else 'ies'} folded into {result.files} month file(s); "
        f"{result.kept} left as they are (recorded in the last {args.older_than}, unreadable, or written again "
        "while it ran)"
    )
    return 0


def build_parser(extensions: importlib.metadata.EntryPoints | None = None) -> argparse.ArgumentParser:
    """Every command: this package's, then each extension's (default: the installed ones)."""
    parser = argparse.ArgumentParser(prog="airflow-sm-prefs")
    commands = parser.add_subparsers(dest="command", required=True)
    aws = commands.add_parser(
        "aws",
        help="the AWS CLI with this environment's SageMaker model (knows InstancePreferences), e.g. "
        "`airflow-sm-prefs aws sagemaker list-training-jobs --endpoint-url http://127.0.0.1:8907`",
    )
    aws.add_argument("arguments", nargs=argparse.REMAINDER, help="arguments for `aws`")
    report = commands.add_parser("report", help="the capacity report: did each task's fallbacks pay off?")
    report.add_argument(
        "--dag-id", type=arguments.airflow_id, help="only this DAG's tasks (the evidence still comes from every DAG)"
    )
    report.add_argument("--task-id", type=arguments.airflow_id, help="only tasks of this id")
    report.add_argument(
        "--since", type=arguments.since, default=None, help="30d, 12h, 90m or an ISO 8601 time (default: all)"
    )
    report.add_argument("--format", choices=("table", "json", "csv"), default="table")
    report.add_argument(
        "--max-cost-premium",
        type=arguments.percent,
        default=25.0,
        help="percent more per job the fallbacks may cost than the first choice and still pay off (default 25)",
    )
    report.add_argument(
        "--drift-tolerance",
        type=arguments.percent,
        default=25.0,
        help="percent a configuration's median run may differ from its certified run time (default 25)",
    )
    report.set_defaults(handler=_report)
    advise = commands.add_parser(
        "advise", help="the task's current list against lists made from it, replayed on the task's own nights"
    )
    advise.add_argument("--dag-id", type=arguments.airflow_id, required=True)
    advise.add_argument("--task-id", type=arguments.airflow_id, required=True)
    advise.add_argument("--format", choices=("table", "json"), default="table")
    advise.set_defaults(handler=_advise)
    weather = commands.add_parser(
        "weather", help="capacity weather: how often each configuration had room, by hour of the week"
    )
    weather.add_argument("--region", type=arguments.region, default=None)
    weather.add_argument("--format", choices=("table", "json"), default="table")
    weather.set_defaults(handler=_weather)
    doctor = commands.add_parser(
        "doctor", help="check this host: the AWS connection, SageMaker permissions, botocore, the shared store"
    )
    doctor.add_argument("--aws-conn-id", default="aws_default")
    doctor.add_argument("--region", type=arguments.region, default=None, help="default: the connection's")
    doctor.add_argument("--format", choices=("table", "json"), default="table")
    doctor.set_defaults(handler=_doctor)
    ledger = commands.add_parser("ledger", help="the capacity ledger")
    ledger_commands = ledger.add_subparsers(dest="ledger_command", required=True)
    backfill = ledger_commands.add_parser("backfill", help="add the jobs SageMaker knows and the ledger misses")
    backfill.add_argument("--since", type=arguments.since, required=True, help="30d, 12h, 90m or an ISO 8601 time")
    backfill.add_argument("--aws-conn-id", default="aws_default")
    backfill.add_argument("--region", type=arguments.region, default=None)
    backfill.set_defaults(handler=_backfill)
    compact = ledger_commands.add_parser(
        "compact", help="fold older entries into one file per DAG and month (run it daily, from one place)"
    )
    compact.add_argument("--older-than", type=arguments.age, default="1d", help="1d, 12h or 90m (default 1d)")
    compact.set_defaults(handler=_compact)
    from airflow_sm_prefs.surface import plans_commands, prices_commands

    prices_commands.add_commands(commands)
    plans_commands.add_commands(commands, _read_ledger)
    for extension in _extensions() if extensions is None else extensions:
        extension.load()(commands)
    return parser


def _extensions() -> importlib.metadata.EntryPoints:
    """Each entry point is named after the command it adds and is called with the command subparsers."""
    return importlib.metadata.entry_points(group=COMMAND_EXTENSIONS)


COMMAND_EXTENSIONS = "airflow_sm_prefs.commands"
# What the development kit adds, so that asking for it without the kit says what to install.
DEVKIT_COMMANDS = frozenset({"emulator", "demo"})


RESULT_COMMANDS = frozenset({"report", "advise", "weather", "ledger", "prices", "doctor", "plans"})


def _with_verbose(parser: argparse.ArgumentParser) -> None:
    """``--verbose`` on every command, wherever it is given (``airflow-sm-prefs report --verbose``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in action.choices.values():
                if "--verbose" not in command._option_string_actions:
                    command.add_argument(
                        "--verbose",
                        action="store_true",
                        default=argparse.SUPPRESS,
                        help="also show Airflow's and the AWS SDK's own log lines",
                    )
                _with_verbose(command)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["aws"]:  # everything after `aws` is the AWS CLI's, options included
        return _aws(argv[1:])
    extensions = _extensions()
    parser = build_parser(extensions)
    parser.add_argument("--verbose", action="store_true", help="also show Airflow's and the AWS SDK's own log lines")
    _with_verbose(parser)
    if argv[:1] and argv[0] in DEVKIT_COMMANDS and argv[0] not in extensions.names:
        return fail(
            f"`airflow-sm-prefs {argv[0]}` comes with the development kit, airflow-sm-prefs-devkit, which is not "
            "installed here (from a checkout: pip install ./devkit; see docs/development.md)"
        )
    args = parser.parse_args(argv)
    # A command that answers prints its answer and its errors; Airflow's and the AWS SDK's own lines (reading
    # the config, the timezone, credentials) only with --verbose. The long-running ones (emulator, demo) log.
    answers = args.command in RESULT_COMMANDS
    if getattr(args, "verbose", False):
        level = logging.INFO if answers else logging.DEBUG
    else:
        level = logging.WARNING if answers else logging.INFO
        if answers:  # Airflow's structured log (the AWS hook's "No connection ID provided", S3's credentials)
            os.environ["AIRFLOW__LOGGING__LOGGING_LEVEL"] = "WARNING"
    logging.basicConfig(level=level)
    # Airflow logs to whatever sys.stdout is when a logger is first used (reading a connection logs a line):
    # a report's stdout is its result, which users pipe to jq or a CSV file, so Airflow's lines go to stderr.
    # The long-running commands (emulator, demo) keep their own output where it was.
    command_output.answer_to(sys.stdout)
    quiet_stdout = args.command in RESULT_COMMANDS
    try:
        with contextlib.redirect_stdout(sys.stderr) if quiet_stdout else contextlib.nullcontext():
            return int(args.handler(args))
    except CommandError as error:
        return fail(str(error))
    except Exception as error:
        from airflow_sm_prefs.storage import store_errors

        problem = store_errors.explained(error)
        if problem is None:
            raise  # not the store's: a bug, shown whole
        fail(problem.line(object_storage.store_named()))
        return 2 if problem.setting else 1


if __name__ == "__main__":
    sys.exit(main())
