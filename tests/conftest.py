from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # the emulator is loaded by the tests that start one, not by every pure test
    from sm_prefs_devkit.emulator import EmulatorServer


@pytest.fixture(autouse=True, scope="session")
def _ledger_in_a_scratch_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tasks run in tests record their jobs in the capacity ledger, and read prices: keep both out of the
    user's home."""
    import os

    folder = tmp_path_factory.mktemp("ledger")
    with pytest.MonkeyPatch.context() as patch:
        if "AIRFLOW__SM_PREFS__LEDGER_PATH" not in os.environ:
            patch.setenv("AIRFLOW__SM_PREFS__LEDGER_PATH", f"file://{folder}")
        if "AIRFLOW__SM_PREFS__PRICE_TABLE" not in os.environ:
            # No user's price table unless a test writes one: costs are unknown, as on a fresh install.
            patch.setenv("AIRFLOW__SM_PREFS__PRICE_TABLE", str(folder / "no-prices.json"))
        yield


@pytest.fixture(autouse=True)
def _ledger_spool_per_test(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries a failing store refused are kept on the host (``$AIRFLOW_HOME``, the user's own home in tests):
    each test keeps its own, so one test's kept entries never reach another's ledger."""
    from airflow_sm_prefs.evidence import ledger_writing

    monkeypatch.setattr(ledger_writing, "spool_folder", lambda: tmp_path / "ledger-spool")


def _shared_between_tests() -> list[dict[Any, Any]]:
    """The process-wide caches of clients, of the modules loaded so far: a module not loaded holds none, and a
    pure test need not load Airflow's object store and botocore (1.5 s a process) to clear nothing."""
    caches = []
    if (hooks := sys.modules.get("airflow_sm_prefs.sagemaker.hooks")) is not None:
        caches.append(hooks._shared_hooks)
    # Airflow keeps one object store (filesystem) per scheme and connection id for the process's life, in a
    # private dict with no public way to forget one.
    if (store := sys.modules.get("airflow.sdk.io.store")) is not None:
        caches.append(store._STORE_CACHE)
    return caches


# Longer than any store deadline a test sets, so only work that would never end is reported.
STORE_WORK_GRACE_SECONDS = 60.0


@pytest.fixture(autouse=True)
def _no_hook_shared_across_tests() -> Iterator[None]:
    """Tests point one connection id at a new emulator each: a hook or an object store shared from an earlier
    test would call the old one (a triggerer shares hooks for minutes; a test must not).

    A test's store work still under way when it ends is waited for first: it would resolve the store after the
    caches were cleared, with the next test's settings half made, and leave that test a store for the wrong
    endpoint (a page's second fold once sent a later test's ledger write to AWS's own S3)."""
    for shared in _shared_between_tests():
        shared.clear()
    yield
    from tests.helpers import store_work_under_way

    deadline = time.monotonic() + STORE_WORK_GRACE_SECONDS
    for thread in store_work_under_way():
        thread.join(max(0.0, deadline - time.monotonic()))
    for shared in _shared_between_tests():
        shared.clear()
    if left := store_work_under_way():
        import traceback

        frames = sys._current_frames()
        where = "".join(
            f"\n{thread.name}:\n" + "".join(traceback.format_stack(frames[thread.ident])[-6:])
            for thread in left
            if thread.ident in frames
        )
        pytest.fail(f"the test left store work running past {STORE_WORK_GRACE_SECONDS:g} s:{where}")


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """pytest's ``caplog``, with Airflow's logging configured first: importing Airflow replaces the root logger's
    handlers, so a test whose body was the first to import it (run alone, or first on its worker) lost pytest's
    capturing handler and found no records."""
    import airflow  # noqa: F401  # configures logging, before pytest adds its handler for the test's call

    return caplog


# The bucket the test requests write to (tests.helpers: s3://bucket/output), as a user's account has it.
TEST_BUCKETS: Mapping[str, Sequence[str]] = {"bucket": ()}


def _slow_machine_factor() -> float:
    """``SM_PREFS_TEST_SLOW_MACHINE=10`` runs every emulator's clock ten times faster, which is what a machine ten
    times slower looks like to a test: virtual time that passes between two of its calls. A test that passes so
    does not lean on the machine's speed (docs/development.md, "Tests under load")."""
    import os

    return float(os.environ.get("SM_PREFS_TEST_SLOW_MACHINE", "1"))


@pytest.fixture
def start_emulator() -> Iterator[Callable[..., EmulatorServer]]:
    """Start an emulator on an ephemeral loopback port; every server is stopped after the test."""
    from sm_prefs_devkit.emulator import EmulatorServer, load

    servers: list[EmulatorServer] = []

    def start(
        scenario: str = "ample",
        buckets: Mapping[str, Sequence[str]] | None = None,
        *,
        clock_stopped: bool = False,
        **kwargs: object,
    ) -> EmulatorServer:
        """``clock_stopped``: virtual time moves only when the test advances it. At 60x a job runs its ten
        virtual minutes in ten real seconds, which a busy machine can spend between two of a test's calls."""
        loaded = load(scenario)
        loaded = dataclasses.replace(
            loaded,
            buckets={**loaded.buckets, **TEST_BUCKETS, **(buckets or {})},
            speed=loaded.speed * _slow_machine_factor(),
        )
        server = EmulatorServer(loaded, **kwargs).start()  # type: ignore[arg-type]
        servers.append(server)
        if clock_stopped:
            from sm_prefs_devkit.local_stack import control

            control(server.endpoint_url, "clock", {"speed": 0})
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def aws_connection(monkeypatch: pytest.MonkeyPatch) -> Callable[[EmulatorServer], str]:
    """Point an Airflow AWS connection (env-var secrets backend) at an emulator; returns the conn id."""
    import json

    def connect(server: EmulatorServer, conn_id: str = "sm_emulator") -> str:
        extra = {"endpoint_url": server.endpoint_url, "region_name": "us-east-1"}
        monkeypatch.setenv(
            f"AIRFLOW_CONN_{conn_id.upper()}",
            json.dumps({"conn_type": "aws", "login": "testing", "password": "testing", "extra": extra}),
        )
        return conn_id

    return connect


@pytest.fixture
def task_log(monkeypatch: pytest.MonkeyPatch) -> Any:
    """What the operators of a test write to their task log."""
    from airflow_sm_prefs.surface.operators import SageMakerPreferenceBaseOperator
    from tests.helpers import TaskLog

    log = TaskLog()
    monkeypatch.setattr(SageMakerPreferenceBaseOperator, "log", property(lambda self: log), raising=False)
    return log


@pytest.fixture(autouse=True)
def _capacity_pages_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page request in these tests waits for its page however slow the machine is; what a request does when
    the page takes longer than its budget is tested on its own (tests/unit/test_capacity_views.py)."""
    from airflow_sm_prefs.surface import capacity_views

    monkeypatch.setattr(capacity_views, "PAGE_BUDGET_SECONDS", 300.0)


# The process layer's modules that take longest, longest first (seconds of one worker in the clean-clone CI on
# f86b547). pytest-xdist hands out whole modules in collection order; started last, the longest would finish
# minutes after the other workers had run out of work. Every other module keeps its place after these.
SLOWEST_FIRST = (
    "tests/production/test_production_campaign.py",  # about 820 s
    "tests/faults/test_campaign.py",  # 620
    "tests/production/test_e2e_on_production.py",  # 530
    "tests/e2e/test_demo_e2e.py",  # 510
    "tests/integration/test_dags_test.py",  # 330
    "tests/faults/test_real_clock_campaign.py",  # 290
    "tests/production/test_real_clock_on_production.py",  # 280
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    first = {module: place for place, module in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: first.get(item.nodeid.partition("::")[0], len(first)))
