"""``veritas backfill``: run the stages over a range of quarters, one Dagster run per quarter, with a bar per stage.

Every run goes into the project's Dagster instance (the UI shows them, tagged ``veritas/backfill=<id>``), with the
executor of the config file (in-process, multiprocess or Celery workers). A quarter's run executes in its own
subprocess, so ``--parallel N`` runs N quarters at once and a crash (or a kill) loses one quarter, not the
backfill. A failed quarter is retried with exponential backoff; what still fails after that is retried later
with ``veritas backfill --retry <id>``, which runs only the quarters without a successful run.
The same backfill can be launched from the UI: job ``all_stages``, Partitions tab, "Launch backfill".
"""

import argparse
import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BACKFILL_TAG = "veritas/backfill"
ATTEMPT_TAG = "veritas/attempt"


# ---- the per-quarter child ------------------------------------------------------------------------------------
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


def run_partition(config_path: str, key: str, backfill_id: str, attempt: int, until: str | None,
                  from_failure: str | None = None, start: str | None = None) -> bool:
    """Execute the all-stages job for one partition in the project's instance (a backfill's child process).

    ``from_failure``: a failed run of this partition; only its steps that did not succeed run again."""
    import dagster as dg

    from dagster_project.cli import _instance
    from dagster_project.config import load_config
    from dagster_project.definitions import all_stages_job, with_snapshot
    from dagster_project.partitions import to_label

    config = load_config(config_path)
    os.environ["VERITAS_CONFIG"] = config["path"]  # the job is rebuilt from it here and in any Celery worker
    instance = _instance(config)
    selection = stage_selection(start, until)
    tags = {"dagster/partition": key, BACKFILL_TAG: backfill_id, ATTEMPT_TAG: str(attempt), "veritas/quarter": to_label(key)}
    run_config = {"loggers": {"console": {"config": {"log_level": os.environ.get("VERITAS_LOG_LEVEL", "WARNING")}}}}
    job = dg.reconstructable(all_stages_job)
    if from_failure:
        result = dg.execute_job(job, instance=instance, tags=tags, run_config=run_config,
                                reexecution_options=dg.ReexecutionOptions.from_failure(from_failure, instance))
    else:
        result = dg.execute_job(job, instance=instance, tags=tags, run_config=run_config,
                                asset_selection=[dg.AssetKey(a) for a in with_snapshot(selection)])
    return result.success


# ---- the coordinator ------------------------------------------------------------------------------------------
def state_path(config: dict, backfill_id: str) -> Path:
    return Path(config["data_dir"]) / "backfills" / f"{backfill_id}.json"


def save_state(path: Path, state: dict) -> None:
    from dagster_project.resources.files import atomic_write

    atomic_write(path, json.dumps(state, indent=2).encode())  # a reader (the UI user, a test) never sees half


def find_run(instance, backfill_id: str, key: str, attempt: int):
    import dagster as dg

    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={BACKFILL_TAG: backfill_id, "dagster/partition": key, ATTEMPT_TAG: str(attempt)}), limit=1
    )
    return records[0].dagster_run if records else None


def settle_run(instance, backfill_id: str, key: str, attempt: int, exit_code: int) -> tuple[str, str | None]:
    """The outcome of a child: ``success`` or ``failed``; a killed child's run is marked failed in the instance."""
    import dagster as dg

    run = find_run(instance, backfill_id, key, attempt)
    if run is None:
        return "failed", None
    run = instance.get_run_by_id(run.run_id)
    if run.status == dg.DagsterRunStatus.SUCCESS and exit_code == 0:
        return "success", run.run_id
    if not run.is_finished:  # the process died under the run: nobody else will close it
        instance.report_run_failed(run, f"the backfill's child process exited with code {exit_code}")
    return "failed", run.run_id


def can_resume(instance, run_id: str) -> bool:
    """A failed run with at least one successful step can be re-executed from its failure."""
    import dagster as dg

    run = instance.get_run_by_id(run_id)
    if run is None or run.status != dg.DagsterRunStatus.FAILURE:
        return False
    return bool(instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS, limit=1).records)


