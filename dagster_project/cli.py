"""``veritas``: thin wrappers over Dagster to run quarters, read the stage yields and export a release."""

import argparse
import importlib
import json
import math
import os
import pkgutil
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("DAGSTER_GRPC_TIMEOUT_SECONDS", "300")  # read at import: a busy code server answers late

DEMO_QUARTERS = ["2020Q2", "2026Q2"]


def _instance(config: dict):
    """The project's Dagster instance (``dagster_project.instance``), pool limits applied."""
    from dagster_project.instance import project_instance

    return project_instance(config)


def run_quarter(config_path: str | None, quarter: str, until: str | None = None) -> bool:
    """Materialize the stages (up to ``until``) for one quarter in process; returns success."""
    return materialize_quarter(config_path, quarter, until)[0]


def materialize_quarter(config_path: str | None, quarter: str, until: str | None = None) -> tuple[bool, str]:
    """``run_quarter`` that also says why a failed run failed: ``(False, "scored_claims: ModelUnavailable: ...")``."""
    import dagster as dg

    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.definitions import ALL_ASSETS, ASSET_NAMES, build_resources, with_snapshot
    from dagster_project.partitions import to_key, to_label

    config = load_config(config_path)
    label = to_label(quarter)
    if until and until not in ASSET_NAMES:
        raise SystemExit(f"unknown asset {until!r}; choose one of {', '.join(ASSET_NAMES)}")
    selection = ASSET_NAMES[: ASSET_NAMES.index(until) + 1] if until else ASSET_NAMES
    started = time.monotonic()
    print(f"[veritas] {label}: {' -> '.join(selection)}", flush=True)
    result = dg.materialize(
        [*ALL_ASSETS, *CHECKS],
        selection=with_snapshot(selection),
        partition_key=to_key(label),
        resources=build_resources(config),
        instance=_instance(config),
        tags={"veritas/quarter": label},
        run_config={"loggers": {"console": {"config": {"log_level": os.environ.get("VERITAS_LOG_LEVEL", "INFO")}}}},
        raise_on_error=False,
    )
    reason = "" if result.success else failure_reason(result)
    print(f"[veritas] {label}: {'done' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s"
          + (f": {reason}" if reason else ""), flush=True)
    return result.success, reason


def failure_reason(result) -> str:
    """The first failed step of a run and its error's first line, e.g. ``scored_claims: ModelUnavailable: ...``."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data is not None:
            error = event.step_failure_data.error
            while error is not None and error.cause is not None and error.cls_name in (
                    "DagsterExecutionStepExecutionError", "DagsterUserCodeExecutionError"):
                error = error.cause  # Dagster's wrapper says "Error occurred while executing op"; the cause says why
            first = (error.message.strip().splitlines() or [""])[0] if error is not None else "failed"
            head, sep, rest = first.partition(": ")
            if sep and error is not None and head.rsplit(".", 1)[-1] == error.cls_name:
                first = f"{error.cls_name}: {rest}"  # the class without its module path
            return f"{event.step_key}: {first}"
    return "the run failed before any step (see the log above)"


CORE_KEYS = {"rows_in", "rows_out", "dropped", "version", "path", "quarter", "dagster/row_count"}


def _plain(value):
    """Metadata values as JSON-safe numbers: NaN (an empty evaluation) becomes None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _check_results(history, quarters: set[str]) -> dict[str, dict]:
    """Latest evaluation of every yield check per quarter (the checks are unpartitioned: the quarter is in their metadata)."""
    from dagster_project.history import YIELD_CHECK_KEYS

    found: dict[str, dict] = {}
    for asset, check in YIELD_CHECK_KEYS:
        for evaluation in history.check_evaluations(asset, check):  # newest first: the first hit per quarter is the latest
            meta = evaluation["metadata"]
            quarter = meta.get("quarter")
            if quarter in quarters and check not in found.setdefault(quarter, {}):
                found[quarter][check] = {
                    "asset": asset,
                    "passed": evaluation["passed"],
                    "severity": evaluation["severity"],
                    "note": meta.get("note"),
                    "metadata": {k: _plain(v) for k, v in meta.items() if k != "note"},
                    "run_id": evaluation["run_id"],
                }
    return found


