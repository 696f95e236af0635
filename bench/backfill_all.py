"""Issue 36 bench: the paper's size, simulated: 25 quarters through one ``veritas backfill``, from the reviews to the
leaderboard, against the simulated model panel on loopback.

    .venv/bin/python bench/backfill_all.py [--reviews-per-quarter 1000] [--release-size 1000] [--latency 0.5]
                                           [--quarters 2020Q1:2026Q1] [--launch processes|here]
                                           [--parallel-claims 48] [--max-parallel 16] [--out DIR]

1. Generates the world (dagster_project/simulation/world.py) from ../shared/data (the committed excerpt when it is
   not there) and starts the panel (median latency ``--latency``) in this process.
2. Runs ``veritas backfill --from FIRST --to LAST --until leaderboard`` (every stage, the predictions of the four
   simulated systems, the evaluation and the leaderboard) in a process of its own, sampling the RSS of its process tree every 0.5 s.
3. Reports: wall time; peak tree RSS; the data dir's size on disk; the panel calls and their cost in all and per
   released claim (the LLM ledger); per stage, its steps' summed time, the span from its first step's start to its
   last step's end, their ratio (the mean number of that stage's steps running at once), the most at once, and the
   shares of its step time during which another step of the same stage, or any other step, ran; from the Dagster
   instance's event log (STEP_START to STEP_SUCCESS / STEP_FAILURE of every run of the backfill).
Target at the default size: at most 45 minutes on 2 cores with the panel at 500 ms. Everything here is simulated
and says so; only loopback is used.
"""

import argparse
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.backfill import tree_rss_mb  # noqa: E402
from dagster_project.simulation.panel import PanelServer  # noqa: E402
from dagster_project.simulation.records import load_records  # noqa: E402
from dagster_project.simulation.world import (  # noqa: E402
    WorldConfig,
    build_world,
    panel_config,
    world_truth,
    write_world_config,
)


def disk_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def ledger(cache: Path) -> dict:
    """Paid panel calls (cache misses), all calls and their cost, per stage."""
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT stage, COUNT(*), COALESCE(SUM(cache_hit=0),0), COALESCE(SUM(cost_usd),0) FROM llm_ledger"
                          " GROUP BY stage").fetchall()
    return {stage: {"calls": n, "paid": paid, "cost": cost} for stage, n, paid, cost in rows}


def step_times(home: Path) -> dict[str, list[tuple[float, float]]]:
    """(start, end) of every step of every run in the instance, by step key (the stage)."""
    import dagster as dg
    from dagster._core.events import DagsterEventType
    from dagster._core.instance.ref import InstanceRef

    kinds = {DagsterEventType.STEP_START, DagsterEventType.STEP_SUCCESS, DagsterEventType.STEP_FAILURE}
    out: dict[str, list[tuple[float, float]]] = {}
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        for run in instance.get_runs():
            started = {}
            for entry in instance.all_logs(run.run_id, of_type=kinds):
                key = entry.step_key or ""
                if entry.dagster_event.event_type == DagsterEventType.STEP_START:
                    started[key] = entry.timestamp
                elif key in started:
                    out.setdefault(key, []).append((started.pop(key), entry.timestamp))
    return out