class Progress:
    """A bar per stage: how many of the backfill's quarters have that stage materialized since the backfill began."""

    def __init__(self, stages: list[str], keys: list[str], since: float, bars: bool):
        self.stages, self.keys, self.since = stages, keys, since
        self.last: dict[str, int] = {}
        self.bars = None
        if bars:
            from tqdm import tqdm

            width = max(len(s) for s in stages)
            self.bars = {s: tqdm(total=len(keys), desc=s.ljust(width), position=i, leave=True, unit="quarter",
                                 bar_format="{desc} |{bar}| {n}/{total}") for i, s in enumerate(stages)}

    def done_per_stage(self, instance) -> dict[str, int]:
        import dagster as dg

        out = {}
        for stage in self.stages:
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=dg.AssetKey(stage), asset_partitions=self.keys, after_timestamp=float(self.since)),
                limit=10_000,
            ).records
            out[stage] = len({r.partition_key for r in records})
        return out

    def update(self, instance) -> dict[str, int]:
        done = self.done_per_stage(instance)
        if done != self.last:
            if self.bars:
                for stage, n in done.items():
                    self.bars[stage].n = n
                    self.bars[stage].refresh()
            else:
                print("[backfill] " + "  ".join(f"{s} {n}/{len(self.keys)}" for s, n in done.items()), flush=True)
            self.last = done
        return done

    def close(self) -> None:
        for bar in (self.bars or {}).values():
            bar.close()


def apply_pools(instance, config: dict) -> dict[str, int]:
    """Set the instance's pool limits from the config's ``pools:`` (e.g. {llm: 2, web: 4}); others stay as they are."""
    for pool, limit in config.get("pools", {}).items():
        instance.event_log_storage.set_concurrency_slots(pool, limit)
    return config.get("pools", {})


def coordinate(config_path: str | None, state: dict, parallel: int, max_retries: int, backoff: float, bars: bool) -> int:
    from dagster_project.cli import _instance
    from dagster_project.config import load_config
    from dagster_project.partitions import to_label

    config = load_config(config_path)
    instance = _instance(config)
    apply_pools(instance, config)
    path = state_path(config, state["id"])
    until, start = state.get("until"), state.get("start")
    stages = stage_selection(start, until)
    parts = state["partitions"]
    queue = [(k, 0.0) for k in parts if parts[k]["status"] != "success"]  # (partition, not before)
    retries_left = {k: max_retries for k, _ in queue}
    running: dict[str, subprocess.Popen] = {}
    progress = Progress(stages, list(parts), state["created"], bars)
    log_dir = path.parent / state["id"]
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"[backfill] {state['id']}: {len(queue)} of {len(parts)} quarters to run "
          f"({to_label(state['from'])}..{to_label(state['to'])}), stages {stages[0]}..{stages[-1]}", flush=True)
    try:
        while queue or running:
            now = time.time()
            ready = [item for item in queue if item[1] <= now]
            while ready and len(running) < parallel:
                item = ready.pop(0)
                queue.remove(item)
                key = item[0]
                entry = parts[key]
                entry["attempts"] += 1
                cmd = [sys.executable, "-m", "dagster_project.commands.backfill", "--config", config["path"],
                       "--partition", key, "--backfill", state["id"], "--attempt", str(entry["attempts"])]
                if until:
                    cmd += ["--until", until]
                if start:
                    cmd += ["--start", start]
                failed_run = next((r for r in reversed(entry.get("runs", [])) if r), None)
                if failed_run and can_resume(instance, failed_run):
                    cmd += ["--from-failure", failed_run]  # the steps that succeeded are not redone
                with open(log_dir / f"{key}-{entry['attempts']}.log", "wb") as log:
                    running[key] = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=Path(__file__).resolve().parents[2])
                entry.update(status="running", pid=running[key].pid)
                save_state(path, state)
            for key, proc in list(running.items()):
                code = proc.poll()
                if code is None:
                    continue
                del running[key]
                entry = parts[key]
                status, run_id = settle_run(instance, state["id"], key, entry["attempts"], code)
                entry.update(status=status, pid=None, exit_code=code)
                entry.setdefault("runs", []).append(run_id)
                if status == "failed" and retries_left.get(key, 0) > 0:
                    retries_left[key] -= 1
                    delay = backoff * 2 ** (max_retries - retries_left[key] - 1)  # 1x, 2x, 4x the backoff
                    print(f"[backfill] {to_label(key)} failed (exit {code}); retry in {delay:.0f}s", flush=True)
                    entry["status"] = "retrying"
                    queue.append((key, time.time() + delay))
                elif status == "failed":
                    log_file = log_dir / f"{key}-{entry['attempts']}.log"
                    print(f"[backfill] {to_label(key)} FAILED (exit {code}); log: {log_file}", flush=True)
                save_state(path, state)
            progress.update(instance)
            time.sleep(0.5)
    finally:
        for proc in running.values():  # interrupted (Ctrl-C): the children go with the coordinator
            proc.terminate()
        progress.close()
    progress.update(instance)
    failed = [k for k, e in parts.items() if e["status"] != "success"]
    state["finished"] = time.time()
    save_state(path, state)
    if failed:
        print(f"[backfill] {state['id']}: {len(failed)} quarter(s) failed: {', '.join(to_label(k) for k in failed)}. "
              f"Retry only those with: veritas backfill --retry {state['id']}", flush=True)
        return 1
    print(f"[backfill] {state['id']}: all {len(parts)} quarters succeeded", flush=True)
    return 0


