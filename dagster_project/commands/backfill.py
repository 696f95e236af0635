"""``veritas backfill``: a Dagster backfill over a range of quarters, with a bar per stage.

The command creates an asset backfill in the project's instance (a ``PartitionBackfill``, as the UI's "Launch
backfill" does), so the UI's Backfills tab lists it and can cancel or re-execute it, as this command can. The
sources' snapshot (``review_snapshot``, not partitioned) is brought up to date once, then each quarter runs the
selected stages in its own run. When no ``dagster-daemon`` serves the instance, the command drives the backfill
itself (the daemon's backfill and run-queue iterations, every ``--tick`` seconds) until it ends; when one does, it
only watches. The runs execute in the command's process, one after another (``--launch here``, the default for the
ingestion stages), or each in a process of its own started by a code server (``--launch processes``). The bars
read the backfill's own status. ``--until leaderboard`` runs every stage of each quarter and then the leaderboard
(not partitioned), once, after every quarter's evaluation: reviews to leaderboard in one backfill. Ctrl-C or SIGTERM cancels the backfill: the quarter under way stops at its
current step (here) or is terminated (processes), the queued ones never start. ``veritas backfill --retry ID``
starts a new backfill of what ID did not materialize. ``veritas backfill --stale`` rebuilds the quarters whose stages
are stale (a parent materialized anew since, as the UI shows; for the release, also a release before it other than
the one it read), round after round, since a rebuilt release can make the next one stale. A backfill that builds
releases refuses to start after a missing or stale earlier release (naming it: ``assets/release/chain.py``), and
once done rebuilds the later releases it left stale, so that no stale release stays LATEST. Pool limits
(``pools:`` in the config) are set on the instance, so they bind every run of it.
"""

import argparse
import contextlib
import logging
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

from dagster_project.core.dagster_private import private, replace_compute_log_manager, replace_run_launcher

PROJECT_ROOT = Path(__file__).resolve().parents[2]
TERMINAL = ("COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED")
INGESTION_STAGES = ("reviews", "trusted_reviews")  # cheap per quarter: --launch auto runs them in this process
RUNS_PER_TICK_S = 10  # runs in this process: a tick dequeues more of them for up to this many --tick
CANCEL_WAIT_S = 8.0  # Ctrl-C with runs in processes of their own: they are asked to stop; the command is gone then
INSTANCE_DBS = ("event_log.db", "runs.db", "schedules.db", "index.db")  # an instance's shared SQLite files


def stage_selection(start: str | None, until: str | None) -> list[str]:
    """The stages from ``start`` (default the first) to ``until`` (default the last), in pipeline order."""
    from dagster_project.definitions import ASSET_NAMES

    for name in (start, until):
        if name and name not in ASSET_NAMES:
            raise ValueError(f"unknown asset {name!r}; choose one of {', '.join(ASSET_NAMES)}")
    first = ASSET_NAMES.index(start) if start else 0
    last = ASSET_NAMES.index(until) + 1 if until else len(ASSET_NAMES)
    if first >= last:
        raise ValueError(f"--start {start} comes after --until {until}")
    return ASSET_NAMES[first:last]


def quarter_keys(first: str, last: str) -> list[str]:
    """The Dagster partition keys of a quarter range; refuses quarters outside the partitions, saying which exist."""
    from dagster_project.core.quarters import partition_label, quarter_range, to_key

    return [to_key(q) for q in quarter_range(partition_label(first), partition_label(last))]


