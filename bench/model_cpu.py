"""Issue 13 bench: the pipeline's own CPU per model call in the model stages, against the simulated panel at zero
latency (dagster_project/simulation/panel.py on loopback, no faults), so that only our side of each call costs CPU.

    .venv/bin/python bench/model_cpu.py [--reviews 60] [--stages scored_claims] [--repeat 2] [--parallel-claims 1]
                                        [--latency 0] [--faults] [--profile DIR [--pyspy BIN]] [--out DIR]

1. Generates a small simulated quarter (from the committed record excerpt) and runs the stages before the first
   measured one once; a later run with the same --out reuses both.
2. Runs each measured stage in its own process on a cold LLM cache (a fresh cache file per run, the same store)
   and prints its CPU time (user + system, from wait4), the panel calls it made and the CPU per call; then the
   same stage again from that cache (0 calls: the stage's fixed costs) and the cold run's CPU over it per call
   (this still holds litellm's import, about 4 s, which only the cold run pays).
   --profile DIR also writes a cProfile of each measured stage there (use --parallel-claims 1: cProfile sees the
   main thread only; it times wall clock, so waits count), or with --pyspy a py-spy record of every thread.
The panel runs in this process, so the stage's CPU is the pipeline's alone. Everything here is simulated and only
loopback is used.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dagster_project.simulation.panel import PanelConfig, PanelServer  # noqa: E402
from dagster_project.simulation.quarter import QuarterConfig, generate  # noqa: E402
from dagster_project.simulation.records import load_records  # noqa: E402
from dagster_project.simulation.run import write_config  # noqa: E402

STAGES = ["reviews", "trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims",
          "rectified_claims"]
ENV = {**os.environ, "VERITAS_SIM_KEY": "sk-simulated", "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def run_stage(config: str, quarter: str, stage: str, profile: Path | None = None, pyspy: str = "") -> dict:
    cmd = [sys.executable]
    if profile is not None and pyspy:
        # --gil: only the thread that holds the GIL is sampled, i.e. the Python work that the threads take turns at
        cmd = [pyspy, "record", "--threads", "--gil", "--nonblocking", "-r", "200", "-f", "speedscope", "-o", str(profile),
               "--",
               sys.executable, "-m", "bench.rehearsal_stage"]
    elif profile is not None:
        cmd += ["-m", "cProfile", "-o", str(profile), str(ROOT / "bench/rehearsal_stage.py")]
    else:
        cmd += ["-m", "bench.rehearsal_stage"]
    t0 = time.monotonic()
    child = subprocess.Popen([*cmd, config, quarter, stage], env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    err = child.stderr.read().decode(errors="replace")
    _, status, usage = os.wait4(child.pid, 0)
    return {"ok": os.waitstatus_to_exitcode(status) == 0, "wall_s": time.monotonic() - t0,
            "cpu_s": usage.ru_utime + usage.ru_stime, "err": err[-2000:]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reviews", type=int, default=60)
    ap.add_argument("--stages", default="scored_claims", help="comma-separated measured stages")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--parallel-claims", type=int, default=1)
    ap.add_argument("--max-parallel", type=int, default=4, help="per member")
    ap.add_argument("--latency", type=float, default=0.0, help="panel median latency (s)")
    ap.add_argument("--pyspy", default="",
                    help="a py-spy binary: record each measured stage as well (the thread holding the GIL)")
    ap.add_argument("--faults", action="store_true", help="the panel's default faults (429, 5xx, timeouts, ...)")
    ap.add_argument("--profile", default="")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    measured = args.stages.split(",")
    out = Path(args.out or tempfile.mkdtemp(prefix="veritas-model-cpu-"))
    qcfg = QuarterConfig(reviews=args.reviews, seed=13)
    qdir = out / "quarter"
    if (qdir / "truth.json").exists():
        truth = json.loads((qdir / "truth.json").read_text())
    else:
        truth = generate(qdir, qcfg, load_records(prefer_shared=False))
        (qdir / "truth.json").write_text(json.dumps(truth))
    panel_cfg = PanelConfig(latency_median_s=args.latency, **({} if args.faults else {"retry_after_s": 0.0, "faults": {}}))
    with PanelServer(truth, panel_cfg) as server:
        panel = server.panel
        main_cfg = write_config(out / "main", qdir, server, release_size=40, parallel_claims=args.parallel_claims,
                                max_parallel=args.max_parallel)
        first = min(STAGES.index(s) for s in measured)
        done_file = out / "main" / "upstream_done"
        done = set(done_file.read_text().split()) if done_file.exists() else set()
        for stage in [s for s in STAGES[:first] if s not in done]:
            r = run_stage(main_cfg, qcfg.quarter, stage)
            print(f"upstream {stage}: {'ok' if r['ok'] else 'FAIL'} {r['wall_s']:.1f}s", flush=True)
            if not r["ok"]:
                print(r["err"])
                return 1
            done.add(stage)
            done_file.write_text("\n".join(sorted(done)))
        print("stage               run  ok   wall_s  cpu_s  calls  cpu/call_ms", flush=True)
        for stage in measured:
            for i in range(args.repeat):
                cache = out / f"cold-{stage}.sqlite"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{cache}{suffix}").unlink(missing_ok=True)
                cfg = write_config(out / "cold", qdir, server, release_size=40, parallel_claims=args.parallel_claims,
                                   max_parallel=args.max_parallel, data_dir=out / "main" / "data", cache_path=cache)
                panel.forget_answers()
                before = panel.counters()["served"]
                prof = Path(args.profile) / f"{stage}-{i}.prof" if args.profile else None
                if prof:
                    prof.parent.mkdir(parents=True, exist_ok=True)
                r = run_stage(cfg, qcfg.quarter, stage, prof, args.pyspy)
                calls = panel.counters()["served"] - before
                per = 1000 * r["cpu_s"] / calls if calls else 0.0
                if not r["ok"]:
                    print(r["err"])
                    return 1
                warm = run_stage(cfg, qcfg.quarter, stage)  # the same stage from the cache: 0 calls, the fixed costs
                marginal = 1000 * (r["cpu_s"] - warm["cpu_s"]) / calls if calls else 0.0
                print(f"{stage:18s} {i:4d} {'ok' if r['ok'] else 'FAIL':4s} {r['wall_s']:7.1f} {r['cpu_s']:6.1f} "
                      f"{calls:6d} {per:10.1f}   warm {warm['cpu_s']:5.1f}s, over warm {marginal:6.1f} ms/call",
                      flush=True)
    print(f"data in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