def new_state(first: str, last: str, until: str | None, start: str | None = None) -> dict:
    from dagster_project.partitions import quarter_range, quarterly_partitions, to_key

    keys = [to_key(q) for q in quarter_range(first, last)]
    known = set(quarterly_partitions.get_partition_keys())
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise ValueError(f"quarters outside the partitions: {', '.join(unknown)}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return {
        "id": f"bf-{stamp}-{os.urandom(2).hex()}",
        "created": time.time(),
        "from": keys[0],
        "to": keys[-1],
        "until": until,
        "start": start,
        "partitions": {k: {"status": "pending", "attempts": 0} for k in keys},
    }


def handle(args: argparse.Namespace) -> int:
    from dagster_project.config import load_config

    config = load_config(args.config)
    if args.retry:
        path = state_path(config, args.retry)
        if not path.exists():
            raise ValueError(f"no backfill {args.retry!r} in {path.parent}")
        state = json.loads(path.read_text())
    else:
        if not args.first:
            raise ValueError("give --from A [--to B], or --retry ID")
        stage_selection(args.start, args.until)  # refuses unknown stages early
        from dagster_project.partitions import quarterly_partitions

        state = new_state(args.first, args.last or quarterly_partitions.get_last_partition_key(), args.until, args.start)
    bars = sys.stderr.isatty() if args.bars is None else args.bars
    return coordinate(args.config, state, max(1, args.parallel), max(0, args.max_retries), args.backoff, bars)


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("backfill", help="run the stages over a range of quarters, with a progress bar per stage")
    p.add_argument("--from", dest="first", help="first quarter, e.g. 2020Q1")
    p.add_argument("--to", dest="last", help="last quarter (default: the running quarter)")
    p.add_argument("--until", help="stop each quarter after this asset")
    p.add_argument("--start", help="begin each quarter at this asset (its upstream tables must exist)")
    p.add_argument("--retry", metavar="ID", help="re-run only the quarters of backfill ID that did not succeed")
    p.add_argument("--parallel", type=int, default=1, help="quarters running at once (default 1)")
    p.add_argument("--max-retries", type=int, default=2, help="automatic retries of a failed quarter (default 2)")
    p.add_argument("--backoff", type=float, default=10.0, help="seconds before the first retry, doubling after (default 10)")
    bars = p.add_mutually_exclusive_group()
    bars.add_argument("--bars", dest="bars", action="store_true", default=None, help="progress bars (default on a terminal)")
    bars.add_argument("--no-bars", dest="bars", action="store_false", help="one text line per change instead of bars")
    p.set_defaults(handler=handle)
    return [p]


def _child_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dagster_project.commands.backfill")
    parser.add_argument("--config")
    parser.add_argument("--partition", required=True)
    parser.add_argument("--backfill", required=True)
    parser.add_argument("--attempt", type=int, default=1)
    parser.add_argument("--until")
    parser.add_argument("--start")
    parser.add_argument("--from-failure", metavar="RUN_ID")
    args = parser.parse_args(argv)
    ok = run_partition(args.config, args.partition, args.backfill, args.attempt, args.until, args.from_failure, args.start)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
    sys.exit(_child_main())