def workspace(instance, here: bool):
    """The code location: loaded in this process (``here``), else as the UI loads it (``workspace.yaml``'s module,
    in a code server of its own, whose runs are processes of their own)."""
    InProcessCodeLocationOrigin = private("InProcessCodeLocationOrigin")
    LoadableTargetOrigin = private("LoadableTargetOrigin")
    WorkspaceProcessContext = private("WorkspaceProcessContext")
    InProcessWorkspaceLoadTarget = private("InProcessWorkspaceLoadTarget")
    ModuleTarget = private("ModuleTarget")

    if here:
        origin = LoadableTargetOrigin(executable_path=sys.executable, module_name="dagster_project.definitions",
                                      working_directory=str(PROJECT_ROOT))
        target = InProcessWorkspaceLoadTarget(InProcessCodeLocationOrigin(origin, location_name="veritas"))
    else:
        target = ModuleTarget(module_name="dagster_project.definitions", attribute=None,
                              working_directory=str(PROJECT_ROOT), location_name="veritas")
    return WorkspaceProcessContext(instance, target)


@contextlib.contextmanager
def wal_kept(home: Path):
    """Hold a connection open to each SQLite file of the instance that is in WAL mode, for as long as the command runs.

    Dagster opens and closes a connection per event; when the last one closes, SQLite checkpoints and deletes the
    write-ahead log, so every event paid a checkpoint (about 40 ms here, against 10 ms with one connection held)."""
    held = []
    try:
        for path in sorted(p for p in home.glob("*/*.db") if p.name in INSTANCE_DBS):  # not one per run
            conn = sqlite3.connect(path, timeout=30)
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() == "wal":
                held.append(conn)
            else:
                conn.close()
        yield len(held)
    finally:
        for conn in held:
            conn.close()


def launches_here(stages: list[str], launch: str) -> bool:
    """``--launch``: ``auto`` runs the quarters in this process when only the ingestion stages are selected (a
    quarter takes seconds there, against tens of seconds for a run process to import the code); the other stages
    wait on models and the web, so their quarters run in parallel processes."""
    if launch == "auto":
        return set(stages) <= set(INGESTION_STAGES)
    return launch == "here"


def hash_feeds_ahead(config: dict, stages: list[str], launch: str) -> None:
    """Where this process will build the sources' snapshot, begin hashing its local feed files now: the snapshot's
    fingerprint needs their sha256 (0.35 s for 400 MB), which a thread computes beside the imports to come."""
    if "reviews" in stages and launches_here(stages, launch):
        from assets.ingestion.sources import prefetch_digests

        prefetch_digests(spec["path"] for spec in config["stages"]["sources"] if spec["kind"] == "datafeed"
                         and spec.get("path") and not spec["path"].startswith(("http://", "https://")))


def here_launcher(on_interrupt: "Stop"):
    """A run launcher that executes each run in this process, one after the other, with the code imported once.

    Dagster takes over SIGINT and SIGTERM while a run executes and stops the run at its step (it fails with the tag
    ``dagster/failure_reason: UNEXPECTED_TERMINATION``); ``on_interrupt`` then hears of it, since the command's
    own handler did not. A run left STARTED by an earlier command (its process is gone) is marked canceled when
    the backfill is cancelled."""
    execute_run_iterator = private("execute_run_iterator")
    RunLauncher = private("RunLauncher")
    RUN_FAILURE_REASON_TAG = private("RUN_FAILURE_REASON_TAG")
    recon_job_from_origin = private("recon_job_from_origin")
    check_captured_interrupt = private("check_captured_interrupt")

    class HereLauncher(RunLauncher):
        executed = 0

        def launch_run(self, context) -> None:
            run = context.dagster_run
            backfill = self._instance.get_backfill(run.tags.get("dagster/backfill", ""))
            if on_interrupt.at is not None or (backfill is not None and backfill.status.value != "REQUESTED"):
                self.terminate(run.run_id)  # cancelled since this tick began (here or in the UI): it does not start
                return
            heard = False
            for _event in execute_run_iterator(recon_job_from_origin(context.job_code_origin), run, self._instance):
                heard = heard or check_captured_interrupt()  # a signal between two steps: the next one stops
            self.executed += 1
            done = self._instance.get_run_by_id(run.run_id)
            if heard or (done is not None and done.tags.get(RUN_FAILURE_REASON_TAG) == "UNEXPECTED_TERMINATION"):
                on_interrupt()

        def terminate(self, run_id: str) -> bool:
            run = self._instance.get_run_by_id(run_id)
            if run is None or run.is_finished:
                return False
            self._instance.report_run_canceling(run, message="its process is gone: marked canceled")
            self._instance.report_run_canceled(run)
            return True

    return HereLauncher()


