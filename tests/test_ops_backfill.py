"""`veritas backfill` creates a real Dagster backfill (issue 16): the instance's backfill API lists it, its runs carry
its id and its tables equal quarter-by-quarter runs. The demo feed's snapshot is parsed once for all the quarters.
Cancelling it, through the instance as the UI does or with SIGTERM on the command, stops the remaining quarters."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml

from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.core.instance_records import latest_materialization
from dagster_project.partitions import to_label
from dagster_project.resources.store import StoreResource
from tests.conftest import write_demo_config

QUARTERS = ["2020Q1", "2020Q2", "2020Q3"]
TABLES = ["reviews", "trusted_reviews"]
PER_RUN = 2  # quarters per run in the cancel tests: the run under way when the cancel comes may finish
# the Celery test's broker is Debian's redis-server (PyPI's `redis-server` package cannot be installed here): where it
# is absent the test is skipped with the command that installs it, and in CI VERITAS_STRICT_SKIPS fails that skip
REDIS_SERVER = shutil.which("redis-server") or ("/usr/bin/redis-server" if os.access("/usr/bin/redis-server", os.X_OK) else None)


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


@pytest.fixture(scope="module")
def reference(folder) -> dict:
    """The tables of quarter-by-quarter runs in process."""
    from dagster_project.quarter_run import run_quarter

    cfg = demo_config(folder / "reference")
    assert all(run_quarter(cfg, q, until="trusted_reviews") for q in QUARTERS)
    return tables(cfg, QUARTERS)


def test_a_backfill_is_listed_by_the_instance_and_gives_the_quarter_runs_tables(folder, reference):
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
        # the snapshot once, then one run with both stages for the three quarters (stages.quarters_per_run: 0, all)
        assert sorted(quarters_of_run(r) for r in runs) == [[], QUARTERS]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        # the runs ran in the command's process and printed to its output: no stdout or stderr captured to files
        assert not list((Path(load_config(cfg)["data_dir"]) / "dagster").glob("storage/*/compute_logs/*"))
        snapshot = instance.fetch_materializations(dg.AssetKey("review_snapshot"), limit=10).records
        assert len(snapshot) == 1 and snapshot[0].asset_materialization.metadata["parsed"].value is True
        read = snapshot[0].asset_materialization.metadata  # a small feed: one process read it
        assert read["feed_ranges"].value == 1 and [r["ranges"] for r in read["reads"].value] == [1]
        # each quarter's materialization carries its own yield, as a run of its own would have
        for table in TABLES:
            for q, rows in zip(QUARTERS, (0, 16, 0)):
                meta = latest_materialization(instance, table, q).asset_materialization.metadata
                assert (meta["quarter"].value, meta["rows_out"].value) == (q, rows)
        from dagster._core.storage.asset_check_execution_record import (
            AssetCheckExecutionRecordStatus as Status,
        )

        (check,) = instance.event_log_storage.get_asset_check_execution_history(  # one evaluation for the run
            dg.AssetCheckKey(dg.AssetKey("reviews"), "reviews_volume"), limit=10, status={Status.SUCCEEDED, Status.FAILED})
        verdicts = {q: v["passed"] for q, v in check.evaluation.metadata["quarters"].value.items()}
        assert verdicts == {"2020Q1": True, "2020Q2": True, "2020Q3": False}  # 0 reviews after 16: below the band
    from dagster_project.core.instance_records import open_history
    from dagster_project.yield_report import _check_results

    shown = _check_results(open_history(load_config(cfg)), set(QUARTERS))  # what veritas yields shows per quarter
    assert {q: c["reviews_volume"]["passed"] for q, c in shown.items()} == verdicts
    assert shown["2020Q3"]["reviews_volume"]["metadata"]["previous_reviews"] == 16
    got = tables(cfg, QUARTERS)
    assert set(got) == set(reference)
    # only 2020Q2 has rows in the demo feed: those tables are compared row for row, and must have rows; the empty
    # quarters (needed for the volume check above) are compared by their typed columns and their emptiness
    with_rows = {k for k in reference if reference[k].height}
    assert with_rows == {("2020Q2", "reviews"), ("2020Q2", "trusted_reviews")}
    for k in with_rows:
        assert got[k].height == reference[k].height == 16, k
        assert got[k].equals(reference[k]), k
    for k in set(reference) - with_rows:
        assert got[k].height == reference[k].height == 0 and got[k].schema == reference[k].schema, k
    assert [got[(q, "reviews")].height for q in QUARTERS] == [0, 16, 0]  # the demo feed's 2020Q2 reviews



class Output:
    """A child's output, read line by line in a thread, so that a test can wait for a line while the child runs."""

    def __init__(self, proc: subprocess.Popen):
        self.proc, self.lines = proc, []
        self.thread = threading.Thread(target=lambda: self.lines.extend(proc.stdout), daemon=True)
        self.thread.start()

    def has(self, prefix: str) -> bool:
        return any(line.startswith(prefix) for line in list(self.lines))

    def finish(self, timeout: float) -> str:
        self.proc.wait(timeout)
        self.thread.join(10)
        return "".join(self.lines)


