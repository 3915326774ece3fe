"""``airflow-sm-prefs prices``: the price table that cost estimates and cost caps read, refreshed from the AWS
Price List API into the team's table (``[sm_prefs] price_table``), and shown with where each price comes from.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from airflow_sm_prefs.storage import bounded, object_storage
from airflow_sm_prefs.storage.object_storage import StorageUnavailable
from airflow_sm_prefs.surface import arguments
from airflow_sm_prefs.surface.command_output import fail, if_the_store_failed, say, warn


def add_commands(commands: Any) -> None:
    """The ``prices`` command and its actions, added to the CLI's subparsers."""
    from airflow_sm_prefs.reference.price_list import API_REGIONS

    price_commands = commands.add_parser("prices", help="the price table cost estimates and cost caps read")
    price_actions = price_commands.add_subparsers(dest="prices_command", required=True)
    refresh = price_actions.add_parser("refresh", help="fetch on-demand prices from the AWS Price List API")
    refresh.add_argument(
        "--region",
        type=arguments.region,
        action="append",
        help="Region to price (repeatable; default: the connection's Region)",
    )
    refresh.add_argument("--aws-conn-id", default="aws_default")
    refresh.add_argument(
        "--api-region", choices=API_REGIONS, default="us-east-1", help="where the Price List API is asked"
    )
    refresh.add_argument(
        "--output", default=None, help="a path or URL (default: [sm_prefs] price_table, else <storage>/prices.json)"
    )
    refresh.set_defaults(handler=_refresh)
    show = price_actions.add_parser("show", help="the prices in effect and where they come from")
    show.add_argument("--region", type=arguments.region)
    show.set_defaults(handler=_show)


def _names_a_folder(given: str) -> bool:
    """A URL ending in '/' or naming a bucket alone, or a local folder: told before any AWS call (or hook)."""
    if object_storage.is_local(given):
        return os.path.isdir(os.path.expanduser(given.removeprefix("file://").removeprefix("local://")))
    _, _, path = given.partition("://")
    return given.endswith("/") or "/" not in path.strip("/")


def _refresh(args: argparse.Namespace) -> int:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    from airflow_sm_prefs.reference import price_list, prices

    if args.output and _names_a_folder(args.output):
        return fail(
            f"--output {args.output} names a folder or a bucket; name the table's file, e.g. "
            f"{args.output.rstrip('/')}/prices.json"
        )
    try:
        output = (
            object_storage.place(args.output, object_storage.setting("storage_conn_id"), "--output")
            if args.output
            else prices.user_table_path()
        )
    except StorageUnavailable as error:
        if_the_store_failed(error)
        return fail(str(error))
    try:
        client = AwsBaseHook(
            aws_conn_id=args.aws_conn_id, client_type="pricing", region_name=args.api_region
        ).get_conn()
        regions = args.region or [AwsBaseHook(aws_conn_id=args.aws_conn_id, client_type="sagemaker").conn_region_name]
        retrieved = price_list.retrieve(client, regions)
    except Exception as error:  # no connection, no permission, no service: one line, not a traceback
        return fail(f"prices refresh failed: {type(error).__name__}: {error}")
    if not retrieved.count():
        return fail(f"the Price List API gave no SageMaker training or processing price for {', '.join(regions)}")
    try:
        price_list.write(retrieved, output, client.meta.endpoint_url)
    except (prices.PriceTableError, OSError) as error:
        if_the_store_failed(error)
        return fail(str(error))
    for conflict in retrieved.conflicts:
        warn(f"two prices for {conflict}; the higher was kept")
    say(
        f"{retrieved.count()} price(s) for {', '.join(regions)} written to {output} ({retrieved.skipped} product(s) "
        "without a single on-demand hourly USD price skipped)"
    )
    return 0


def _show(args: argparse.Namespace) -> int:
    from airflow_sm_prefs.reference import prices

    setting = object_storage.setting_behind("price_table", "prices.json")
    try:  # what tasks would leave out, with a warning, and go on; the person asking is told
        users = prices.users_table(bounded.in_an_existing_bucket(prices.user_table_path(), setting))
    except prices.PriceTableError as error:
        return fail(f"{setting}: {error}; tasks use the shipped table without it")
    table = prices.shipped() if users is None else prices.shipped().layered(users)
    # The sources of the prices shown: the shipped table's line says why it has none only while nothing else does.
    used = {price.origin for price in table.entries.values()}
    for source in [source for source in table.sources if source in used] or table.sources:
        say(f"source: {source.source} (retrieved {source.retrieved or 'never'})")
    rows = sorted(key for key in table.entries if args.region is None or key[0] == args.region)
    if not rows and args.region is None:
        say("No prices: every cost is shown as unknown. Run `airflow-sm-prefs prices refresh`.")
    elif not rows:
        say(
            f"No prices for {args.region}: its costs are shown as unknown. "
            f"Run `airflow-sm-prefs prices refresh --region {args.region}`."
        )
    for region, kind, instance_type in rows:
        say(f"{region:<16} {kind:<11} {instance_type:<22} ${table.entries[(region, kind, instance_type)].usd:g}/h")
    return 0