def run_walls(home: Path) -> list[float]:
    """Each finished run's wall time as Dagster records it (from its start in its process: without the launch)."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        stats = [instance.get_run_stats(r.run_id) for r in instance.get_runs()]
    return [st.end_time - st.start_time for st in stats if st.start_time and st.end_time]


def concurrency(intervals: list[tuple[float, float]]) -> dict:
    """Summed step time, the span they cover, their ratio (mean steps at once) and the most at once."""
    events = sorted([(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals])
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    busy = sum(b - a for a, b in intervals)
    span = max(b for _, b in intervals) - min(a for a, _ in intervals)
    return {"steps": len(intervals), "step_s": round(busy, 1), "span_s": round(span, 1),
            "mean_at_once": round(busy / span, 2) if span else 1.0, "most_at_once": most}


def overlap(steps: dict[str, list[tuple[float, float]]]) -> dict[str, dict]:
    """Per stage, the share of its step time during which another step of the same stage ran (``with_itself``) and
    during which any other step ran (``with_any``): how much of the stage ran concurrently."""
    marks = sorted({t for v in steps.values() for a, b in v for t in (a, b)})
    out = {k: {"with_itself": 0.0, "with_any": 0.0} for k in steps}
    for lo, hi in zip(marks, marks[1:]):
        mid = (lo + hi) / 2
        live = {k: sum(a <= mid < b for a, b in v) for k, v in steps.items()}
        total = sum(live.values())
        for k, n in live.items():
            if n:
                out[k]["with_itself"] += (hi - lo) * n * (n > 1)
                out[k]["with_any"] += (hi - lo) * n * (total > 1)
    for k, v in steps.items():
        busy = sum(b - a for a, b in v) or 1.0
        out[k] = {name: round(x / busy, 2) for name, x in out[k].items()}
    return out


def released_claims(data: Path) -> dict[str, int]:
    out = {}
    for latest in sorted((data / "data" / "releases").glob("*/LATEST")):
        folder = latest.parent / Path(latest.read_text().strip()).name
        out[latest.parent.name] = len(json.loads((folder / "claims.json").read_text())["claims"])
    return out


def uptime() -> str:
    """The load averages over 1, 5 and 15 minutes (others' work on a shared machine shows here)."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quarters", default="2020Q1:2026Q1")
    ap.add_argument("--reviews-per-quarter", type=int, default=1000)
    ap.add_argument("--release-size", type=int, default=1000)
    ap.add_argument("--recurring-share", type=float, default=None, help="default: the measured share (world.py)")
    ap.add_argument("--latency", type=float, default=0.5, help="the panel's median latency (s)")
    ap.add_argument("--parallel-claims", type=int, default=48)
    ap.add_argument("--max-parallel", type=int, default=16)
    ap.add_argument("--launch", choices=("processes", "here"), default="processes")
    ap.add_argument("--out", default="/tmp/veritas_bench_backfill_all")
    ap.add_argument("--max-minutes", type=float, default=0.0,
                    help="stop the backfill (SIGINT, as Ctrl-C) after this long and report what it finished, marked "
                         "partial (default: no limit)")
    args = ap.parse_args()
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    first, _, last = args.quarters.partition(":")
    world_cfg = WorldConfig(first=first, last=last or first, reviews_per_quarter=args.reviews_per_quarter)
    if args.recurring_share is not None:
        world_cfg.recurring_share = args.recurring_share
    load_before = uptime()
    t0 = time.monotonic()
    world = build_world(out, world_cfg, load_records())
    generated_s = time.monotonic() - t0
    reviews = sum(q["reviews"] for q in world["quarters"].values())
    print(f"[bench] simulated world: {len(world['quarters'])} quarters, {reviews:,} reviews "
          f"({sum(q['recurring_reviews'] for q in world['quarters'].values())} recurring), "
          f"{sum(q['claims'] for q in world['quarters'].values()):,} distinct claims per quarter summed, "
          f"generated in {generated_s:.0f}s; load before: {load_before}", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # the instance under the world's data dir
    env.update(VERITAS_SIM_KEY="sk-simulated", VERITAS_LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    with PanelServer(world_truth(out), panel_config(latency_median_s=args.latency)) as server:
        config = write_world_config(out, server, release_size=args.release_size, parallel_claims=args.parallel_claims,
                                    max_parallel=args.max_parallel)
        cmd = [sys.executable, "-m", "dagster_project.cli", "--config", config, "backfill", "--no-bars",
               "--from", world_cfg.first, "--to", world_cfg.last, "--until", "leaderboard", "--launch", args.launch]
        log = out / "backfill.log"
        started, began, peak = time.monotonic(), time.time(), 0.0
        with open(log, "wb") as fh:
            proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
            stopped = False
            while proc.poll() is None:
                peak = max(peak, tree_rss_mb(proc.pid))
                if args.max_minutes and not stopped and time.monotonic() - started > 60 * args.max_minutes:
                    proc.send_signal(signal.SIGINT)  # the backfill is cancelled; its figures so far are reported
                    stopped = True
                time.sleep(0.5)
        wall = time.monotonic() - started
        panel = server.panel.counters()
    if proc.returncode != 0 and not stopped:
        print(log.read_text()[-4000:])
        raise SystemExit(f"the backfill failed ({proc.returncode}); see {log}")
    data = out / "data"
    claims = released_claims(data)
    spent = ledger(data / "llm_cache.sqlite")
    paid = sum(s["paid"] for s in spent.values())
    cost = sum(s["cost"] for s in spent.values())
    released = sum(claims.values())
    steps = step_times(data / "dagster")
    shares = overlap(steps)
    stages = {k: {**concurrency(v), **shares[k]} for k, v in sorted(steps.items(), key=lambda kv: min(a for a, _ in kv[1]))}
    walls = run_walls(data / "dagster")
    every = [iv for v in steps.values() for iv in v]
    all_steps_s = sum(b - a for a, b in every)
    # when each release was done (minutes from the backfill's start): the pace, for a run stopped early
    release_done = sorted(round((b - began) / 60, 1) for _, b in steps.get("release", []))
    result = {
        "simulated": True, "partial": stopped, "quarters": len(world["quarters"]), "reviews": reviews, "released_claims": released,
        "releases": len(claims), "wall_s": round(wall, 1), "generate_s": round(generated_s, 1),
        "peak_tree_rss_mb": round(peak), "disk_mb": round(disk_mb(data)), "world_disk_mb": round(disk_mb(out) - disk_mb(data)),
        "panel_calls": paid, "cost_usd": round(cost, 4),
        "calls_per_claim": round(paid / released, 1) if released else None,
        "cost_per_claim_usd": round(cost / released, 6) if released else None,
        "panel_served": panel.get("served"), "release_done_min": release_done,
        "steps_s_over_wall": round(all_steps_s / wall, 2),
        "runs": len(walls), "runs_s": round(sum(walls), 1), "stages": stages, "ledger": spent, "launch": args.launch,
        "latency_s": args.latency, "load_before": load_before, "load_after": uptime(),
        "board": str(data / "data" / "reports" / "leaderboard"),
    }
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    if stopped:
        print(f"[bench] PARTIAL: stopped after {args.max_minutes} min with {len(claims)} of {result['quarters']} "
              "releases; the figures below are for what it finished", flush=True)
    print(f"[bench] {result['quarters']} quarters, {reviews:,} reviews -> {released:,} released claims in "
          f"{wall / 60:.1f} min; peak tree RSS {peak:.0f} MB; data dir {result['disk_mb']} MB (+ world "
          f"{result['world_disk_mb']} MB); {paid:,} panel calls, ${cost:.2f} (simulated prices): "
          f"{result['calls_per_claim']} calls and ${result['cost_per_claim_usd']} per released claim", flush=True)
    print(f"[bench] all steps' time over the wall time: {result['steps_s_over_wall']} (1.0: one step at a time); "
          f"{result['runs']} runs, {result['runs_s']} s of run time as Dagster records it (from the run's start in "
          "its process: the launch, a process and the code's import, is outside it)")
    print(f"{'step':36} {'steps':>5} {'step s':>8} {'span s':>8} {'mean at once':>12} {'most':>5} {'w/ itself':>9} "
          f"{'w/ any':>7}")
    for name, c in stages.items():
        print(f"{name[:36]:36} {c['steps']:>5} {c['step_s']:>8} {c['span_s']:>8} {c['mean_at_once']:>12} "
              f"{c['most_at_once']:>5} {c['with_itself']:>9} {c['with_any']:>7}")
    print(f"[bench] releases done at minutes: {release_done}", flush=True)
    print(f"[bench] load before {load_before}, after {result['load_after']}; {out / 'bench.json'}; the longitudinal "
          f"view: {result['board']}/longitudinal.png", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
