"""Shared test helpers."""

import signal
import threading
from pathlib import Path

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT

pytest_plugins = ["tests.skip_guard"]  # CI: an unexpected skip fails the run (VERITAS_STRICT_SKIPS=1)


def stoppable_by_sigterm() -> None:
    """Ctrl-C's default handler where pytest started with SIGINT ignored (a background job of a shell without job
    control). Dagster maps SIGTERM to SIGINT's handler whenever a run on the main thread ends
    (dagster._utils.interrupts), so such a process ignored SIGTERM after the first test's run, and so did every process
    it started next: the compute-log ``tail`` of a later run ignored Dagster's own terminate(), which then waited 30 s
    per tail (the killed-embedded-server test's run outlived its 60 s). The veritas CLI runs its work off the main
    thread and a run worker runs one run, so neither meets this."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


stoppable_by_sigterm()


def write_demo_config(folder: Path, **stages) -> str:
    """The demo config (bundled feed and WARC) with its data dir in ``folder``; ``stages`` overrides parameters."""
    cfg = yaml.safe_load((PROJECT_ROOT / "veritas.yaml").read_text())
    cfg["data_dir"] = str(folder / "data")
    cfg["sources"] = [{"kind": "datafeed", "path": str(PROJECT_ROOT / "demo/snapshot/feed.json")}]
    cfg["web"]["warc_paths"] = [str(PROJECT_ROOT / "demo/snapshot/pages.warc.gz")]
    cfg["stages"].update(stages)
    path = folder / "veritas.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


@pytest.fixture(scope="session")
def simulated(tmp_path_factory):
    """The small simulated quarter, run once for the session (tests/simulated.py); the panel serves until the end."""
    from tests.simulated import simulated_quarter

    with simulated_quarter(tmp_path_factory.mktemp("simulated")) as run:
        yield run