def _quarter_report(history, label: str, checks: dict) -> dict:
    from dagster_project.dashboard import STAGE_ORDER  # the funnel, in pipeline order (definitions.ASSET_NAMES)

    stages = {}
    for name in STAGE_ORDER:
        record = history.materialization(name, label)
        if record is None:
            continue
        meta = record["metadata"]
        stages[name] = {
            "rows_in": meta.get("rows_in"),
            "rows_out": meta.get("rows_out"),
            "dropped": meta.get("dropped"),
            "drops": {k.removeprefix("drop/"): v for k, v in meta.items() if k.startswith("drop/")},
            # numeric extras only: llm/*, platform/*, fetch_success_rate, label/*, claims/*, media ...
            "extras": {
                k: _plain(v) for k, v in meta.items()
                if k not in CORE_KEYS and not k.startswith("drop/") and isinstance(v, (int, float)) and not isinstance(v, bool)
            },
            "version": meta.get("version"),
            "materialized": record["timestamp"],
        }
        if name == "release":
            stages[name]["path"] = meta.get("path")
    return {"quarter": label, "stages": stages, "checks": checks.get(label, {})}


def collect_yields(config_path: str | None, quarter: str) -> dict:
    """Per stage: rows in, rows out, drops by reason and numeric extras, from the latest materialization of that
    quarter; plus the latest yield-check results of the quarter."""
    return collect_range(config_path, quarter, quarter)[0]


def collect_range(config_path: str | None, first: str, last: str) -> list[dict]:
    """``collect_yields`` for every quarter from ``first`` to ``last`` (labels or Dagster keys), oldest first. Reads
    the Dagster instance only (``history``): no code location, and no Dagster import with the default storage."""
    from dagster_project.history import open_history
    from dagster_project.quarters import quarter_range
    from dagster_project.settings import load_config

    labels = quarter_range(first, last)
    history = open_history(load_config(config_path))
    checks = _check_results(history, set(labels))
    return [_quarter_report(history, label, checks) for label in labels]


def format_funnel(report: dict) -> str:
    from dagster_project.dashboard import quarter_summary

    lines = [f"Stage yields for {report['quarter']}:", f"  {'stage':<18}{'in':>7}{'out':>7}  drops"]
    for name, s in report["stages"].items():
        drops = ", ".join(f"{k}={v}" for k, v in sorted(s["drops"].items(), key=lambda kv: -kv[1]) if v) or "-"
        lines.append(f"  {name:<18}{s['rows_in'] if s['rows_in'] is not None else '':>7}{s['rows_out'] if s['rows_out'] is not None else '':>7}  {drops}")
    if not report["stages"]:
        lines.append("  (nothing materialized for this quarter yet)")
        return "\n".join(lines)
    summary = quarter_summary(report)
    if summary["fetch_success_rate"] is not None:
        lines.append(f"  fetch success {summary['fetch_success_rate']:.1%}")
    if summary["llm"]:
        llm = summary["llm"]
        rate = "n/a" if llm["hit_rate"] is None else f"{llm['hit_rate']:.1%}"
        lines.append(f"  llm: {llm['calls']} calls, cache hit rate {rate}, cost ${llm['cost_usd']:.4f}")
    for name, check in sorted(report.get("checks", {}).items()):
        if not check["passed"]:
            lines.append(f"  {check['severity']} {name}: {check['note']}")
    return "\n".join(lines)


def format_range(reports: list[dict]) -> str:
    """The funnel of every quarter with data, then one line naming the quarters without any."""
    if len(reports) == 1:
        return format_funnel(reports[0])
    blocks = [format_funnel(r) for r in reports if r["stages"]]
    empty = [r["quarter"] for r in reports if not r["stages"]]
    if empty:
        blocks.append(f"Nothing materialized for: {', '.join(empty)}")
    return "\n\n".join(blocks)


def demo(config_path: str | None) -> int:
    from assets.release.release import validate_release
    from dagster_project.resources.llm import stop_requested

    started = time.monotonic()
    failed: list[tuple[str, str]] = []  # (quarter, why) of each quarter that failed
    for quarter in DEMO_QUARTERS:
        ok, reason = materialize_quarter(config_path, quarter)
        if not ok:
            failed.append((quarter, reason))
            break  # the next quarter would meet the same dead model or stop
        if stop_requested():
            break
    print()
    for quarter in DEMO_QUARTERS:
        report = collect_yields(config_path, quarter)
        print(format_funnel(report))
        path = report["stages"].get("release", {}).get("path")
        if path:
            meta = json.loads((Path(path) / "meta.json").read_text())
            counts = meta["claim_counts"]
            problems = validate_release(Path(path))
            print(f"  release: {path}")
            print(f"  claims: {counts}  media: {meta['media_counts']}  format check: {'passed' if not problems else problems}")
            if counts["intact"] == 0 and counts["compromised"] == 0:
                print("  NOTE: no Intact/Compromised pair was available this quarter, so the split has none; "
                      "nothing was faked to balance it (the embedded model's labels are noise).")
        print()
    took = time.monotonic() - started
    if failed:
        quarter, reason = failed[0]
        print(f"[veritas] demo FAILED after {took:.0f}s: quarter {quarter} failed in {reason}", flush=True)
        return 1
    print(f"[veritas] demo finished in {took:.0f}s. "
          "The embedded SmolLM2-135M model proves the plumbing only; its labels are meaningless.")
    return 0


