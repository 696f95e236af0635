"""Issue 36 bench: stage 5 (normalized_claims) alone, cold, on a saved SIMULATED quarter, against its model floor.

    flock /tmp/veritas_heavy.lock .venv/bin/python bench/normalized_claims.py [--reviews 1000] [--out DIR]
                                  [--label NAME] [--latency 0.5] [--parallel-claims 48] [--max-parallel 16]

1. Generates the quarter (as bench/rehearsal.py does) and runs stages 1-4 once into DIR/base (kept: a second run
   with the same --out starts at step 2).
2. Copies that data into DIR/<label> (no LLM answer nor OCR text of stage 5 in it), starts the simulated panel on
   loopback and runs normalized_claims in its own process (bench/rehearsal_stage.py), sampling the resident memory
   of its whole process tree (the OCR workers included) every 0.2 s.
3. Runs it once more in the same folder (warm): no panel call, no image read.
Prints wall, CPU (the tree's, from wait4), peak RSS and PSS of the tree, calls per member, the floor (the busiest
member's calls over its rate, max_parallel / the panel's median latency) and wall / floor.
"""

import argparse
import json
import shutil
import sqlite3
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.backfill import process_tree  # noqa: E402
from bench.rehearsal import STAGES, run_stage  # noqa: E402
from dagster_project.simulation.panel import PanelConfig, PanelServer  # noqa: E402
from dagster_project.simulation.quarter import QuarterConfig, generate  # noqa: E402
from dagster_project.simulation.records import load_shared  # noqa: E402
from dagster_project.simulation.run import write_config  # noqa: E402

STAGE = "normalized_claims"


def _memory(pids: list[int]) -> tuple[int, int]:
    """(RSS, PSS) in kB summed over ``pids``."""
    rss = pss = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
        except OSError:
            continue
    return rss, pss


class TreeMemory:
    """Peak RSS and PSS of the process tree under the newest child of this process, sampled on a thread."""

    def __init__(self):
        self.peak_rss = self.peak_pss = 0
        self.workers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        import os

        me = os.getpid()
        while not self._stop.wait(0.2):
            children = [p for p in process_tree(me) if p != me]
            if not children:
                continue
            rss, pss = _memory(children)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.workers = max(self.workers, len(children) - 1)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def per_member(cache: Path) -> dict[str, dict[str, int]]:
    """member -> template -> calls the panel answered (cache misses) in stage 5."""
    out: dict[str, dict[str, int]] = {}
    with sqlite3.connect(cache) as db:
        for member, template, n in db.execute("SELECT member, template_id, COUNT(*) FROM llm_ledger WHERE stage=? "
                                              "AND cache_hit=0 GROUP BY member, template_id", (STAGE,)):
            out.setdefault(member, {})[template] = n
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reviews", type=int, default=1000)
    ap.add_argument("--release-size", type=int, default=250)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--parallel-claims", type=int, default=48)
    ap.add_argument("--max-parallel", type=int, default=16)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", default="/tmp/veritas_bench_stage5")
    ap.add_argument("--label", default="run")
    args = ap.parse_args()
    out = Path(args.out)
    qcfg = QuarterConfig(reviews=args.reviews, seed=args.seed)
    q, qdir = qcfg.quarter, out / "quarter"
    panel_cfg = PanelConfig(latency_median_s=args.latency, seed=args.seed)
    common = dict(release_size=args.release_size, parallel_claims=args.parallel_claims, max_parallel=args.max_parallel)
    if not (qdir / "truth.json").exists():
        generate(qdir, qcfg, load_shared())
    truth = json.loads((qdir / "truth.json").read_text(encoding="utf-8"))
    base = out / "base"
    if not (base / "done").exists():
        shutil.rmtree(base, ignore_errors=True)
        with PanelServer(truth, panel_cfg) as server:
            config = write_config(base, qdir, server, **common)
            for stage in STAGES[:STAGES.index(STAGE)]:
                r = run_stage(config, q, stage)
                print(f"base {stage}: {'ok' if r['ok'] else 'FAIL'} {r['wall_s']:.1f}s", flush=True)
                if not r["ok"]:
                    print(r["stderr_tail"])
                    return 1
        (base / "done").write_text("stages 1-4\n")
    run = out / args.label
    shutil.rmtree(run, ignore_errors=True)
    # the Dagster instance is left behind: its settings name the base folder's history
    shutil.copytree(base / "data", run / "data", ignore=shutil.ignore_patterns("dagster"))
    print(f"SIMULATED quarter {q}, {args.reviews} reviews; stage 5 in {run} (shared 2-core machine: see uptime)",
          flush=True)
    with PanelServer(truth, panel_cfg) as server:
        config = write_config(run, qdir, server, **common)
        calls: dict = {}
        for pass_ in ("cold", "warm"):
            with TreeMemory() as memory:
                r = run_stage(config, q, STAGE)
            if not r["ok"]:
                print(r["stderr_tail"])
                return 1
            before, calls = calls, per_member(run / "data" / "llm_cache.sqlite")
            new = sum(sum(t.values()) for t in calls.values()) - sum(sum(t.values()) for t in before.values())
            slots = args.max_parallel
            floor = max(sum(t.values()) for t in calls.values()) * args.latency / slots
            print(json.dumps({"pass": pass_, "wall_s": round(r["wall_s"], 1), "cpu_s": round(r["cpu_s"], 1),
                              "peak_tree_rss_mb": round(memory.peak_rss / 1024), "peak_tree_pss_mb":
                              round(memory.peak_pss / 1024), "main_peak_rss_mb": round(r["peak_rss_mb"]),
                              "ocr_workers_seen": memory.workers, "calls_per_member": calls,
                              "new_model_calls": new,
                              "floor_s": round(floor, 1), "wall_over_floor": round(r["wall_s"] / floor, 2)}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