def uncaptured(instance) -> None:
    """Runs in this process print to the command's own terminal, not to files the UI shows: Dagster's capture would
    redirect the command's streams and start four processes per run (``tail -F`` of stdout and of stderr, each with
    a watcher), 26 MB and about 0.1 s a run. Their structured logs still go to the event log, as every run's do."""
    NoOpComputeLogManager = private("NoOpComputeLogManager")

    replace_compute_log_manager(instance, NoOpComputeLogManager())


BOARD = "leaderboard"  # --until leaderboard: every stage, then the leaderboard (not partitioned)


def create_backfill(instance, context, keys: list[str], stages: list[str], title: str, board: bool = False) -> str:
    """Add an asset backfill of ``stages`` (with the sources' snapshot when they hold reviews) over ``keys``; with
    ``board``, the leaderboard too, which Dagster runs once, after the evaluation of every quarter of the backfill."""
    import dagster as dg
    PartitionBackfill = private("PartitionBackfill")
    make_new_backfill_id = private("make_new_backfill_id")

    from dagster_project.definitions import with_snapshot

    backfill = PartitionBackfill.from_asset_partitions(
        backfill_id=make_new_backfill_id(), asset_graph=context.create_request_context().asset_graph,
        partition_names=keys, asset_selection=[dg.AssetKey(s) for s in [*with_snapshot(stages), *([BOARD] if board else [])]],
        backfill_timestamp=time.time(), tags={"veritas/command": "backfill"}, dynamic_partitions_store=instance,
        all_partitions=False, title=title, description=f"veritas backfill: {', '.join(stages)}",
        run_config=run_config(),
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def retry_backfill(instance, context, backfill_id: str) -> str:
    """A new backfill of what backfill ``backfill_id`` targeted and did not materialize."""
    PartitionBackfill = private("PartitionBackfill")
    make_new_backfill_id = private("make_new_backfill_id")

    old = instance.get_backfill(backfill_id)
    if old.status.value not in TERMINAL:
        raise ValueError(f"backfill {backfill_id} is still {old.status.value}: cancel it or let it end first")
    graph = context.create_request_context().asset_graph
    data = old.get_asset_backfill_data(graph)
    remaining = data.target_subset - data.materialized_subset
    if not remaining.num_partitions_and_non_partitioned_assets:
        raise ValueError(f"backfill {backfill_id} materialized everything it targeted: nothing to retry")
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(), backfill_timestamp=time.time(),
        tags={"veritas/command": "backfill", "veritas/retry_of": backfill_id}, dynamic_partitions_store=instance,
        asset_graph_subset=remaining, title=f"retry of {backfill_id}", description=old.description,
        run_config=run_config(),
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def stale_partitions(instance, context, stages: list[str], keys: list[str]) -> list[tuple[str, str]]:
    """(stage, partition key) of each materialized quarter of ``stages`` that is stale: Dagster's stale status (what
    the UI shows), or a release that read another release than the current one before it (``chain.reads_another``:
    Dagster 1.13 records no pointer to the quarter before for the first release an instance builds, so a release
    built before the one of the quarter before looks fresh to it)."""
    import dagster as dg

    from assets.release.chain import reads_another, recorded_releases
    from dagster_project.partitions import to_label
    CachingStaleStatusResolver = private("CachingStaleStatusResolver")
    StaleStatus = private("StaleStatus")
    partition_loading_context = private("partition_loading_context")

    request = context.create_request_context()
    resolver = CachingStaleStatusResolver(instance, request.asset_graph, request)
    releases = recorded_releases(instance) if "release" in stages else {}
    found = []
    with partition_loading_context(dynamic_partitions_store=instance):
        for stage in stages:
            for key in keys:
                status = resolver.get_status(dg.AssetKey(stage), key)
                if status == StaleStatus.STALE or (
                        stage == "release" and to_label(key) in releases and reads_another(releases, to_label(key))):
                    found.append((stage, key))
    return found


def stale_backfill(instance, context, found: list[tuple[str, str]], title: str) -> str:
    """Add an asset backfill of exactly the stale (stage, partition key) pairs ``found``."""
    import dagster as dg
    AssetGraphSubset = private("AssetGraphSubset")
    AssetKeyPartitionKey = private("AssetKeyPartitionKey")
    PartitionBackfill = private("PartitionBackfill")
    make_new_backfill_id = private("make_new_backfill_id")

    graph = context.create_request_context().asset_graph
    subset = AssetGraphSubset.from_asset_partition_set(
        {AssetKeyPartitionKey(dg.AssetKey(stage), key) for stage, key in found}, asset_graph=graph)
    backfill = PartitionBackfill.from_asset_graph_subset(
        backfill_id=make_new_backfill_id(), backfill_timestamp=time.time(),
        tags={"veritas/command": "backfill", "veritas/stale": "true"}, dynamic_partitions_store=instance,
        asset_graph_subset=subset, title=title, description=f"veritas backfill --stale: {len(found)} stale",
        run_config=run_config(),
    )
    instance.add_backfill(backfill)
    return backfill.backfill_id


def daemon_serves(instance) -> bool:
    """Whether a live dagster-daemon runs this instance's backfills (then the command only watches)."""
    get_daemon_statuses = private("get_daemon_statuses")

    return bool(get_daemon_statuses(instance, ["BACKFILL"], ignore_errors=True)["BACKFILL"].healthy)


class Driver:
    """One tick of what the daemon would do for this instance: advance the backfills, launch queued runs."""

    def __init__(self, context, tick: float):
        QueuedRunCoordinator = private("QueuedRunCoordinator")
        QueuedRunCoordinatorDaemon = private("QueuedRunCoordinatorDaemon")

        self.context, self.spell = context, RUNS_PER_TICK_S * tick
        self.log = logging.getLogger("veritas.backfill")
        queued = isinstance(context.instance.run_coordinator, QueuedRunCoordinator)
        self.queue = QueuedRunCoordinatorDaemon(interval_seconds=1) if queued else None

    def tick(self) -> int:
        """Returns how many runs this tick executed in this process (they are over by now)."""
        execute_backfill_iteration = private("execute_backfill_iteration")

        launcher = self.context.instance.run_launcher
        before = getattr(launcher, "executed", 0)
        for error in execute_backfill_iteration(self.context, self.log):
            if error is not None:
                self.log.warning(f"backfill iteration: {error.message.strip()}")
        started = time.monotonic()
        while self.queue is not None:
            done = getattr(launcher, "executed", 0)
            for _ in self.queue.run_iteration(self.context):
                pass
            # runs in this process are over once launched: dequeue on for a while (the bars move between ticks)
            if getattr(launcher, "executed", 0) == done or time.monotonic() - started > self.spell:
                break
        return getattr(launcher, "executed", 0) - before


class Bars:
    """A bar per stage: how many of the backfill's quarters have that stage materialized (the backfill's status)."""

    def __init__(self, stages: list[str], total: int, bars: bool):
        self.stages, self.total, self.last, self.bars = stages, total, None, None
        if bars:
            from tqdm import tqdm

            width = max(len(s) for s in stages)
            self.bars = {s: tqdm(total=total, desc=s.ljust(width), position=i, leave=True, unit="quarter",
                                 bar_format="{desc} |{bar}| {n}/{total}") for i, s in enumerate(stages)}

    def update(self, done: dict[str, int]) -> None:
        done = {s: done.get(s, 0) for s in self.stages}
        if done == self.last:
            return
        self.last = done
        if self.bars:
            for stage, n in done.items():
                self.bars[stage].n = n
                self.bars[stage].refresh()
        else:
            print("[backfill] " + "  ".join(f"{s} {n}/{self.total}" for s, n in done.items()), flush=True)

    def close(self) -> None:
        for bar in (self.bars or {}).values():
            bar.close()


def materialized_per_stage(backfill, context) -> dict[str, int]:
    """Quarters materialized so far per stage, from the backfill's asset status."""
    AssetBackfillStatus = private("AssetBackfillStatus")

    out = {}
    for status in backfill.get_backfill_status_per_asset_key(context.create_request_context()):
        counts = getattr(status, "partitions_counts_by_status", None)
        if counts is not None:
            out[status.asset_key.to_user_string()] = counts.get(AssetBackfillStatus.MATERIALIZED, 0)
    return out


def cancel(instance, backfill_id: str) -> None:
    """Ask for the backfill's cancellation, as the UI's Cancel button does: its runs are terminated."""
    BulkActionStatus = private("BulkActionStatus")

    backfill = instance.get_backfill(backfill_id)
    if backfill is not None and backfill.status.value not in TERMINAL:
        instance.update_backfill(backfill.with_status(BulkActionStatus.CANCELING))


class Stop:
    """Ctrl-C or SIGTERM: the backfill is cancelled, once."""

    def __init__(self, instance, backfill_id: str):
        self.instance, self.backfill_id, self.at = instance, backfill_id, None

    def __call__(self, signum: int | None = None, _frame=None) -> None:
        if self.at is None:
            self.at = time.monotonic()
            why = signal.Signals(signum).name if signum else "interrupted"
            print(f"\n[backfill] {why}: cancelling {self.backfill_id}", flush=True)
            cancel(self.instance, self.backfill_id)


def follow(instance, context, backfill_id: str, stages: list[str], total: int, bars: bool, tick: float,
           stop: Stop, here: bool) -> str:
    """Drive (or, with a daemon, watch) the backfill until it ends; returns its final status. A signal cancels it:
    with the runs in this process, the command records the cancellation (the queued runs cancelled, then the
    backfill CANCELED); with runs in processes of their own, it returns once they were told to stop."""
    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    progress = Bars(stages, total, bars)
    driver = Driver(context, tick)
    try:
        while True:
            launched = 0 if daemon_serves(instance) else driver.tick()
            backfill = instance.get_backfill(backfill_id)
            progress.update(materialized_per_stage(backfill, context))
            if backfill.status.value in TERMINAL:
                return backfill.status.value
            if stop.at is not None and not here and time.monotonic() - stop.at > CANCEL_WAIT_S:
                return "CANCELING"  # the runs were told to stop; the daemon (or the next command) records the end
            if not launched:  # runs executed in this process: the next tick may launch more at once
                time.sleep(tick)
    finally:
        progress.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)


