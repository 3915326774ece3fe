"""The development kit's commands, added to ``airflow-sm-prefs`` by entry point: ``emulator`` and ``demo``."""

from __future__ import annotations

import argparse
import ipaddress
import os
import signal
import sys
from pathlib import Path

from airflow_sm_prefs.surface.command_output import fail, say


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text[:40]!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is outside 0-65535")
    return port


def _host(text: str) -> str:
    """An IP address to bind; ``localhost`` is taken as 127.0.0.1 (a name could resolve anywhere)."""
    if text == "localhost":
        return "127.0.0.1"
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--host takes an IP address (or localhost), not {text[:40]!r}") from None


def _emulator(args: argparse.Namespace) -> int:
    from sm_prefs_devkit.emulator import EmulatorServer, ScenarioError, load
    from sm_prefs_devkit.emulator.service import StateFileError

    if not ipaddress.ip_address(args.host).is_loopback:
        if not args.container_network:
            return fail(f"the emulator binds to loopback only, not {args.host} (see --container-network)")
        print(
            f"airflow-sm-prefs: warning: serving on {args.host}: the SageMaker API it serves has no "
            "authentication; anyone who can reach this address can create and stop jobs",
            file=sys.stderr,
        )
    if args.state_file is not None and not args.state_file.parent.is_dir():
        return fail(f"--state-file: directory {args.state_file.parent} does not exist")
    if args.state_file is not None and args.state_file.is_dir():
        return fail(f"--state-file: {args.state_file} is a directory")
    try:
        scenario = load(args.scenario)
        server = EmulatorServer(
            scenario, host=args.host, port=args.port, state_file=args.state_file, scenario_source=args.scenario
        )
    except (ScenarioError, StateFileError) as exc:
        return fail(str(exc))
    except OSError as exc:
        return fail(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    say(
        f"SageMaker emulator ({scenario.name}, speed x{scenario.speed:g}) on {server.endpoint_url}",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


def _demo(args: argparse.Namespace) -> int:
    from sm_prefs_devkit.demo import main

    exit_when_done = args.exit or os.environ.get("DEMO_EXIT") == "1"
    project = Path(args.project_dir).resolve()
    if not (project / "dags").is_dir():
        return fail(f"--project-dir: {project} is not a checkout of this project (it has no dags/ folder)")
    return main(project, exit_when_done)


def add_emulator(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    emulator = commands.add_parser("emulator", help="serve the local SageMaker emulator")
    emulator.add_argument("--scenario", default="ample", help="bundled scenario name or a YAML file")
    emulator.add_argument(
        "--host", type=_host, default="127.0.0.1", help="loopback address to bind (default 127.0.0.1)"
    )
    emulator.add_argument(
        "--container-network",
        action="store_true",
        help="allow a non-loopback --host, for a container network that publishes no port to the host; the "
        "control surface still answers loopback clients only",
    )
    emulator.add_argument("--port", type=_port, default=8907, help="port (0 picks a free one)")
    emulator.add_argument("--state-file", type=Path, default=None, help="keep jobs and clock across restarts")
    emulator.add_argument("-v", "--verbose", action="store_true")
    emulator.set_defaults(handler=_emulator)


def add_demo(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = commands.add_parser("demo", help="emulator + airflow standalone + the nightly pipeline")
    demo.add_argument("--project-dir", default=".", help="checkout holding dags/ (default: current directory)")
    demo.add_argument("--exit", action="store_true", help="exit when the pipeline ends (same as DEMO_EXIT=1)")
    demo.set_defaults(handler=_demo)
