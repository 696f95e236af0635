"""``veritas costs``: the LLM ledger of a quarter (calls, tokens, cost, cache hit rate) by model and by stage."""

import argparse
import json
import sqlite3
import sys
from pathlib import Path

COLUMNS = (("calls", "calls"), ("model_calls", "paid"), ("cache_hits", "hits"), ("hit_rate", "hit rate"),
           ("prompt_tokens", "prompt tok"), ("completion_tokens", "compl. tok"), ("cost_usd", "cost USD"),
           ("errors", "errors"))


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "costs",
        help="the LLM ledger of a quarter: calls, tokens, cost and cache hit rate, by model and by stage",
        description="Reads the llm_ledger table of the LLM cache file named by the config (llm.cache_path, default "
                    "<data_dir>/llm_cache.sqlite). 'paid' calls reached a model; hits came from the cache.",
    )
    p.add_argument("--quarter", help="e.g. 2025Q4 (or the Dagster key 2025-10); default: the whole ledger")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)
    return [p]


def _cell(key: str, value) -> str:
    if key == "hit_rate":
        return f"{100 * value:.1f}%"
    if key == "cost_usd":
        return f"{value:.6f}"
    return f"{value:,}"


def format_report(report: dict) -> str:
    """Two tables (by model, by stage) and a total line, in fixed-width columns."""
    title = f"LLM ledger {report['quarter'] or '(all quarters)'}"
    if not report["calls"]:
        known = ", ".join(q or "(none)" for q in report["quarters_in_ledger"]) or "none"
        return f"{title}: no calls recorded (quarters in the ledger: {known})"
    lines = [title]
    for group, label in (("by_model", "model"), ("by_stage", "stage")):
        rows = [(name or "(none)", stats) for name, stats in report[group].items()]
        rows.append(("total", report))
        width = max(len(label), *(len(name) for name, _ in rows))
        head = f"{label:<{width}}  " + "  ".join(f"{h:>11}" for _, h in COLUMNS)
        lines += ["", head, "-" * len(head)]
        for name, stats in rows:
            lines.append(f"{name:<{width}}  " + "  ".join(f"{_cell(k, stats[k]):>11}" for k, _ in COLUMNS))
    return "\n".join(lines)


def ledger_failure(path: Path, err: BaseException) -> str:
    """One line for a ledger that cannot be read: a read-only folder or mount, a full disk, or not a ledger."""
    from dagster_project.core.store_paths import FULL, READ_ONLY, storage_failure

    kind = storage_failure(err)
    first = str(err).splitlines()[0][:200] if str(err) else type(err).__name__
    if kind == READ_ONLY:
        advice = ("it lies on a read-only file or mount, and SQLite writes beside it to read it (its -wal/-shm "
                  "files; an older ledger is upgraded in place): copy it with its -wal file to a writable folder and "
                  "point llm.cache_path in the config at the copy")
    elif kind == FULL:
        advice = "the disk under it is full: free space there and run it again"
    else:
        advice = "check that llm.cache_path in the config names the LLM cache file (llm_cache.sqlite)"
    return f"veritas costs: cannot read the LLM ledger {path} ({first}): {advice}"


def run(args: argparse.Namespace) -> int:
    from dagster_project.core.config_file import load_config
    from dagster_project.core.cost_ledger import read_report
    from dagster_project.core.quarters import to_label

    try:
        config = load_config(getattr(args, "config", None))
        quarter = to_label(args.quarter) if args.quarter else None
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    path = Path(config["llm"]["cache_path"])
    if not path.exists():
        print(f"LLM ledger: no cache file at {path} (no model stage has run with this config)")
        return 0
    try:
        report = read_report(path, quarter)
        if report is None:  # an older ledger: the resource adds the new columns first
            from dagster_project.resources.llm import LLMResource

            report = LLMResource(cache_path=str(path), members=[]).ledger_report(quarter)
    except (sqlite3.Error, OSError) as err:
        print(ledger_failure(path, err), file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_report(report))
    return 0
