"""Backfill wall time on I/O-bound stages with 1 and with 2 Celery workers, and their ratio (target >= 1.7x).

The timed stages are the model stages (``--start``..``--until``); the stages before them run first, untimed.
They wait on a provider: here a loopback stub that answers after ``--latency`` seconds, the way a
hosted model does. The data are demo reviews of 2020Q2 copied into ``--quarters`` consecutive quarters (dates
shifted by whole quarters). Each setting gets a fresh data dir and LLM cache, Redis, and N ``dagster-celery``
workers (concurrency 1 each); ``veritas backfill --parallel 2`` runs the quarters. Both settings do the same
work, so the ratio is the speed-up from the second worker.

    .venv/bin/python bench/scale.py [--quarters 4] [--reviews 3] [--latency 4] [--start normalized_claims]
                                    [--until scored_claims]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")


def shifted_feed(source: Path, target: Path, quarters: int, reviews: int) -> list[str]:
    """The first ``reviews`` 2020Q2 elements, copied into ``quarters`` quarters from 2020Q2 on; returns the labels.

    Each copy gets its quarter's dates and a claim text of its own, so that every quarter has the same model work."""
    feed = json.loads(source.read_text())
    elements = [e for e in feed["dataFeedElement"] if e.get("item") and re.search(r"2020-0[4-6]", json.dumps(e))][:reviews]
    out, labels = [], []
    for k in range(quarters):
        def shift(match: re.Match, k=k) -> str:
            month = int(match.group(1)) - 1 + 3 * k
            return f"{2020 + month // 12}-{month % 12 + 1:02d}"

        month = 3 + 3 * k
        labels.append(f"{2020 + month // 12}Q{month % 12 // 3 + 1}")
        for e in elements:
            copy = json.loads(re.sub(r"2020-(0[4-6])", shift, json.dumps(e)))
            for review in copy["item"] if isinstance(copy["item"], list) else [copy["item"]]:
                # same URL and text = same review key: the copies would merge into one 2020Q2 review (other quarters empty)
                review["claimReviewed"] = f"{review['claimReviewed']} (copy {labels[-1]})"
            out.append(copy)
    feed["dataFeedElement"] = out
    target.write_text(json.dumps(feed))
    return labels


def one_setting(workers: int, args, folder: Path, stub) -> float:
    import yaml

    from tests.ops_support import celery_workers, redis_server, write_ops_config

    folder.mkdir(parents=True)
    labels = shifted_feed(ROOT / "demo/snapshot/feed.json", folder / "feed.json", args.quarters, args.reviews)
    with redis_server(folder) as broker:
        cfg = write_ops_config(folder, stub, executor={"kind": "celery", "broker": broker})
        raw = yaml.safe_load(Path(cfg).read_text())
        raw["sources"] = [{"kind": "datafeed", "path": str(folder / "feed.json")}]
        Path(cfg).write_text(yaml.safe_dump(raw))
        with celery_workers(cfg, workers, folder, env={"STUB_KEY": "stub"}):
            env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
            base = [sys.executable, "-m", "dagster_project.cli", "--config", cfg, "backfill", "--from", labels[0],
                    "--to", labels[-1], "--no-bars"]  # runs at once: the instance's run queue
            # untimed: the upstream tables the model stages read (CPU-bound parsing and extraction)
            warm = subprocess.run([*base, "--until", before(args.start)], cwd=ROOT, env=env, capture_output=True,
                                  text=True, check=False)
            if warm.returncode != 0:
                raise SystemExit(f"warm-up with {workers} worker(s) failed:\n{warm.stdout[-3000:]}\n{warm.stderr[-3000:]}")
            started = time.monotonic()
            done = subprocess.run([*base, "--start", args.start, "--until", args.until], cwd=ROOT, env=env,
                                  capture_output=True, text=True, check=False)
            elapsed = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"backfill with {workers} worker(s) failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return elapsed


def before(stage: str) -> str:
    from dagster_project.definitions import ASSET_NAMES

    return ASSET_NAMES[ASSET_NAMES.index(stage) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quarters", type=int, default=4)
    parser.add_argument("--reviews", type=int, default=3, help="demo reviews per quarter")
    parser.add_argument("--latency", type=float, default=4.0, help="seconds the stub provider takes per answer")
    parser.add_argument("--start", default="normalized_claims", help="first timed stage (the ones before: untimed)")
    parser.add_argument("--until", default="scored_claims")
    parser.add_argument("--parallel", type=int, default=2, help="quarters in flight (backfill --parallel)")
    parser.add_argument("--workers", default="1,2", help="the worker counts to compare (the first is the baseline)")
    args = parser.parse_args()

    from dagster_project.simulation.openai_stub import OpenAIStub
    from tests.ops_support import schema_responder

    calls = {"n": 0}

    def slow(mode: str, body: dict):
        calls["n"] += 1
        time.sleep(args.latency)  # the provider's think time: the I/O a worker waits on
        status, content = schema_responder(mode, body)
        copy = re.search(r"\(copy \d{4}Q\d\)", json.dumps(body["messages"]))
        answer = json.loads(content)
        if copy and isinstance(answer, dict) and "claim" in answer:
            # the quarter's mark goes on into later prompts: no cache hits across quarters, the same work per setting
            answer["claim"] += " " + copy.group(0)
        return status, json.dumps(answer)

    stub = OpenAIStub(slow)
    os.environ["STUB_KEY"] = "stub"
    times = {}
    try:
        with tempfile.TemporaryDirectory(prefix="veritas-scale-") as tmp:
            for workers in [int(w) for w in args.workers.split(",")]:
                before = calls["n"]
                times[workers] = one_setting(workers, args, Path(tmp) / f"w{workers}", stub)
                print(f"{workers} worker(s): {times[workers]:.1f} s wall, {calls['n'] - before} model calls "
                      f"at {args.latency:.1f} s each", flush=True)
    finally:
        stub.close()
    if len(times) < 2:
        return 0
    (base, t0), (more, t1) = list(times.items())[:2]
    print(f"backfill of {args.quarters} quarters x {args.reviews} reviews, {args.start}..{args.until}: "
          f"{base} worker(s) {t0:.1f} s, {more} worker(s) {t1:.1f} s, speed-up {t0 / t1:.2f}x (target >= 1.7x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
