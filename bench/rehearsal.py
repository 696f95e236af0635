"""Issue 13 bench, the dress rehearsal: a simulated quarter through every stage, against a simulated model panel.

    .venv/bin/python bench/rehearsal.py [--reviews 4000] [--release-size 1000] [--latency 0.5]
                                        [--parallel-claims 48] [--max-parallel 16] [--out DIR] [--skip-kill]
                                        [--figures-only | --kill-only] [--seed-cache EARLIER_OUT]
                                        [--label-mix real|balanced] [--rectify demand|all]
                                        [--score demand|all] [--rewrite-styles negation=0.2,correction=0.2,...]
                                        [--refine-uptake 0.7]

1. Generates the quarter (dagster_project/simulation/quarter.py) from ../shared/data (or VERITAS_SHARED_DATA; it stops
   when neither is there) and starts the panel on loopback.
2. Runs each stage in its own process through Dagster and prints, per stage: wall time, peak RSS, CPU time,
   panel calls, tokens, cost, and CPU per model call.
3. The release: size, Intact = Compromised, Unknown share, media share, both variants, 3-bin and category
   accuracy and MSE against the planted truth; then once more with the tie order swapped (must drop).
4. Concurrency efficiency of scored_claims: calls/s over (calls in flight allowed / panel median latency); each model
   stage's wall time over its floor (its busiest member's calls / (slots / mean latency); target 1.25), and the
   quarter's time from reviews to release (the two jobs that read the release, predictions and evaluation, apart).
   ``--figures-only`` stops here.
5. A warm re-run (every stage): 0 panel calls.
6. kill -9 in the middle of scored_claims on a cold cache, re-run: the release is byte-identical and the panel
   answered no prompt twice (answers made for a client that was gone, in flight at the kill or timed out, count
   apart as abandoned). ``--kill-only`` runs this check alone on the run already in ``--out``.
Everything here is simulated and says so; only loopback is used.
"""

import argparse
import hashlib
import json
import math
import os
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.release.card import integrity_summary  # noqa: E402
from assets.release.validation import validate_release  # noqa: E402
from bench.rehearsal_stage import HEDGED, SLOT_BUSY  # noqa: E402
from dagster_project.simulation.panel import PanelConfig, PanelServer, parse_styles  # noqa: E402
from dagster_project.simulation.quarter import QuarterConfig, generate  # noqa: E402
from dagster_project.simulation.records import SHARED_DATA, load_shared  # noqa: E402
from dagster_project.simulation.run import (  # noqa: E402
    agreement,
    client_timeout,
    latest_release,
    write_config,
)

STAGES = ["reviews", "trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims",
          "rectified_claims", "release", "predictions", "evaluation"]
ENV = {**os.environ, "VERITAS_SIM_KEY": "sk-simulated", "PYTHONPATH": str(ROOT)}


