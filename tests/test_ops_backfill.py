"""`veritas backfill` over three demo quarters: one run killed mid-way, retried alone, same results as no kill."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.store import StoreResource
from tests.ops_support import release_files, start_stub, write_ops_config

QUARTERS = ["2020Q2", "2020Q3", "2020Q4"]
TABLES = ["reviews", "trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims",
          "rectified_claims", "predictions", "evaluation"]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    stub = start_stub()
    with pytest.MonkeyPatch.context() as mp:
        # run_quarter points $DAGSTER_HOME at its instance; the monkeypatch puts the old value back afterwards
        mp.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("unused_dagster_home")))
        mp.setenv("STUB_KEY", "stub")
        yield stub, tmp_path_factory.mktemp("ops")
    stub.close()


def results(config_path: str, tables: list[str] = TABLES, release: bool = True) -> dict:
    """Every quarter's tables (latest versions) and release files: what a backfill leaves behind."""
    store = StoreResource(root=load_config(config_path)["store"]["root"])
    out = {}
    for quarter in QUARTERS:
        for table in tables:
            df = store.read_table(table, quarter)
            out[(quarter, table)] = df.drop("created") if table == "predictions" else df  # its timestamp names the run
        if release:
            out[(quarter, "release")] = release_files(store.latest_release(quarter))
    return out


def same(a: dict, b: dict) -> list:
    assert a.keys() == b.keys()
    return [k for k in a if not (a[k].equals(b[k]) if hasattr(a[k], "equals") else a[k] == b[k])]


@pytest.fixture(scope="module")
def reference(env):
    """The uninterrupted result, quarter by quarter in process."""
    from dagster_project.cli import run_quarter

    stub, folder = env
    cfg = write_ops_config(folder / "reference", stub)
    assert all(run_quarter(cfg, q) for q in QUARTERS)
    return results(cfg)


def backfill(cfg: str, *args: str) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dagster_project.cli", "--config", cfg, "backfill", "--no-bars", *args]
    child_env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # each config's instance: under its data dir
    return subprocess.Popen(cmd, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=child_env)


def runs_per_partition(cfg: str, backfill_id: str) -> dict[str, list]:
    from dagster._core.instance.ref import InstanceRef

    home = Path(load_config(cfg)["data_dir"]) / "dagster"
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        records = instance.get_run_records(filters=dg.RunsFilter(tags={"veritas/backfill": backfill_id}))
        out: dict[str, list] = {}
        for r in sorted(records, key=lambda r: r.create_timestamp):
            out.setdefault(r.dagster_run.tags["dagster/partition"], []).append(r.dagster_run.status)
        return out


def test_a_killed_quarter_is_retried_alone_and_the_results_match_an_uninterrupted_run(env, reference):
    stub, folder = env
    cfg = write_ops_config(folder / "killed", stub)
    config = load_config(cfg)
    store = StoreResource(root=config["store"]["root"])
    proc = backfill(cfg, "--from", QUARTERS[0], "--to", QUARTERS[-1], "--max-retries", "0", "--parallel", "3")
    try:
        # kill the 2020Q2 run once its articles are written, in the middle of its ten stages
        deadline = time.monotonic() + 240
        while store.latest_version("articles", "2020Q2") is None:
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() is not None else "timeout"
            time.sleep(0.2)
        (state_file,) = (Path(config["data_dir"]) / "backfills").glob("bf-*.json")
        state = json.loads(state_file.read_text())
        assert state["partitions"]["2020-04"]["status"] == "running"
        os.kill(state["partitions"]["2020-04"]["pid"], signal.SIGKILL)
        out, _ = proc.communicate(timeout=400)
    finally:
        proc.kill()
    assert proc.returncode == 1, out
    backfill_id = state["id"]
    assert f"veritas backfill --retry {backfill_id}" in out
    assert store.latest_release("2020Q2") is None  # it died before its release
    state = json.loads(state_file.read_text())
    assert {k: p["status"] for k, p in state["partitions"].items()} == {
        "2020-04": "failed", "2020-07": "success", "2020-10": "success"}
    failed = dg.DagsterRunStatus.FAILURE
    assert runs_per_partition(cfg, backfill_id)["2020-04"] == [failed]  # the dead run is closed, not left STARTED

    retry = backfill(cfg, "--retry", backfill_id)
    out, _ = retry.communicate(timeout=400)
    assert retry.returncode == 0, out
    ok = dg.DagsterRunStatus.SUCCESS
    # only the failed quarter ran again
    assert runs_per_partition(cfg, backfill_id) == {"2020-04": [failed, ok], "2020-07": [ok], "2020-10": [ok]}
    assert "1 of 3 quarters to run" in out and "all 3 quarters succeeded" in out
    # the retry resumed the killed run from its failure: the stages it had finished were not run again (the
    # articles step, killed between writing its table and reporting success, ran again)
    assert len(store.versions("reviews", "2020Q2")) == len(store.versions("trusted_reviews", "2020Q2")) == 1
    assert len(store.versions("rectified_claims", "2020Q2")) == 1
    assert same(results(cfg), reference) == []


@pytest.mark.skipif(shutil.which("redis-server") is None and not Path("/usr/bin/redis-server").exists(),
                    reason="Debian's redis-server is not installed (apt-get install redis-server)")
def test_a_three_quarter_backfill_runs_through_two_celery_workers(env, reference):
    """Up to ``articles`` (reviews, trusted_reviews, articles and their checks): 15 steps, 5 per quarter."""
    from tests.ops_support import celery_workers, redis_server

    stub, folder = env
    with redis_server(folder) as broker:
        cfg = write_ops_config(folder / "celery", stub, executor={"kind": "celery", "broker": broker})
        with celery_workers(cfg, 2, folder, env={"STUB_KEY": "stub"}) as logs:
            proc = backfill(cfg, "--from", QUARTERS[0], "--to", QUARTERS[-1], "--until", "articles", "--parallel", "2",
                            "--max-retries", "0")
            out, _ = proc.communicate(timeout=600)
            worker_logs = [p.read_text() for p in logs]
    assert proc.returncode == 0, out
    # both workers executed steps (each task is one step of one quarter's run)
    done = [log.count("succeeded in") for log in worker_logs]
    assert all(n > 0 for n in done) and sum(done) == 3 * 5, done
    first = ["reviews", "trusted_reviews", "articles"]
    expected = {k: v for k, v in reference.items() if k[1] in first}
    assert same(results(cfg, first, release=False), expected) == []
