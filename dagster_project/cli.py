"""``veritas``: thin wrappers over Dagster to run quarters, read the stage yields and export a release."""

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")

DEMO_QUARTERS = ["2020Q2", "2026Q2"]
FUNNEL = [
    "reviews", "trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims",
    "rectified_claims", "release", "predictions", "evaluation",
]


def _instance(config: dict):
    """A persistent Dagster instance under the data dir, so ``dagster dev`` shows the same runs."""
    import dagster as dg

    home = Path(os.environ.get("DAGSTER_HOME") or Path(config["data_dir"]) / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    settings = home / "dagster.yaml"
    if not settings.exists():
        settings.write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(home)
    return dg.DagsterInstance.get()


def run_quarter(config_path: str | None, quarter: str, until: str | None = None) -> bool:
    """Materialize the stages (up to ``until``) for one quarter in process; returns success."""
    import dagster as dg

    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.definitions import ALL_ASSETS, ASSET_NAMES, build_resources
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
        selection=selection,
        partition_key=to_key(label),
        resources=build_resources(config),
        instance=_instance(config),
        tags={"veritas/quarter": label},
        run_config={"loggers": {"console": {"config": {"log_level": os.environ.get("VERITAS_LOG_LEVEL", "INFO")}}}},
        raise_on_error=False,
    )
    print(f"[veritas] {label}: {'done' if result.success else 'FAILED'} in {time.monotonic() - started:.1f}s", flush=True)
    return result.success


def collect_yields(config_path: str | None, quarter: str) -> dict:
    """Per stage: rows in, rows out and drops by reason, from the latest materialization of that quarter."""
    import dagster as dg

    from dagster_project.config import load_config
    from dagster_project.partitions import to_key, to_label

    config = load_config(config_path)
    instance = _instance(config)
    label = to_label(quarter)
    stages = {}
    for name in FUNNEL:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey(name), asset_partitions=[to_key(label)]), limit=1
        ).records
        if not records:
            continue
        meta = records[0].asset_materialization.metadata
        value = lambda k: getattr(meta.get(k), "value", None)  # noqa: E731
        stages[name] = {
            "rows_in": value("rows_in"),
            "rows_out": value("rows_out"),
            "drops": {k.removeprefix("drop/"): v.value for k, v in meta.items() if k.startswith("drop/")},
            "version": value("version"),
            "materialized": records[0].timestamp,
        }
        if name == "release":
            stages[name]["path"] = value("path")
    return {"quarter": label, "stages": stages}


def format_funnel(report: dict) -> str:
    lines = [f"Stage yields for {report['quarter']}:", f"  {'stage':<18}{'in':>7}{'out':>7}  drops"]
    for name, s in report["stages"].items():
        drops = ", ".join(f"{k}={v}" for k, v in sorted(s["drops"].items(), key=lambda kv: -kv[1]) if v) or "-"
        lines.append(f"  {name:<18}{s['rows_in'] if s['rows_in'] is not None else '':>7}{s['rows_out'] if s['rows_out'] is not None else '':>7}  {drops}")
    if not report["stages"]:
        lines.append("  (nothing materialized for this quarter yet)")
    return "\n".join(lines)


def export_release(config_path: str | None, quarter: str, out: str) -> Path:
    from dagster_project.config import load_config
    from dagster_project.definitions import build_resources
    from dagster_project.partitions import to_label

    store = build_resources(load_config(config_path))["store"]
    label = to_label(quarter)
    folder = store.latest_release(label)
    if folder is None:
        raise SystemExit(f"no release for {label}: run `veritas run --quarter {label}` first")
    target = Path(out) / label
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(folder, target)
    return target


def demo(config_path: str | None) -> int:
    from assets.release import validate_release

    started = time.monotonic()
    ok = all(run_quarter(config_path, q) for q in DEMO_QUARTERS)
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
    print(f"[veritas] demo {'finished' if ok else 'FAILED'} in {time.monotonic() - started:.0f}s. "
          "The embedded SmolLM2-135M model proves the plumbing only; its labels are meaningless.")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="veritas", description=__doc__)
    parser.add_argument("--config", help="config file (default: $VERITAS_CONFIG or veritas.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the offline demo snapshot end to end with the embedded model")
    p_run = sub.add_parser("run", help="materialize the pipeline for one quarter")
    p_run.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or the Dagster key 2025-10)")
    p_run.add_argument("--until", help="stop after this asset")
    p_yields = sub.add_parser("yields", help="per stage: rows in, rows out and drops by reason")
    p_yields.add_argument("--quarter", required=True)
    p_yields.add_argument("--json", action="store_true")
    p_export = sub.add_parser("export", help="copy a quarter's release to a folder")
    p_export.add_argument("--quarter", required=True)
    p_export.add_argument("--out", required=True)
    for p in (p_run, p_yields, p_export):
        p.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args.config)
        if args.command == "run":
            return 0 if run_quarter(args.config, args.quarter, args.until) else 1
        if args.command == "yields":
            report = collect_yields(args.config, args.quarter)
            print(json.dumps(report, indent=2, default=str) if args.json else format_funnel(report))
            return 0
        if args.command == "export":
            print(export_release(args.config, args.quarter, args.out))
            return 0
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