def stale_rounds(instance, context, stages: list[str], keys: list[str], bars: bool, tick: float, stop: Stop,
                 here: bool) -> tuple[str, str]:
    """Backfills of the stale quarters of ``stages`` until none is stale (a rebuilt release can make the next one
    stale: Dagster shows staleness one edge at a time); returns the last backfill's id and status."""
    from dagster_project.partitions import to_label

    backfill_id, status = "", "COMPLETED_SUCCESS"
    for round_ in range(1, len(stages) * len(keys) + 2):
        found = stale_partitions(instance, context, stages, keys)
        if not found:
            print(f"[backfill] nothing stale{' is left' if backfill_id else ''} in {len(keys)} quarters of "
                  f"{', '.join(stages)}", flush=True)
            return backfill_id, status
        quarters = sorted({k for _, k in found})
        listed = ", ".join(f"{stage} {to_label(k)}" for stage, k in found)
        backfill_id = stale_backfill(instance, context, found, f"stale, round {round_}: {listed}")
        print(f"[backfill] {backfill_id}: round {round_}, stale: {listed}", flush=True)
        stop.backfill_id = backfill_id
        status = follow(instance, context, backfill_id, sorted({s for s, _ in found}, key=stages.index),
                        len(quarters), bars, tick, stop, here)
        if status != "COMPLETED_SUCCESS" or stop.at is not None:
            return backfill_id, status
    raise RuntimeError("stale quarters after as many rounds as there are stage partitions: something rebuilds "
                       "without settling")


