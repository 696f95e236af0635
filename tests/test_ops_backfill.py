"""`veritas backfill` creates a real Dagster backfill (issue 16): the instance's backfill API lists it, its runs carry
its id and its tables equal quarter-by-quarter runs. The demo feed's snapshot is parsed once for all the quarters."""

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.store import StoreResource
from tests.conftest import write_demo_config

QUARTERS = ["2020Q1", "2020Q2", "2020Q3"]
TABLES = ["reviews", "trusted_reviews"]


def backfill(cfg: str, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dagster_project.cli", "--config", cfg, "backfill", "--no-bars", *args]
    child_env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # each config's instance: under its data dir
    return subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=child_env)


def instance_of(cfg: str) -> dg.DagsterInstance:
    from dagster._core.instance.ref import InstanceRef

    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(Path(load_config(cfg)["data_dir"]) / "dagster")))


def demo_config(folder: Path) -> str:
    folder.mkdir(parents=True)
    return write_demo_config(folder)


def tables(cfg: str, quarters: list[str]) -> dict:
    store = StoreResource(root=load_config(cfg)["store"]["root"])
    return {(q, t): store.read_table(t, q) for q in quarters for t in TABLES}


def backfill_id_of(out: str) -> str:
    first = next(line for line in out.splitlines() if line.startswith("[backfill] "))
    return first.split()[1].rstrip(":")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("unused_dagster_home")))
        yield tmp_path_factory.mktemp("ops")


def test_a_backfill_is_listed_by_the_instance_and_gives_the_quarter_runs_tables(folder):
    from dagster_project.cli import run_quarter

    reference = demo_config(folder / "reference")
    assert all(run_quarter(reference, q, until="trusted_reviews") for q in QUARTERS)
    cfg = demo_config(folder / "backfill")
    proc = backfill(cfg, "--from", QUARTERS[0], "--to", QUARTERS[-1], "--until", "trusted_reviews")
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    backfill_id = backfill_id_of(out)
    with instance_of(cfg) as instance:
        (listed,) = instance.get_backfills()
        assert listed.backfill_id == backfill_id and listed.status.value == "COMPLETED_SUCCESS"
        assert {k.to_user_string() for k in listed.asset_selection} == {"review_snapshot", *TABLES}
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        # the snapshot once, then one run per quarter with both stages
        assert sorted(r.tags.get("dagster/partition", "-") for r in runs) == ["-", "2020-01", "2020-04", "2020-07"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        snapshot = instance.fetch_materializations(dg.AssetKey("review_snapshot"), limit=10).records
        assert len(snapshot) == 1 and snapshot[0].asset_materialization.metadata["parsed"].value is True
    got, expected = tables(cfg, QUARTERS), tables(reference, QUARTERS)
    assert all(got[k].equals(expected[k]) for k in expected)
    assert [got[(q, "reviews")].height for q in QUARTERS] == [0, 16, 0]  # the demo feed's 2020Q2 reviews