STOP_GRACE_S = 5.0  # after a signal: time for the run to record its failure (the servers get 3 s before it)


def run_stoppable(command: str, work) -> int:
    """``work()`` in a worker thread while the main thread waits for SIGINT/SIGTERM (Dagster defers signals until a
    step ends, and a model stage runs for minutes). On a signal: no more model calls, the embedded servers stop,
    the run fails before any stage writes a partial table, and the process exits 128+signal within seconds; the
    model cache keeps every answer received, so the next run resumes from it."""
    import signal
    import threading

    from dagster_project.resources.llm import request_stop
    from dagster_project.resources.local_llm import stop_all

    if threading.current_thread() is not threading.main_thread():
        return work()  # only the main thread receives signals (a caller's own thread, e.g. in tests)
    box: dict = {}
    received: list[int] = []

    def target():
        try:
            box["rc"] = work()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread, which raises it
            box["error"] = err

    def on_signal(signum, frame):
        received.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    worker = threading.Thread(target=target, name=f"veritas-{command}", daemon=True)
    worker.start()
    while worker.is_alive() and not received:
        worker.join(0.2)
    if received:  # our handler stays: a second Ctrl-C during the stop changes nothing
        name = signal.Signals(received[0]).name
        request_stop(f"{name} received")
        servers = stop_all()
        worker.join(STOP_GRACE_S)
        print(f"[veritas] {command} stopped by {name}: {servers} embedded model server(s) stopped, no stage output "
              f"written after the signal; the model cache keeps every answer received, so running it again resumes "
              f"from there.", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(128 + received[0])  # worker threads may still wait on a remote model: do not wait for them
    for sig, handler in previous.items():
        signal.signal(sig, handler)
    if "error" in box:
        raise box["error"]
    return box["rc"]


def yields(args: argparse.Namespace) -> int:
    """``veritas yields``: --quarter Q, or --from A [--to B]; text, --json and/or --html FILE."""
    from dagster_project.dashboard import write_html
    from dagster_project.quarters import current_quarter

    if bool(args.quarter) == bool(args.first) or (args.last and not args.first):
        raise ValueError("give either --quarter Q or --from A [--to B]")
    first = args.quarter or args.first
    last = args.quarter or args.last or current_quarter()
    reports = collect_range(args.config, first, last)
    if args.json:
        single = args.quarter is not None
        payload = reports[0] if single else {"from": reports[0]["quarter"], "to": reports[-1]["quarter"], "quarters": reports}
        print(json.dumps(payload, indent=2, default=str))
    else:
        print(format_range(reports))
    if args.html:
        path = write_html(reports, args.html)
        print(f"[veritas] dashboard: {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def command_modules() -> list:
    """The subcommand modules under ``dagster_project.commands``; each has ``register(subparsers) -> [parsers]``
    and sets ``handler`` on its parsers. They import heavy libraries inside their handlers, not at import."""
    from dagster_project import commands

    return [importlib.import_module(f"{commands.__name__}.{m.name}") for m in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="veritas", description=__doc__)
    parser.add_argument("--config", help="config file (default: $VERITAS_CONFIG or veritas.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the offline demo snapshot end to end with the embedded model")
    p_run = sub.add_parser("run", help="materialize the pipeline for one quarter")
    p_run.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or the Dagster key 2025-10)")
    p_run.add_argument("--until", help="stop after this asset")
    p_yields = sub.add_parser("yields", help="per stage: rows in, rows out and drops by reason, for one quarter or a range")
    p_yields.add_argument("--quarter", help="one quarter, e.g. 2025Q4 (or 2025-10)")
    p_yields.add_argument("--from", dest="first", help="first quarter of a range")
    p_yields.add_argument("--to", dest="last", help="last quarter of a range (default: the running quarter)")
    p_yields.add_argument("--json", action="store_true", help="print the reports as JSON")
    p_yields.add_argument("--html", metavar="FILE", help="also write the self-contained dashboard page to FILE")
    extra = [p_run, p_yields]
    for module in command_modules():  # each dagster_project/commands/<name>.py adds its own subcommand(s)
        extra.extend(module.register(sub))
    for p in extra:
        p.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    args = parser.parse_args(argv)
    try:
        if getattr(args, "handler", None):
            return args.handler(args)
        if args.command == "demo":
            return run_stoppable("demo", lambda: demo(args.config))
        if args.command == "run":
            return run_stoppable("run", lambda: 0 if run_quarter(args.config, args.quarter, args.until) else 1)
        if args.command == "yields":
            return yields(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