def refuse_missing_earlier(instance, config: dict, stages: list[str], keys: list[str]) -> None:
    """A backfill that builds releases starts where every earlier release is there and current: a ValueError naming
    the missing or stale ones otherwise, and the range that builds them too (``assets/release/chain.py``)."""
    from assets.release.chain import gap_message, release_gaps
    from dagster_project.resources.store import StoreResource

    if "release" in stages:
        missing, stale = release_gaps(instance, StoreResource(**config["store"]), keys[0])
        if missing or stale:
            raise ValueError(f"no backfill was created: {gap_message(keys[0], missing, stale, last=keys[-1])}")


def settle_later_releases(instance, context, stages: list[str], bars: bool, tick: float, stop: Stop,
                          here: bool) -> tuple[str, str] | None:
    """After a backfill that built releases: the later releases it left stale (built before the ones it built)
    rebuilt, round after round, so that no stale release stays LATEST; None when none is stale."""
    from assets.release.chain import reads_another, recorded_releases
    from dagster_project.partitions import quarterly_partitions

    releases = recorded_releases(instance) if "release" in stages else {}
    stale = [q for q in releases if reads_another(releases, q)]
    if not stale:
        return None
    print(f"[backfill] releases built before the ones this backfill built, stale now: {', '.join(stale)}",
          flush=True)
    keys = quarter_keys(stale[0], quarterly_partitions.get_last_partition_key())
    return stale_rounds(instance, context, ["release"], keys, bars, tick, stop, here)


