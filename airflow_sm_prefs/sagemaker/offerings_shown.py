"""The training plan offerings this host was shown, and the searches that showed them, kept on this host.

``plans reserve`` buys only an offering shown here within ``SHOWN_FOR``, asking SageMaker again with the search
that found it; ``plans advise`` makes one search per group and window an hour (``SEARCH_KEPT_FOR``), however
often it runs, because ``SearchTrainingPlanOfferings`` is rate-limited. Both files are this host's cache: a
file that cannot be read or written costs a search, never a command.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from pathlib import Path
from typing import Any, NamedTuple

from airflow_sm_prefs.sagemaker import training_plans

SHOWN_FOR = dt.timedelta(hours=6)  # an offering shown longer ago than this is searched for afresh
KEPT_SEARCHES = 64
SEARCH_KEPT_FOR = dt.timedelta(hours=1)  # one search per group and window an hour, however often advise runs

Query = dict[str, Any]  # instance_type, count, hours, after and before (ISO 8601), and the Region if not the default


class Search(NamedTuple):
    offerings: list[training_plans.Offering]
    not_kept: OSError | None  # why this host could not keep them: ``plans reserve`` then asks to search again


def search_and_remember(sagemaker: Any, query: Query) -> Search:
    """SageMaker's offerings for ``query``, each kept on this host with the query that found it, so ``plans
    reserve`` can ask again for the same one; the command that searched says it when they could not be kept."""
    offerings = training_plans.search(
        sagemaker,
        instance_type=query["instance_type"],
        count=query["count"],
        hours=query["hours"],
        after=dt.datetime.fromisoformat(query["after"]),
        before=dt.datetime.fromisoformat(query["before"]),
    )
    return Search(offerings, _remember(offerings, query))


def shown_query(offering_id: str, now: dt.datetime) -> Query | None:
    """The search that showed ``offering_id`` on this host within ``SHOWN_FOR`` of ``now``; None if none did."""
    shown = _shown().get(offering_id)
    if not isinstance(shown, dict) or now - _when(shown) >= SHOWN_FOR or not isinstance(shown.get("query"), dict):
        return None
    query: Query = shown["query"]
    return query


def kept_search(query: Query, now: dt.datetime) -> list[training_plans.Offering] | None:
    """The offerings a search for ``query`` found within ``SEARCH_KEPT_FOR`` of ``now``; None if none is kept."""
    try:
        kept = json.loads(_searches_file().read_bytes()).get(_query_key(query))
        if now - dt.datetime.fromisoformat(kept["at"]) < SEARCH_KEPT_FOR:
            return [training_plans.Offering.from_dict(offered) for offered in kept["offerings"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    return None


def keep_search(query: Query, offerings: list[training_plans.Offering], now: dt.datetime) -> None:
    from airflow_sm_prefs.storage import object_storage

    try:
        kept = json.loads(_searches_file().read_bytes())
        kept = {
            key: value for key, value in kept.items() if now - dt.datetime.fromisoformat(value["at"]) < SEARCH_KEPT_FOR
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        kept = {}
    kept[_query_key(query)] = {"at": now.isoformat(), "offerings": [offering.as_dict() for offering in offerings]}
    with contextlib.suppress(OSError):  # not kept: the next run searches again
        object_storage.replace_whole(_searches_file(), json.dumps(kept), prefix=".searches-")


def _shown_file() -> Path:
    from airflow_sm_prefs.storage import paths

    return Path(paths.default_file("cache")) / "training-plan-offerings.json"


def _searches_file() -> Path:
    return _shown_file().with_name("training-plan-searches.json")


def _shown() -> dict[str, Any]:
    try:
        kept = json.loads(_shown_file().read_bytes())
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _remember(offerings: list[training_plans.Offering], query: Query) -> OSError | None:
    from airflow_sm_prefs.storage import object_storage

    now = dt.datetime.now(dt.UTC)
    kept = {key: value for key, value in _shown().items() if isinstance(value, dict) and now - _when(value) < SHOWN_FOR}
    for offering in offerings:
        kept[offering.offering_id] = {"query": query, "shown_at": now.isoformat()}
    newest = dict(sorted(kept.items(), key=lambda item: item[1]["shown_at"])[-KEPT_SEARCHES * 4 :])
    try:
        object_storage.replace_whole(_shown_file(), json.dumps(newest), prefix=".offerings-")
    except OSError as error:
        return error
    return None


def _when(kept: dict[str, Any]) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(str(kept["shown_at"]))
    except (KeyError, ValueError):
        return dt.datetime.min.replace(tzinfo=dt.UTC)


def _query_key(query: Query) -> str:
    # The window moves with the clock: a search an hour old stands for the same question.
    return json.dumps({key: value for key, value in query.items() if key not in ("after", "before")}, sort_keys=True)
