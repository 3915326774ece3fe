"""How a command speaks: its result on the stdout it started with, each problem in one line on stderr.

A result (a table, JSON, CSV) is what users pipe to jq or a file, so ``main`` points Airflow's own lines at
stderr while a command answers, and ``say`` writes to the stdout kept before that. What came from outside (a
ledger object's ids, a user's price table, a store's URL with its keys) can neither drive the terminal nor
show a secret.
"""

from __future__ import annotations

import sys
from typing import TextIO

from airflow_sm_prefs.errors.base import SageMakerPreferencesError


class CommandError(SageMakerPreferencesError):
    """A command cannot go on: said in one line, exit status 2."""


_results: TextIO = sys.stdout


def answer_to(stream: TextIO) -> None:
    """Where ``say`` writes from now on: the stdout a command started with."""
    global _results
    _results = stream


def say(*values: object, sep: str = " ", end: str = "\n", flush: bool = False) -> None:
    """A command's result, to the stdout the command started with."""
    from airflow_sm_prefs.platform.printable import printable_lines

    print(printable_lines(sep.join(str(value) for value in values)), end=end, file=_results, flush=flush)


def fail(message: str) -> int:
    """Say why a command cannot run, as argparse does, and give its exit code."""
    tell("error", message)
    return 2


def warn(message: str) -> None:
    tell("warning", message)


def tell(level: str, message: str) -> None:
    from airflow_sm_prefs.platform.printable import printable_lines
    from airflow_sm_prefs.storage.object_storage import shown_url

    print(printable_lines(shown_url(f"airflow-sm-prefs: {level}: {message}")), file=sys.stderr)


def if_the_store_failed(error: BaseException) -> None:
    """Raise ``error`` again when it is the store's failure, for ``main`` to say in its one line."""
    from airflow_sm_prefs.storage import store_errors

    if store_errors.explained(error) is not None:
        raise error


def store_problem(error: BaseException) -> str:
    """``error`` in the store's one line where it is the store's failure, else as it is."""
    from airflow_sm_prefs.storage import object_storage, store_errors

    problem = store_errors.explained(error)
    return problem.line(object_storage.store_named()) if problem else f"{type(error).__name__}: {error}"