def run_config() -> dict:
    """The runs' console log level (their output is the command's): ``$VERITAS_LOG_LEVEL``, else warnings only."""
    from dagster_project.core.config_file import log_level

    return {"loggers": {"console": {"config": {"log_level": log_level("WARNING")}}}}


def run_backfill(config_path: str | None, first: str | None, last: str | None, until: str | None,
                 start: str | None, retry: str | None, bars: bool, tick: float = 1.0, launch: str = "auto",
                 stale: bool = False) -> int:
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.partitions import quarterly_partitions, to_label

    run_config()  # a bogus $VERITAS_LOG_LEVEL: one line now, not when the first backfill is made
    config = load_config(config_path)
    os.environ["VERITAS_CONFIG"] = config["path"]  # the code server and the run workers build the same definitions
    if not retry:
        hash_feeds_ahead(config, stage_selection(start, None if until == BOARD else until), launch)
    instance = project_instance(config)
    if retry:
        old = instance.get_backfill(retry)
        if old is None or not old.is_asset_backfill:
            raise ValueError(f"no backfill {retry!r} in this instance")
        stages = [s for s in stage_selection(None, None) if s in {k.to_user_string() for k in old.asset_selection}]
    elif stale:  # every quarter unless a range is given
        stages = stage_selection(start, until)
        keys = quarter_keys(first, last or quarterly_partitions.get_last_partition_key()) if first else \
            quarterly_partitions.get_partition_keys()
    else:
        if not first:
            raise ValueError("give --from A [--to B], --stale, or --retry ID")
        stages = stage_selection(start, None if until == BOARD else until)
        keys = quarter_keys(first, last or quarterly_partitions.get_last_partition_key())
        refuse_missing_earlier(instance, config, stages, keys)
    here = launches_here(stages, launch) and not daemon_serves(instance)
    stop = Stop(instance, "")
    if here:  # this command's instance only: the UI's and the daemon's keep their own launcher
        replace_run_launcher(instance, here_launcher(stop))
        uncaptured(instance)
    with wal_kept(Path(os.environ["DAGSTER_HOME"])), workspace(instance, here) as context:
        error = context.create_request_context().get_code_location_error("veritas")
        if error is not None:
            raise RuntimeError(f"the code location did not load, so no backfill was created: {error.message.strip()}")
        if stale:
            backfill_id, status = stale_rounds(instance, context, stages, keys, bars, tick, stop, here)
            if not backfill_id:
                return 0
        elif retry:
            backfill_id = retry_backfill(instance, context, retry)
            graph = context.create_request_context().asset_graph
            target = instance.get_backfill(backfill_id).get_asset_backfill_data(graph).target_subset
            total = len({p.partition_key for p in target.iterate_asset_partitions() if p.partition_key})
        else:
            title = f"{to_label(keys[0])}..{to_label(keys[-1])}: {stages[0]}..{stages[-1]}"
            backfill_id = create_backfill(instance, context, keys, stages, title, board=until == BOARD)
            total = len(keys)
        if not stale:
            print(f"[backfill] {backfill_id}: {total} quarters, stages {', '.join(stages)}"
                  f"{' (a dagster-daemon runs it)' if daemon_serves(instance) else ''}", flush=True)
            stop.backfill_id = backfill_id
            status = follow(instance, context, backfill_id, stages, total, bars, tick, stop, here)
            if status == "COMPLETED_SUCCESS" and stop.at is None and (
                    settled := settle_later_releases(instance, context, stages, bars, tick, stop, here)):
                backfill_id, status = settled
    print(f"[backfill] {backfill_id}: {status}", flush=True)
    if status == "COMPLETED_SUCCESS":
        return 0
    print(f"[backfill] retry what did not materialize with: veritas backfill --retry {backfill_id}", flush=True)
    return 1