def start_long_backfill(folder: Path, name: str) -> tuple[str, subprocess.Popen, Output, dg.DagsterInstance]:
    """All 42 quarters of the demo feed through trusted_reviews, two quarters per run (21 runs); returns once the
    first run is done."""
    cfg = demo_config(folder / name)
    settings = yaml.safe_load(Path(cfg).read_text())
    settings["stages"]["quarters_per_run"] = PER_RUN
    Path(cfg).write_text(yaml.safe_dump(settings))
    proc = backfill(cfg, "--from", "2016Q1", "--to", "2026Q2", "--until", "trusted_reviews")
    output = Output(proc)
    deadline = time.monotonic() + 600
    instance = None
    while instance is None or not done_quarters(instance):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"no quarter was done: {output.finish(30)}")
        # the instance is opened once the command has created its backfill (and with it the instance's tables:
        # opening it earlier would race the command's schema creation)
        if instance is None and output.has("[backfill] "):
            instance = instance_of(cfg)
        time.sleep(0.2)
    return cfg, proc, output, instance


def done_quarters(instance) -> set[str]:
    """The quarters whose last selected stage is materialized."""
    return {to_label(k) for k in instance.get_materialized_partitions(dg.AssetKey("trusted_reviews"))}


def quarters_of_run(run) -> list[str]:
    """The quarters a run materializes: its partition, or the range of a batched backfill run; none for the snapshot."""
    from dagster_project.partitions import quarterly_partitions

    tags = run.tags
    if "dagster/partition" in tags:
        return [to_label(tags["dagster/partition"])]
    if "dagster/asset_partition_range_start" not in tags:
        return []
    keys = dg.PartitionKeyRange(tags["dagster/asset_partition_range_start"], tags["dagster/asset_partition_range_end"])
    return [to_label(k) for k in quarterly_partitions.get_partition_keys_in_range(keys)]


def backfill_runs(instance, backfill_id: str) -> dict[str, set[str]]:
    """The quarters of the backfill's runs, by the runs' status."""
    out: dict[str, set[str]] = {}
    for run in instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id})):
        if quarters_of_run(run):
            out.setdefault(run.status.value, set()).update(quarters_of_run(run))
    return out


