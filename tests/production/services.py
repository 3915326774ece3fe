"""PostgreSQL and Redis from Debian's packages, on 127.0.0.1 only, in a folder of their own.

Installed with apt-get when missing and this runs as root (as CI does); otherwise a clear message says what
to install. PostgreSQL refuses to run as root, so as root its server runs as the ``postgres`` user the package
creates, in a data folder that user owns. Everything stops and is removed by ``stop()``.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from sm_prefs_devkit.local_stack import StackError
from sm_prefs_devkit.ports import free_port

PACKAGES = {"postgresql": "postgresql", "redis-server": "redis-server"}


def _postgres_bin(name: str) -> str | None:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return found[-1] if found else shutil.which(name)


def ensure_installed() -> None:
    """The Debian packages, installed when missing (as root); StackError naming them otherwise. One process at
    a time (test modules run in parallel, and apt-get takes dpkg's lock or fails)."""
    with open(Path(tempfile.gettempdir()) / "airflow-sm-prefs-services.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install_missing()


def _install_missing() -> None:
    missing = [package for binary, package in PACKAGES.items() if not _installed(binary)]
    if not missing:
        return
    if os.geteuid() != 0:
        raise StackError(
            f"the production stack needs Debian's {', '.join(missing)}: sudo apt-get install {' '.join(missing)}"
        )

    def apt(*args: str) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        return subprocess.run(["apt-get", *args], capture_output=True, text=True, timeout=900, env=environment)

    result = apt("install", "-y", "-q", *missing)
    if result.returncode != 0:  # package lists may be missing or stale on a fresh machine
        apt("update", "-q")
        result = apt("install", "-y", "-q", *missing)
    if result.returncode != 0 or any(not _installed(binary) for binary in PACKAGES):
        raise StackError(f"apt-get install {' '.join(missing)} failed: {result.stderr[-1500:]}")


def _installed(binary: str) -> bool:
    return (_postgres_bin("initdb") if binary == "postgresql" else shutil.which(binary)) is not None


@dataclass
class Services:
    postgres_port: int = field(default_factory=free_port)
    redis_port: int = field(default_factory=free_port)
    folder: Path | None = None
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def database_url(self) -> str:
        return f"postgresql+psycopg2://airflow:airflow@127.0.0.1:{self.postgres_port}/airflow"

    @property
    def result_backend(self) -> str:
        return f"db+postgresql://airflow:airflow@127.0.0.1:{self.postgres_port}/airflow"

    @property
    def broker_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def airflow_env(self) -> dict[str, str]:
        return {
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.database_url,
            "AIRFLOW__CELERY__BROKER_URL": self.broker_url,
            "AIRFLOW__CELERY__RESULT_BACKEND": self.result_backend,
        }

    def _as_postgres(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def start(self) -> None:
        ensure_installed()
        # Outside pytest's folder, which only root may enter: the postgres user must own its data folder.
        self.folder = Path(tempfile.mkdtemp(prefix="sm-prefs-services-"))
        data, sockets = self.folder / "postgres", self.folder / "sockets"
        data.mkdir()
        sockets.mkdir()
        if os.geteuid() == 0:
            os.chmod(self.folder, 0o755)
            shutil.chown(data, "postgres", "postgres")
            shutil.chown(sockets, "postgres", "postgres")
        initdb = _postgres_bin("initdb")
        self._run(self._as_postgres([str(initdb), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"]))
        server = _postgres_bin("postgres")
        self.processes.append(
            self._spawn(
                self._as_postgres(
                    [
                        str(server),
                        "-D",
                        str(data),
                        "-p",
                        str(self.postgres_port),
                        "-k",
                        str(sockets),
                        "-c",
                        "listen_addresses=127.0.0.1",
                        "-c",
                        "max_connections=300",
                        "-c",
                        "fsync=off",
                    ]
                ),
                "postgres.log",
            )
        )
        psql = ["psql", "-h", str(sockets), "-p", str(self.postgres_port), "-U", "postgres", "-v", "ON_ERROR_STOP=1"]
        self._wait(lambda: self._run(self._as_postgres([*psql, "-c", "select 1"]), check=False) == 0, "PostgreSQL")
        self._run(self._as_postgres([*psql, "-c", "create role airflow login password 'airflow'"]))
        self._run(self._as_postgres([*psql, "-c", "create database airflow owner airflow"]))
        redis = shutil.which("redis-server")
        self.processes.append(
            self._spawn(
                [
                    str(redis),
                    "--port",
                    str(self.redis_port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(self.folder),
                ],
                "redis.log",
            )
        )
        cli = ["redis-cli", "-p", str(self.redis_port), "ping"]
        self._wait(lambda: subprocess.run(cli, capture_output=True, check=False).stdout.strip() == b"PONG", "Redis")

    def _spawn(self, command: list[str], log_name: str) -> subprocess.Popen[bytes]:
        assert self.folder is not None
        log = open(self.folder / log_name, "ab")  # noqa: SIM115 - owned by the child
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def _run(self, command: list[str], check: bool = True) -> int:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if check and result.returncode != 0:
            raise StackError(f"{' '.join(command[-6:])} failed: {result.stderr[-1500:]}")
        return result.returncode

    def _wait(self, ready, what: str, timeout: float = 60) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for process in self.processes:
                if process.poll() is not None:
                    raise StackError(f"{what} exited early; see {self.folder}")
            if ready():
                return
            time.sleep(0.3)
        raise StackError(f"{what} did not come up within {timeout:.0f}s; see {self.folder}")

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, 15)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=20)
        self.processes.clear()
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None