def handle(args: argparse.Namespace) -> int:
    bars = sys.stderr.isatty() if args.bars is None else args.bars
    return run_backfill(args.config, args.first, args.last, args.until, args.start, args.retry, bars, args.tick,
                        args.launch, args.stale)


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("backfill", help="a Dagster backfill of the stages over a range of quarters, with a "
                                               "progress bar per stage")
    p.add_argument("--from", dest="first", help="first quarter, e.g. 2020Q1")
    p.add_argument("--to", dest="last", help="last quarter (default: the running quarter)")
    p.add_argument("--until", help="stop each quarter after this asset; 'leaderboard': every stage of each quarter, "
                                   "then the leaderboard over all quarters")
    p.add_argument("--start", help="begin each quarter at this asset (its upstream tables must exist)")
    p.add_argument("--retry", metavar="ID", help="a new backfill of what backfill ID did not materialize")
    p.add_argument("--stale", action="store_true",
                   help="rebuild exactly the stale quarters of the stages (every quarter, or --from/--to), round "
                        "after round until none is stale: a rebuilt release makes the next quarter's stale")
    p.add_argument("--launch", choices=("auto", "here", "processes"), default="auto",
                   help="run the quarters in this process one after another (here) or each in a process of its "
                        "own, in parallel (processes); auto: here when only ingestion stages are selected")
    p.add_argument("--tick", type=float, default=1.0, help="seconds between two looks at the backfill (default 1)")
    bars = p.add_mutually_exclusive_group()
    bars.add_argument("--bars", dest="bars", action="store_true", default=None, help="progress bars (default on a terminal)")
    bars.add_argument("--no-bars", dest="bars", action="store_false", help="one text line per change instead of bars")
    p.set_defaults(handler=handle)
    return [p]