def test_cancelling_through_the_instance_as_the_ui_does_stops_the_remaining_quarters(folder):
    from dagster._core.execution.backfill import BulkActionStatus

    _, proc, output, instance = start_long_backfill(folder, "cancel_ui")
    with instance:
        try:
            (listed,) = instance.get_backfills()  # the command's backfill, as the UI's Backfills tab lists it
            assert listed.status.value == "REQUESTED"
            done_at_cancel = done_quarters(instance)
            # what the UI's Cancel button does (dagster_graphql's cancel_partition_backfill)
            instance.update_backfill(listed.with_status(BulkActionStatus.CANCELING))
            out = output.finish(timeout=300)
        finally:
            proc.kill()
        assert proc.returncode == 1 and f"{listed.backfill_id}: CANCELED" in out, out
        assert instance.get_backfill(listed.backfill_id).status.value == "CANCELED"
        runs, done = backfill_runs(instance, listed.backfill_id), done_quarters(instance)
    # the run under way when the cancel came may finish; no other quarter starts, the queued ones are cancelled
    assert done_at_cancel <= done and len(done - done_at_cancel) <= PER_RUN and len(done) < 42, (done_at_cancel, done)
    assert set(runs) == {"SUCCESS", "CANCELED"} and runs["SUCCESS"] == done, runs
    assert runs["SUCCESS"] | runs["CANCELED"] == set(quarter_labels()) and not runs["SUCCESS"] & runs["CANCELED"]


def test_sigterm_on_the_command_cancels_the_backfill_and_stops_the_remaining_quarters(folder):
    _, proc, output, instance = start_long_backfill(folder, "cancel_sigterm")
    with instance:
        try:
            # wait until a run is under way, so that the signal has a run to stop
            running_id = backfill_id_of("".join(output.lines))
            deadline, in_flight = time.monotonic() + 120, []
            while not in_flight and time.monotonic() < deadline and proc.poll() is None:
                in_flight = instance.get_runs(filters=dg.RunsFilter(
                    tags={"dagster/backfill": running_id}, statuses=[dg.DagsterRunStatus.STARTED]))
                if not in_flight:
                    time.sleep(0.05)
            assert len(in_flight) == 1, ("no run under way", "".join(output.lines))
            done_at_signal = done_quarters(instance)
            proc.send_signal(signal.SIGTERM)
            sent = time.time()
            out = output.finish(timeout=300)
        finally:
            proc.kill()
        assert proc.returncode == 1 and ": cancelling " in out, out
        backfill_id = backfill_id_of(out)
        assert instance.get_backfill(backfill_id).status.value == "CANCELED", out
        runs, done = backfill_runs(instance, backfill_id), done_quarters(instance)
        stopped = [r for r in instance.get_run_records(filters=dg.RunsFilter(
            tags={"dagster/backfill": backfill_id}, statuses=[dg.DagsterRunStatus.FAILURE]))]
    assert done_at_signal <= done and len(done - done_at_signal) <= PER_RUN and len(done) < 42, (done_at_signal, done)
    # the quarter under way stopped at its step (its run failed, maybe after its last table); every other one was
    # cancelled unstarted
    succeeded, failed = runs.get("SUCCESS", set()), runs.get("FAILURE", set())
    assert set(runs) <= {"SUCCESS", "FAILURE", "CANCELED"} and succeeded <= done <= succeeded | failed, runs
    # at most one run is stopped, within 10 s of the signal: the one under way, unless it finished its last step as
    # the signal came (seen in CI: then it succeeded and the next one, if any, was the one stopped)
    assert len(stopped) <= 1 and all(r.end_time - sent < 10 for r in stopped), [r.end_time - sent for r in stopped]
    flight = set(quarters_of_run(in_flight[0]))
    if [r.dagster_run.run_id for r in stopped] == [in_flight[0].run_id]:
        assert flight <= failed and not flight & succeeded, runs
    else:
        assert flight <= succeeded, runs
    assert set().union(*runs.values()) == set(quarter_labels())


def quarter_labels() -> list[str]:
    from dagster_project.partitions import quarter_range

    return quarter_range("2016Q1", "2026Q2")


def backfill_runs_of(cfg: str, out: str) -> tuple[str, list, int]:
    """The command's backfill id, after checking the instance lists it as done; its runs and their steps."""
    backfill_id = backfill_id_of(out)
    with instance_of(cfg) as instance:
        (listed,) = instance.get_backfills()
        assert listed.backfill_id == backfill_id and listed.status.value == "COMPLETED_SUCCESS"
        runs = instance.get_runs(filters=dg.RunsFilter(tags={"dagster/backfill": backfill_id}))
        assert runs and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        steps = sum(len(instance.get_records_for_run(r.run_id, of_type=dg.DagsterEventType.STEP_SUCCESS).records)
                    for r in runs)
    return backfill_id, runs, steps


