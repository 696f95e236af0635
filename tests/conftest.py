"""Shared test helpers."""

from pathlib import Path

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT

pytest_plugins = ["tests.skip_guard"]  # CI: an unexpected skip fails the run (VERITAS_STRICT_SKIPS=1)


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
