"""Issue 16: every quarter through ``trusted_reviews`` with ``veritas backfill``, against a json.load-and-loop baseline.

    .venv/bin/python bench/backfill.py [--reviews 400000] [--workdir /tmp/veritas_bench_backfill]

The feed is the one ``bench/ingest.py`` builds from real records. Measured in the same run, each in its own
process tree (peak memory: the largest sum of RSS over the tree, sampled every 0.2 s):
- baseline: ``json.load`` of the feed and one loop that buckets the reviews by quarter (``bench/ingest.py``), run
  ``--baseline-runs`` times: the fastest run is the one the ratios use;
- cold: ``veritas backfill --from <first> --to <last> --until trusted_reviews`` on a fresh data dir and instance;
- unchanged: the same backfill again (the snapshot is found by its fingerprint: no parse at all);
- grown: the feed with 1% more reviews appended, then the backfill again (parsed once, all quarters re-read);
- startup: ``import dagster_project.definitions`` alone, what every run process and the backfill's own pay first.
The project's modules are compiled first, as ``make install`` does.
Targets, cold (issue 36): at most 1.6x the baseline's time and at most 0.27 of its memory; the goal is 1x. The load
average before and after is printed: other work on the machine slows the backfill more than the baseline.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.ingest import build_feed  # noqa: E402 (after the sys.path line)

PACKAGES = ("dagster_project", "assets", "schemas", "prompts")  # the project's own, compiled by `make install`


def process_tree(root: int) -> list[int]:
    """A process and all its descendants' pids (from /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def tree_rss_mb(pid: int) -> float:
    """The RSS of a process and all its descendants, in MB."""
    total = 0
    for p in process_tree(pid):
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


def measure(cmd: list[str], log: Path, env: dict | None = None) -> dict:
    """Wall time and peak tree RSS of a command; its output goes to ``log``."""
    started = time.perf_counter()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
        peak = 0.0
        while proc.poll() is None:
            peak = max(peak, tree_rss_mb(proc.pid))
            time.sleep(0.2)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}); see {log}")
    return {"wall_s": wall, "peak_mb": peak}


def write_config(workdir: Path, feed: Path) -> Path:
    cfg = yaml.safe_load((ROOT / "veritas.yaml").read_text())
    cfg["data_dir"] = str(workdir / "data")
    cfg["sources"] = [{"kind": "datafeed", "path": str(feed)}]
    cfg["web"]["warc_paths"] = [str(ROOT / w) for w in cfg["web"]["warc_paths"]]  # relative to the repository
    path = workdir / "veritas.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def snapshot_parses(workdir: Path) -> int:
    """How many feed versions were parsed into snapshots so far."""
    return len(list(workdir.glob("data/**/snapshots/reviews/*/manifest.json")))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reviews", type=int, default=400_000)
    ap.add_argument("--workdir", default="/tmp/veritas_bench_backfill")
    ap.add_argument("--first", default="2016Q1")
    ap.add_argument("--last", default="2026Q2")
    ap.add_argument("--baseline-runs", type=int, default=3, help="the baseline is run this many times; the fastest counts")
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    workdir = Path(args.workdir)
    subprocess.run(["rm", "-rf", str(workdir)], check=True)
    workdir.mkdir(parents=True)
    feed = workdir / "feed.json"
    made = build_feed(feed, args.reviews)
    print(f"feed: {made['bytes'] / 1e6:.0f} MB, {made['reviews']:,} reviews", flush=True)
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # the instance under the bench's data dir
    # the project's bytecode as `make install` leaves it (edits since then would be compiled again by every process
    # where PYTHONDONTWRITEBYTECODE is set, as on this VM)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", LITELLM_OFFLINE_MODE="true", VERITAS_LOG_LEVEL="WARNING")

    out = workdir / "baseline.json"
    runs = [measure([sys.executable, str(ROOT / "bench" / "ingest.py"), "--child", "baseline", str(feed), str(out)],
                    workdir / "baseline.log", env) for _ in range(args.baseline_runs)]
    counted = json.loads(out.read_text())
    # the fastest baseline is the one the ratios use: on this 2-core VM, quiet, one baseline took from 8.4 to 14.5 s
    # between runs (2026-12-05), and a slow one flatters the backfill
    base = min(runs, key=lambda r: r["wall_s"])
    walls = ", ".join(f"{r['wall_s']:.1f}s" for r in runs)
    print(f"baseline (json.load + loop), {len(runs)} runs: {walls}; fastest "
          f"{base['wall_s']:.1f}s, peak {base['peak_mb']:.0f} MB; {counted['reviews']:,} reviews in "
          f"{counted['quarters']} quarters", flush=True)

    cfg = write_config(workdir, feed)
    backfill = [sys.executable, "-m", "dagster_project.cli", "--config", str(cfg), "backfill", "--no-bars",
                "--from", args.first, "--to", args.last, "--until", "trusted_reviews"]
    startup = measure([sys.executable, "-c", "import dagster_project.definitions"], workdir / "startup.log", env)
    print(f"startup (import the code location): {startup['wall_s']:.1f}s, peak {startup['peak_mb']:.0f} MB", flush=True)
    results = {}
    for name in ("cold", "unchanged", "grown"):
        if name == "grown":
            build_feed(feed, int(args.reviews * 1.01))  # the same reviews first, then 1% more
        results[name] = measure(backfill, workdir / f"{name}.log", env)
        results[name]["parses"] = snapshot_parses(workdir)
        print(f"{name}: {results[name]['wall_s']:.1f}s, peak {results[name]['peak_mb']:.0f} MB, feed versions parsed "
              f"so far: {results[name]['parses']}", flush=True)
    cold = results["cold"]
    print(f"cold: {cold['wall_s'] / base['wall_s']:.2f}x the baseline's time (target <= 1.6, goal 1), "
          f"{cold['peak_mb'] / base['peak_mb']:.2f} of its memory (target <= 0.27); unchanged: "
          f"{results['unchanged']['parses'] - cold['parses']} parses (target 0); grown by 1%: "
          f"{results['grown']['parses'] - results['unchanged']['parses']} parse")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