def run_stage(config: str, quarter: str, stage: str, *extra: str, kill_after=None) -> dict:
    """One stage in a child process; its wall time, CPU time and peak RSS (from wait4)."""
    t0 = time.monotonic()
    # the child's log goes to a file: a pipe read only after the child ends fills up (64 KiB) and stalls the child
    log = tempfile.TemporaryFile()
    child = subprocess.Popen([sys.executable, "-m", "bench.rehearsal_stage", config, quarter, stage, *extra],
                             env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    if kill_after is not None:
        while child.poll() is None and not kill_after():
            time.sleep(0.2)
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
    _, status, usage = os.wait4(child.pid, 0)
    log.seek(max(0, log.seek(0, os.SEEK_END) - 1500))
    err = log.read().decode(errors="replace")
    log.close()

    def per_member(tag: str) -> dict:  # the child's last line of that tag (rehearsal_stage)
        found = [line.split(" ", 1)[1] for line in err.splitlines() if line.startswith(tag + " ")]
        return json.loads(found[-1]) if found else {}

    return {"stage": stage, "ok": os.waitstatus_to_exitcode(status) == 0, "killed": os.WIFSIGNALED(status),
            "wall_s": time.monotonic() - t0, "cpu_s": usage.ru_utime + usage.ru_stime,
            "peak_rss_mb": usage.ru_maxrss / 1024, "stderr_tail": err[-1500:],
            "slot_busy": per_member(SLOT_BUSY), "hedged": per_member(HEDGED)}


def process_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


LEDGER_FROM = {"rowid": 0}  # with --seed-cache, the copied ledger's last row: only the rows after it are this run's


def ledger(cache: Path, stage: str) -> dict:
    """This run's ledger rows of a stage: calls, model calls (cache hits apart), tokens, cost. A seeded cache's ledger
    holds the earlier run's rows too, which are not counted (they doubled stage 7's calls once: 20,311 for 9,000)."""
    if not cache.exists():
        return {"calls": 0, "model_calls": 0, "tokens": 0, "cost": 0.0}
    with sqlite3.connect(cache) as db:
        row = db.execute("SELECT COUNT(*), COALESCE(SUM(cache_hit=0),0), COALESCE(SUM(prompt_tokens+completion_tokens),0),"
                         " COALESCE(SUM(cost_usd),0) FROM llm_ledger WHERE stage=? AND rowid>?",
                         (stage, LEDGER_FROM["rowid"])).fetchone()
    return {"calls": row[0], "model_calls": row[1], "tokens": row[2], "cost": row[3]}


def member_calls(cache: Path, stage: str) -> dict[str, int]:
    """The calls each member answered for a stage in this run (cache hits apart)."""
    with sqlite3.connect(cache) as db:
        return dict(db.execute("SELECT member, COUNT(*) FROM llm_ledger WHERE stage=? AND cache_hit=0 AND rowid>? "
                               "GROUP BY member", (stage, LEDGER_FROM["rowid"])).fetchall())


def stage_floors(rows: dict, cache: Path, slots: int, panel: PanelConfig) -> list[str]:
    """Issue 36: each model stage's floor, its busiest member's calls over that member's rate, and the stage's wall
    time over it (target: at most 1.25). A member's rate is its slots over the mean time a call holds one (Little's
    law): the panel's lognormal latency has its mean exp(sigma^2 / 2) above its median (x1.13 at sigma 0.5; its cap at
    ``latency_cap_s`` cuts off less than 1e-8 of it at the defaults), so a floor at the median cannot be reached even
    with every slot always busy. The ratio to the median floor is printed beside it."""
    mean = panel.latency_median_s * math.exp(panel.latency_sigma ** 2 / 2)
    lines = [f"model stages against their floor (busiest member's calls / ({slots} slots / {mean:.3f} s, the panel's "
             f"mean latency; median {panel.latency_median_s:.2f} s)):"]
    for stage, r in rows.items():
        calls = member_calls(cache, stage)
        if not calls:
            continue
        busiest = max(calls, key=calls.get)
        floor, at_median = calls[busiest] * mean / slots, calls[busiest] * panel.latency_median_s / slots
        lines.append(f"  {stage:<18} {r['wall_s']:6.0f} s, floor {floor:5.0f} s ({busiest} {calls[busiest]:,} of "
                     f"{sum(calls.values()):,} calls: " + ", ".join(f"{m} {n:,}" for m, n in sorted(calls.items()))
                     + f"), x{r['wall_s'] / floor:.2f} (x{r['wall_s'] / at_median:.2f} at the median)"
                     + (f"; {busiest}'s slots held {r['slot_busy'][busiest]:.2f} from its first call to its last"
                        if busiest in r.get("slot_busy", {}) else "")
                     + (f"; re-sent (llm.hedge_after_s) {sum(r['hedged'].values())}" if r.get("hedged") else ""))
    return lines


def real_prices() -> list[tuple[str, float, float]]:
    """(name, USD per input token, per output token) of veritas.real.yaml's members, from litellm's bundled cost map."""
    import yaml

    from dagster_project.resources.llm import _import_litellm

    members = yaml.safe_load((ROOT / "veritas.real.yaml").read_text())["llm"]["members"]
    out = []
    for m in members:
        info = _import_litellm().get_model_info(model=m["model"])
        out.append((m["name"], float(info["input_cost_per_token"]), float(info["output_cost_per_token"])))
    return out


def cost_at_real_prices(cache: Path, members: list[str]) -> tuple[float, str]:
    """The run's paid tokens priced as if veritas.real.yaml's members had answered: the first (writer, filter,
    chooser) member's at the first real member's prices, the other raters' at the real members' mean prices."""
    real = real_prices()
    with sqlite3.connect(cache) as db:
        rows = db.execute("SELECT member, SUM(prompt_tokens), SUM(completion_tokens) FROM llm_ledger WHERE cache_hit=0"
                          " AND rowid>? GROUP BY member", (LEDGER_FROM["rowid"],)).fetchall()
    mean_in, mean_out = (sum(r[i] for r in real) / len(real) for i in (1, 2))
    total = 0.0
    for member, prompt, completion in rows:
        pin, pout = (real[0][1], real[0][2]) if member == members[0] else (mean_in, mean_out)
        total += prompt * pin + completion * pout
    return total, f"{real[0][0]} for {members[0]}, the mean of {', '.join(r[0] for r in real)} for the others"


def quarter_plan(config: str, quarter: str) -> dict:
    """`veritas plan` for the quarter, from its tables after stage 4, as a maintainer would print it before stage 5."""
    from dagster_project.commands.plan import build_plan, format_plan
    from dagster_project.config import load_config
    from dagster_project.resources.llm import LLMResource
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import stage_settings

    cfg = load_config(config)
    llm = LLMResource(**cfg["llm"])
    llm.set_quarter(quarter)
    plan = build_plan(llm, stage_settings(cfg["stages"]), StoreResource(**cfg["store"]), quarter,
                      before_stage_5=True)
    print("\n".join("  " + line for line in format_plan(plan).splitlines()[:9]), flush=True)
    return plan


def release_digest(folder: Path) -> dict[str, str]:
    """sha256 of every release file but the manifest and the zip (they carry the run's time and version)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "manifest.json" and p.suffix != ".zip"}


def kill_check(out: Path, qdir: Path, q: str, server: PanelServer, args, half: int) -> None:
    """kill -9 in scored_claims after ``half`` answers on a cold cache (the main run's store, so its upstream tables),
    then scored, rectified and release again: is the release the main run's, byte for byte, and did the panel
    answer any prompt twice? An answer made for a client that was gone (in flight at the kill, or timed out) is
    counted apart as abandoned: only the ones the pipeline received and then asked again count twice."""
    panel = server.panel
    kill_dir = out / "kill"
    shutil.rmtree(kill_dir, ignore_errors=True)
    kill_dir.mkdir()
    kill_cfg = write_config(kill_dir, qdir, server, release_size=args.release_size,
                            parallel_claims=args.parallel_claims, max_parallel=args.max_parallel,
                            data_dir=out / "main" / "data", cache_path=kill_dir / "llm_cache.sqlite",
                            stages={"rectify": args.rectify, "score": args.score})
    main_digest = release_digest(latest_release(out / "main" / "data", q))
    panel.forget_answers()
    before = panel.counters()
    killed = run_stage(kill_cfg, q, "scored_claims", kill_after=lambda: panel.counters()["served"] - before["served"] >= half)
    at_kill = panel.counters()
    again = [run_stage(kill_cfg, q, s) for s in ("scored_claims", "rectified_claims", "release")]
    after = panel.counters()
    same = release_digest(latest_release(out / "main" / "data", q)) == main_digest
    with sqlite3.connect(kill_dir / "llm_cache.sqlite") as db:  # every paid call, the killed run's and the re-run's
        paid, keys = db.execute("SELECT COUNT(*), COUNT(DISTINCT cache_key) FROM llm_ledger WHERE stage='scored_claims'"
                                " AND cache_hit=0").fetchone()
    timeouts = sum(n for k, n in after["faults"].items() if k.endswith("/timeout")) - sum(
        n for k, n in before["faults"].items() if k.endswith("/timeout"))
    print(f"kill -9 in scored_claims after {at_kill['served'] - before['served']} answers (killed={killed['killed']}, "
          f"{at_kill['abandoned'] - before['abandoned']} answers abandoned by the killed process); re-run "
          f"{'ok' if all(a['ok'] for a in again) else 'FAIL'} in {sum(a['wall_s'] for a in again):.0f}s; release "
          f"byte-identical: {same}; prompts answered twice: {after['answered_twice']} ({timeouts} timeouts, "
          f"{after['abandoned'] - before['abandoned']} answers abandoned in all); the ledger: {paid} paid scored_claims "
          f"calls for {keys} prompts", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reviews", type=int, default=4000)
    ap.add_argument("--release-size", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.5, help="panel median latency (s)")
    ap.add_argument("--parallel-claims", type=int, default=48,
                    help="claims at once: 3x max_parallel keeps every member busy while claims wait on their slowest")
    ap.add_argument("--max-parallel", type=int, default=16, help="per member")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", default="")
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--figures-only", action="store_true", help="the run's figures; no swap-ties, warm or kill -9 run")
    ap.add_argument("--kill-only", action="store_true", help="only the kill -9 check, on the run already in --out")
    ap.add_argument("--label-mix", choices=("real", "balanced"), default="real",
                    help="planted labels from the records' own ratings (real) or from fixed shares (balanced)")
    ap.add_argument("--rectify", choices=("demand", "all"), default="demand", help="stages.rectify")
    ap.add_argument("--score", choices=("demand", "all"), default="demand", help="stages.score")
    ap.add_argument("--rewrite-styles", type=parse_styles, default=None,
                    help="the simulated writer's rewrite styles and shares, e.g. negation=0.5,correction=0.5 (styles "
                         "not named get 0; default: PanelConfig.rewrite_styles, negation 0.2, correction 0.2, minimal "
                         "0.4, paraphrase 0.2)")
    ap.add_argument("--refine-uptake", type=float, default=PanelConfig.refine_uptake,
                    help="on a refine round, the chance that the simulated writer takes the critique")
    ap.add_argument("--seed-cache", default="", help="an earlier run's --out: its quarter (the same records) and its LLM "
                    "and OCR caches, so that what changes is the code's doing alone (compare the releases with "
                    "bench/release_diff.py)")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="veritas-rehearsal-"))
    quarter_cfg = QuarterConfig(reviews=args.reviews, seed=args.seed, label_mix=args.label_mix)
    q = quarter_cfg.quarter
    panel_cfg = PanelConfig(latency_median_s=args.latency, seed=args.seed, refine_uptake=args.refine_uptake,
                            **({"rewrite_styles": args.rewrite_styles} if args.rewrite_styles else {}))
    print(f"SIMULATED quarter {q}: {args.reviews} reviews, release {args.release_size}, panel median "
          f"{args.latency * 1000:.0f} ms, parallel_claims {args.parallel_claims}, max_parallel {args.max_parallel}, "
          f"client timeout {client_timeout(panel_cfg):.0f} s; in {out}")
    t0 = time.monotonic()
    qdir = out / "quarter"
    if args.kill_only:
        truth = json.loads((qdir / "truth.json").read_text(encoding="utf-8"))
        with PanelServer(truth, panel_cfg) as server:
            scored = ledger(out / "main" / "data" / "llm_cache.sqlite", "scored_claims")["model_calls"]
            kill_check(out, qdir, q, server, args, half=scored // 2)
        return 0
    if not (SHARED_DATA / "evaluation" / "averitec_dev.json").exists():  # not the test suite's small excerpt
        print(f"no real records at {SHARED_DATA}: put ../shared/data beside the checkout or set VERITAS_SHARED_DATA")
        return 2
    if args.seed_cache:  # the same records as the earlier run: what changes is the code's doing alone
        shutil.copytree(Path(args.seed_cache) / "quarter", qdir, dirs_exist_ok=True)
        truth = json.loads((qdir / "truth.json").read_text(encoding="utf-8"))
        print(f"the quarter of {args.seed_cache}: {json.dumps(truth['counts'])}", flush=True)
    else:
        truth = generate(qdir, quarter_cfg, load_shared())
        print(f"generated in {time.monotonic() - t0:.0f}s: {json.dumps(truth['counts'])}", flush=True)

    with PanelServer(truth, panel_cfg) as server:
        panel = server.panel
        config = write_config(out / "main", qdir, server, release_size=args.release_size,
                              parallel_claims=args.parallel_claims, max_parallel=args.max_parallel,
                              stages={"rectify": args.rectify, "score": args.score})
        cache = out / "main" / "data" / "llm_cache.sqlite"
        if args.seed_cache:
            cache.parent.mkdir(parents=True, exist_ok=True)
            for name in ("llm_cache.sqlite", "ocr_cache.sqlite"):
                shutil.copyfile(Path(args.seed_cache) / "main" / "data" / name, cache.with_name(name))
            with sqlite3.connect(cache) as db:
                LEDGER_FROM["rowid"] = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM llm_ledger").fetchone()[0]
            print(f"caches from {args.seed_cache}: calls it answered are cache hits here", flush=True)
        # panel_cpu: this process's CPU time, which is the panel's while a stage runs; in_flight: the mean number of
        # requests in the panel over the stage's wall time
        print("\nstage                 ok   wall_s  peak_MB   cpu_s  calls  model  tokens     cost_usd  cpu/call_ms"
              "  panel_cpu_s  in_flight")
        rows = {}
        for stage in STAGES:
            before, cpu_before = panel.counters(), process_cpu_s()
            r = run_stage(config, q, stage)
            after = panel.counters()
            r["served"] = after["served"] - before["served"]
            r["panel_cpu_s"] = process_cpu_s() - cpu_before
            r["in_flight"] = (after["in_flight_s"] - before["in_flight_s"]) / r["wall_s"]
            r.update(ledger(cache, stage))
            rows[stage] = r
            per_call = (1000 * r["cpu_s"] / r["model_calls"]) if r["model_calls"] else 0.0
            print(f"{stage:20s} {'ok' if r['ok'] else 'FAIL':4s} {r['wall_s']:8.1f} {r['peak_rss_mb']:8.0f} "
                  f"{r['cpu_s']:7.1f} {r['served']:6d} {r['model_calls']:6d} {r['tokens']:7d} {r['cost']:12.4f} {per_call:10.1f}"
                  f" {r['panel_cpu_s']:12.1f} {r['in_flight']:10.1f}", flush=True)
            if not r["ok"]:
                print(r["stderr_tail"])
                return 1
            if stage == "appearances":  # stages 1-4 made no model call: what `veritas plan` predicts for the rest
                plan = quarter_plan(config, q)
        release = latest_release(out / "main" / "data", q)
        result = agreement(release, truth)
        n = max(1, result["claims"])
        total_calls = sum(r["served"] for r in rows.values())
        total_cost = sum(r["cost"] for r in rows.values())
        print(f"\nrelease (SIMULATED): {json.dumps({k: v for k, v in result.items() if k != 'wrong'})}")
        tokens = sum(r["tokens"] for r in rows.values())
        real_cost, priced_as = cost_at_real_prices(cache, [m.name for m in panel_cfg.members])
        print(f"per released claim: {total_calls / n:.1f} model calls, {tokens / n:,.0f} tokens, ${total_cost / n:.5f} "
              f"at the simulated prices, ${real_cost / n:.5f} at veritas.real.yaml's (litellm's cost map; {priced_as})")
        print("veritas plan (printed before stage 5) against the ledger of the run:")
        for stage in plan["stages"]:
            paid = rows.get(stage["stage"], {})
            ratio = lambda a, b: f"x{a / b:.2f}" if b else "-"  # noqa: E731
            print(f"  {stage['stage']:<18} calls {stage['calls']:>7,} planned / {paid.get('calls', 0):>7,} made "
                  f"({ratio(stage['calls'], paid.get('calls', 0))}); cost ${stage['cost_usd']:.2f} / "
                  f"${paid.get('cost', 0.0):.2f} ({ratio(stage['cost_usd'], paid.get('cost', 0.0))})")
        made = sum(rows[s]["cost"] for s in rows)
        print(f"  total              cost ${plan['total']['cost_usd']:.2f} planned / ${made:.2f} paid "
              f"(x{plan['total']['cost_usd'] / made:.2f})" if made else "  total: nothing paid")
        problems = validate_release(release)
        print(f"format and order check: {'passed' if not problems else problems[:5]}")
        for line in integrity_summary(json.loads((release / "manifest.json").read_text())):
            print(f"  {line}")
        print(f"panel: {json.dumps(panel.counters())}")
        mix = panel.counters()
        print(f"rewrite styles (SIMULATED writer, shares {json.dumps(panel_cfg.rewrite_styles)}, refine uptake "
              f"{panel_cfg.refine_uptake}): {json.dumps(mix['rewrite_styles'])}; on refine rounds "
              f"{json.dumps(mix['refine_rewrite_styles'])}; answers per round {json.dumps(mix['rewrite_rounds'])}")
        # each claim asks its question of every member at once (ask_each), each member at most max_parallel at once
        allowed = len(panel_cfg.members) * min(args.parallel_claims, args.max_parallel)

        def efficiency(calls_per_s: float) -> float:  # calls/s over (calls allowed in flight / the median latency)
            return calls_per_s * args.latency / allowed

        scored = rows["scored_claims"]
        achieved = scored["served"] / scored["wall_s"]
        print(f"concurrency efficiency (scored_claims): {achieved:.2f} calls/s / ({allowed} in flight / "
              f"{args.latency:.2f} s) = {efficiency(achieved):.2f}")
        with sqlite3.connect(cache) as db:  # the span from the first answer to the last: start-up and writing apart
            first, last = db.execute("SELECT MIN(ts), MAX(ts) FROM llm_ledger WHERE stage='scored_claims' AND cache_hit=0"
                                     ).fetchone()
        if last and last > first:
            span = scored["model_calls"] / (last - first)
            print(f"  over the span of its answers ({last - first:.0f} s of the stage's {scored['wall_s']:.0f} s): "
                  f"{span:.2f} calls/s, efficiency {efficiency(span):.2f}")
        print("  share of each member's slots its calls held (llm/slot_busy; the member near 1.0 paces the stage): "
              + ", ".join(f"{name} {share:.2f}" for name, share in sorted(scored["slot_busy"].items())))
        # the bound: every slot busy all the time still gives median / mean time in the panel (a lognormal's mean is
        # above its median, and a timeout fault holds its slot past the client's timeout)
        in_panel = scored["in_flight"] / achieved if achieved else float("nan")
        busy = scored["in_flight"] / allowed
        print(f"  the panel held {scored['in_flight']:.1f} of {allowed} requests on average ({busy:.2f} of the slots), "
              f"{in_panel:.3f} s of panel time per answer: with every slot always busy it would be "
              f"{args.latency / in_panel:.2f}")

        print("\n".join(stage_floors(rows, cache, args.max_parallel, panel_cfg)))
        quarter_s = sum(rows[s]["wall_s"] for s in STAGES[:STAGES.index("release") + 1])
        print(f"the quarter, reviews to release: {quarter_s:.0f}s ({quarter_s / 60:.1f} min; target <= 10 min on a quiet "
              "2-core machine); "
              f"the jobs that read it: {rows['predictions']['wall_s'] + rows['evaluation']['wall_s']:.0f}s")
        if args.figures_only:
            print(f"\ntotal {time.monotonic() - t0:.0f}s (SIMULATED quarter; data in {out})")
            return 0

        for stage in ("scored_claims", "rectified_claims", "release"):  # the broken rule, from the cache
            run_stage(config, q, stage, "--swap-ties")
        swapped = agreement(latest_release(out / "main" / "data", q), truth)
        print(f"tie order swapped: accuracy_3bin {swapped['accuracy_3bin']}, accuracy_category "
              f"{swapped['accuracy_category']}, mse {swapped['mse']} (default order: {result['accuracy_category']})")
        for stage in ("scored_claims", "rectified_claims", "release"):
            run_stage(config, q, stage)

        before = panel.counters()["served"]
        t1 = time.monotonic()
        warm = [run_stage(config, q, stage) for stage in STAGES]
        print(f"warm re-run: {'ok' if all(w['ok'] for w in warm) else 'FAIL'}, {panel.counters()['served'] - before} "
              f"panel calls, {time.monotonic() - t1:.0f}s")

        if not args.skip_kill:
            kill_check(out, qdir, q, server, args, half=scored["served"] // 2)
    print(f"\ntotal {time.monotonic() - t0:.0f}s (SIMULATED quarter; data in {out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