def assert_same_release(cfg: str, simulated: dict) -> None:
    """The config's latest release of the simulated quarter is the session run's, byte for byte (100 claims)."""
    from tests.ops_support import release_files
    from tests.simulated import QUARTER, RELEASE, release_claim_count

    release = StoreResource(root=load_config(cfg)["store"]["root"]).latest_release(QUARTER)
    assert release_claim_count(release) == RELEASE
    assert release_files(release) == release_files(simulated["release"])


def test_a_backfill_of_the_simulated_quarter_gives_its_release(simulated, tmp_path, monkeypatch):
    """Every stage of the simulated quarter through `veritas backfill` (each run in its own process), from
    the session run's LLM cache: the instance lists the backfill, and the release is the session's, 100 claims."""
    from tests.simulated import QUARTER, SIM_KEY, rerun_config

    for name, value in SIM_KEY.items():
        monkeypatch.setenv(name, value)
    served = simulated["server"].panel.counters()["served"]
    cfg = rerun_config(simulated, tmp_path / "backfill")
    proc = backfill(cfg, "--from", QUARTER, "--to", QUARTER)
    out, _ = proc.communicate(timeout=900)
    assert proc.returncode == 0, out
    _, runs, _ = backfill_runs_of(cfg, out)
    # the snapshot, the ingestion stages (a run that may take several quarters), the quarter's stages up to stage 7,
    # then the release and after it: the release depends on the release of the quarter before, and Dagster runs a
    # self-dependent asset in runs of its own
    assert sorted(quarters_of_run(r) for r in runs) == [[], [QUARTER], [QUARTER], [QUARTER]]
    assert simulated["server"].panel.counters()["served"] == served
    assert_same_release(cfg, simulated)


@pytest.mark.skipif(REDIS_SERVER is None, reason="redis-server is not installed (not on PATH, no /usr/bin/redis-server); "
                    "install it with `make system-deps` (as root) or `apt-get install redis-server`")
def test_a_backfill_through_two_celery_workers_on_redis_gives_the_simulated_release(simulated, folder, monkeypatch):
    """The celery executor: each step of the backfill's runs, the model stages included, is a task on a real
    redis-server, run by one of two workers; the simulated quarter's release is the session run's."""
    from tests.ops_support import celery_workers, redis_server
    from tests.simulated import QUARTER, SIM_KEY, rerun_config

    for name, value in SIM_KEY.items():
        monkeypatch.setenv(name, value)
    served = simulated["server"].panel.counters()["served"]
    with redis_server(folder) as broker:
        cfg = rerun_config(simulated, folder / "celery", executor={"kind": "celery", "broker": broker})
        with celery_workers(cfg, 2, folder, env=SIM_KEY) as logs:
            proc = backfill(cfg, "--from", QUARTER, "--to", QUARTER, "--launch", "processes")
            out, _ = proc.communicate(timeout=900)
            worker_logs = [p.read_text() for p in logs]
    assert proc.returncode == 0, out
    _, runs, steps = backfill_runs_of(cfg, out)
    # one task per step: review_snapshot, then the quarter's 10 stages and its 6 asset checks (the freshness checks
    # of review_snapshot and release join the backfill's runs of their assets)
    tasks = [log.count("succeeded in") for log in worker_logs]
    assert sum(tasks) == steps == 1 + 10 + 6, (tasks, steps)
    assert all(tasks), f"a worker ran no task: {tasks}"  # the steps were shared out, not run by one worker
    assert simulated["server"].panel.counters()["served"] == served  # every answer came from the LLM cache
    assert_same_release(cfg, simulated)
