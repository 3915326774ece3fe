"""``airflow-sm-prefs plans``: the account's Flexible Training Plans, the offerings SageMaker would sell, the
advice of when one would pay, and the one command that buys a plan, when a person runs it.

``plans reserve`` buys only an offering this host was shown (by ``plans offerings`` or ``plans advise``): it asks
SageMaker again with the same search, so the fee it checks against ``--max-usd`` is the one SageMaker gives now,
refuses a fee above the cap or in another currency, and asks for a confirmation (``--yes`` where no person is at
a terminal). Nothing in a DAG or an operator ever calls ``CreateTrainingPlan``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Callable
from typing import Any

from airflow_sm_prefs.sagemaker import offerings_shown, plan_purchase, training_plans
from airflow_sm_prefs.sagemaker.connection import Connection
from airflow_sm_prefs.sagemaker.training_plans import fee_text
from airflow_sm_prefs.surface import arguments
from airflow_sm_prefs.surface.command_output import CommandError, say, warn


class PlanCommandError(CommandError):
    """The command cannot go on: said in one line, exit status 2, nothing bought."""


def add_commands(commands: Any, read_ledger: Callable[[], Any]) -> None:
    """The ``plans`` command and its actions, added to the CLI's subparsers; ``read_ledger`` is the CLI's reading
    of the ledger (with this host's cache and the fold)."""
    plans = commands.add_parser("plans", help="Flexible Training Plans: the account's, offerings, advice, reserve")
    actions = plans.add_subparsers(dest="plans_command", required=True)
    listing = actions.add_parser("list", help="the account's plans: status, instances in use, window, fee")
    _connection(listing)
    listing.add_argument("--format", choices=("table", "json"), default="table")
    listing.set_defaults(handler=_list)
    offerings = actions.add_parser("offerings", help="what SageMaker would sell now for a type, count and window")
    _connection(offerings)
    offerings.add_argument("--instance-type", required=True)
    offerings.add_argument("--count", type=arguments.positive, required=True)
    offerings.add_argument("--hours", type=arguments.positive, default=24, help="how long the plan lasts (default 24)")
    offerings.add_argument(
        "--after", type=arguments.moment, default=None, help="earliest start, ISO 8601 (default: now)"
    )
    offerings.add_argument("--within", type=arguments.days, default=14, help="days from --after to the latest end (14)")
    offerings.add_argument("--format", choices=("table", "json"), default="table")
    offerings.set_defaults(handler=_offerings)
    advise = actions.add_parser("advise", help="when a plan would pay: the ledger's evidence against offerings")
    _connection(advise)
    advise.add_argument("--dag-id", type=arguments.airflow_id, default=None)
    advise.add_argument(
        "--task-id", type=arguments.airflow_id, default=None, help="with --dag-id: only the group holding this task"
    )
    advise.add_argument("--horizon-days", type=arguments.days, default=7, help="the plan's length to weigh (default 7)")
    advise.add_argument(
        "--value-per-hour", type=arguments.amount_or_zero, default=0.0, help="USD an hour of delay costs (default 0)"
    )
    advise.add_argument("--format", choices=("table", "json"), default="table")
    advise.set_defaults(handler=lambda args: _advise(args, read_ledger))
    used = actions.add_parser("used", help="what each plan bought: instance-hours held and used, jobs served")
    _connection(used)
    used.add_argument("--format", choices=("table", "json"), default="table")
    used.set_defaults(handler=lambda args: _used(args, read_ledger))
    reserve = actions.add_parser("reserve", help="buy an offering shown by `plans offerings` or `plans advise`")
    _connection(reserve)
    reserve.add_argument("offering_id")
    reserve.add_argument("--max-usd", type=arguments.amount, required=True, help="the most its upfront fee may be")
    reserve.add_argument("--name", default=None, help="the plan's name (default: derived from type, count, start)")
    reserve.add_argument("--yes", action="store_true", help="buy without asking (for scripts)")
    reserve.set_defaults(handler=_reserve)


def _connection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--aws-conn-id", default="aws_default")
    parser.add_argument("--region", type=arguments.region, default=None, help="default: the connection's")


def _client(args: argparse.Namespace, region: str | None = None) -> Any:
    return training_plans.client(Connection(aws_conn_id=args.aws_conn_id, region_name=region or args.region))


def _failed(action: str, error: BaseException) -> PlanCommandError:
    return PlanCommandError(training_plans.call_failed(action, error))


# -- list ----------------------------------------------------------------------------------------------------


def _account_plans(args: argparse.Namespace) -> tuple[list[training_plans.PlanState], dt.datetime]:
    """The account's plans and the service's clock when it listed them, kept in the shared store for the
    Capacity page as well."""
    from airflow_sm_prefs.evidence import plan_snapshots

    sagemaker = _client(args)
    try:
        plans, listed_at = training_plans.listed_plans(sagemaker)
    except Exception as error:
        raise _failed("listing training plans", error) from None
    _kept_for_the_page(lambda: plan_snapshots.save_plans(plans, sagemaker.meta.region_name, listed_at))
    return plans, listed_at


def _kept_for_the_page(save: Callable[[], None]) -> None:
    try:
        save()
    except Exception as error:  # the store's failure costs the page its freshness, never the command
        warn(f"not kept for the Capacity page: {type(error).__name__}: {str(error)[:200]}")


def _list(args: argparse.Namespace) -> int:
    plans, _ = _account_plans(args)
    if args.format == "json":
        say(json.dumps([plan.as_dict() for plan in plans], indent=2))
        return 0
    if not plans:
        say("No training plans in this account and Region.")
    for plan in sorted(plans, key=lambda plan: (plan.start or dt.datetime.max.replace(tzinfo=dt.UTC), plan.name)):
        row = plan.as_dict()
        say(
            f"{plan.name:<28} {plan.status:<9} {plan.total} x {plan.instance_type or '?':<20} "
            f"in use {plan.in_use}, free {plan.available}  {row['start'] or '?'} -> {row['end'] or '?'}  "
            f"fee {fee_text(plan.upfront_fee, plan.currency)}"
        )
    return 0


def _used(args: argparse.Namespace, read_ledger: Callable[[], Any]) -> int:
    from airflow_sm_prefs.analysis import plan_usage

    plans, listed_at = _account_plans(args)
    rows = plan_usage.usage(read_ledger().entries, plans, listed_at)
    say(plan_usage.render(rows, args.format))
    return 0


# -- offerings -----------------------------------------------------------------------------------------------


def window(after: dt.datetime | None, within: dt.timedelta) -> tuple[dt.datetime, dt.datetime]:
    start = after.astimezone(dt.UTC) if after is not None else dt.datetime.now(dt.UTC)
    return start, start + within


def _offerings(args: argparse.Namespace) -> int:
    after, before = window(args.after, dt.timedelta(days=args.within))
    query = {
        "instance_type": args.instance_type,
        "count": args.count,
        "hours": args.hours,
        "after": after.isoformat(),
        "before": before.isoformat(),
    }
    try:
        offerings = _searched(_client(args), query)
    except Exception as error:
        raise _failed("searching training plan offerings", error) from None
    if args.format == "json":
        say(json.dumps([offering.as_dict() for offering in offerings], indent=2))
        return 0
    if not offerings:
        say(f"No offering of {args.count} x {args.instance_type} for {args.hours}h between {after} and {before}.")
    for offering in offerings:
        say(plan_purchase.offering_line(offering))
    if offerings:
        say("Buy one with: airflow-sm-prefs plans reserve OFFERING_ID --max-usd AMOUNT")
    return 0


# -- advise ----------------------------------------------------------------------------------------------------

MAX_SEARCHES = 10  # per run: the rest of the groups are advised without offerings, and told so
SEARCH_SPACING_SECONDS = 0.5  # between two searches of one run: SearchTrainingPlanOfferings is rate-limited


def _advise(args: argparse.Namespace, read_ledger: Callable[[], Any]) -> int:
    from airflow_sm_prefs.analysis import plan_advice

    tasks = None
    if args.dag_id is not None:
        tasks = {f"{args.dag_id}.{args.task_id}"} if args.task_id else None
    reading = read_ledger()
    entries = [
        entry
        for entry in reading.entries
        if (args.dag_id is None or entry["dag_id"] == args.dag_id)
        and (args.region is None or entry["region"] == args.region)
    ]
    if args.dag_id is not None and not any(args.task_id in (None, entry["task_id"]) for entry in entries):
        # As `advise` says of a task it has no job of: an empty table would read as "nothing to reserve".
        named = f"{args.dag_id}.{args.task_id}" if args.task_id else f"DAG {args.dag_id}"
        raise PlanCommandError(
            f"no job of {named} in the capacity ledger" + (f" in {args.region}" if args.region else "")
        )
    searches = _Searches(args)
    advice = plan_advice.advise(
        entries, searches.offerings, horizon_days=args.horizon_days, value_per_hour=args.value_per_hour, tasks=tasks
    )
    say(plan_advice.render(advice, args.format))
    if args.dag_id is None:  # the whole picture, for the Capacity page
        from airflow_sm_prefs.evidence import plan_snapshots

        _kept_for_the_page(lambda: plan_snapshots.save_advice(advice, dt.datetime.now(dt.UTC)))
    if searches.skipped:
        warn(
            f"{searches.skipped} group(s) advised without offerings: at most {MAX_SEARCHES} searches a run "
            "(narrow it with --dag-id)"
        )
    return 0


class _Searches:
    """``SearchTrainingPlanOfferings`` for ``plans advise``: one per group and window, kept an hour on this host
    with the offerings shown (so ``plans reserve`` may buy one), at most ``MAX_SEARCHES`` a run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.made = 0
        self.skipped = 0

    def offerings(self, region: str | None, configuration: tuple[str, int], _: Any) -> list[training_plans.Offering]:
        import time

        from airflow_sm_prefs.analysis.plan_advice import NoOfferings

        reservable = training_plans.reservable_types()
        if reservable is not None and configuration[0] not in reservable:
            raise NoOfferings(f"SageMaker reserves training plans of {', '.join(sorted(reservable))} only")

        now = dt.datetime.now(dt.UTC)
        start = (now + dt.timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
        query = {
            "instance_type": configuration[0],
            "count": configuration[1],
            "hours": self.args.horizon_days * 24,
            "after": start.isoformat(),
            "before": (start + dt.timedelta(days=self.args.horizon_days + 7)).isoformat(),
            "region": region,
        }
        kept = offerings_shown.kept_search(query, now)
        if kept is not None:
            return kept
        if self.made >= MAX_SEARCHES:
            self.skipped += 1
            return []
        if self.made:
            time.sleep(SEARCH_SPACING_SECONDS)
        self.made += 1
        try:
            offerings = _searched(_client(self.args, region), query)
        except Exception as error:  # this group is advised without offerings; the others still are
            raise NoOfferings(str(_failed("the search for offerings", error))) from None
        offerings_shown.keep_search(query, offerings, now)
        return offerings


def _searched(sagemaker: Any, query: offerings_shown.Query) -> list[training_plans.Offering]:
    search = offerings_shown.search_and_remember(sagemaker, query)
    if search.not_kept is not None:
        warn(f"could not keep the offerings shown, so `plans reserve` cannot buy them: {search.not_kept}")
    return search.offerings


# -- reserve -------------------------------------------------------------------------------------------------


def _reserve(args: argparse.Namespace) -> int:
    try:
        purchase = plan_purchase.checked(
            args.offering_id, max_usd=args.max_usd, name=args.name, client_for=lambda region: _client(args, region)
        )
        if not args.yes and not _confirmed(f"Buy {purchase.summary()}? [y/N] "):
            raise PlanCommandError("not confirmed (run it at a terminal, or add --yes); nothing was bought")
        arn = plan_purchase.buy(purchase)
    except plan_purchase.PurchaseRefused as refused:
        raise PlanCommandError(str(refused)) from None
    say(f"Bought {purchase.summary()}")
    say(f"ARN: {arn}")
    say("Its status is Pending until SageMaker settles the purchase; `airflow-sm-prefs plans list` shows it.")
    return 0


def _confirmed(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")
