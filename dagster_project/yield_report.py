"""The stage-yield report of ``veritas yields`` (and of the demo's funnels): ``collect_yields``/``collect_range``
read, per quarter, every stage's latest materialization (rows in, rows out, drops by reason, numeric extras) and the
latest yield-check results from the Dagster instance alone (no code location); ``format_funnel``/``format_range`` turn
them into text, with the ways-in lines of stage 4, the failed answers of stage 6, the release's integrity lines and
the latest human audit of the quarter's release (``release_audit``'s metadata)."""

import math

CORE_KEYS = {"rows_in", "rows_out", "dropped", "version", "path", "quarter", "dagster/row_count"}
# the human audit's asset (assets/audit/asset.py), named here so that `veritas yields` need not import it
AUDIT_ASSET = "release_audit"


def _plain(value):
    """Metadata values as JSON-safe numbers: NaN (an empty evaluation) becomes None."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _check_results(history, quarters: set[str]) -> dict[str, dict]:
    """Latest evaluation of every yield check per quarter (the checks are unpartitioned: the quarter is in their metadata)."""
    from dagster_project.core.instance_records import YIELD_CHECK_KEYS

    found: dict[str, dict] = {}
    for asset, check in YIELD_CHECK_KEYS:
        for evaluation in history.check_evaluations(asset, check):  # newest first: the first hit per quarter is the latest
            # a batched backfill run evaluates several quarters at once: each one's verdict is under "quarters"
            meta = evaluation["metadata"]
            each = meta.get("quarters") or {meta.get("quarter"): {**meta, "passed": evaluation["passed"]}}
            for quarter, one in each.items():
                if quarter in quarters and check not in found.setdefault(quarter, {}):
                    found[quarter][check] = {
                        "asset": asset,
                        "passed": one["passed"],
                        "severity": evaluation["severity"],
                        "note": one.get("note"),
                        "metadata": {k: _plain(v) for k, v in one.items() if k not in ("note", "passed")},
                        "run_id": evaluation["run_id"],
                    }
    return found


def _quarter_report(history, label: str, checks: dict) -> dict:
    from dagster_project.core.dashboard import (
        STAGE_ORDER,  # the funnel, in pipeline order (definitions.ASSET_NAMES)
    )

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
            stages[name]["integrity_summary"] = meta.get("integrity_summary")
    return {"quarter": label, "stages": stages, "checks": checks.get(label, {}), "audit": audit_report(history, label)}


def audit_report(history, label: str) -> dict | None:
    """The quarter's latest human audit (``release_audit``'s metadata): the release version it audited, its summary
    line, the figures and the gate; None when no audit ran."""
    record = history.materialization(AUDIT_ASSET, label)
    if record is None:
        return None
    meta = record["metadata"]
    report = meta.get("report") if isinstance(meta.get("report"), dict) else {}

    def number(key: str):  # the metadata says "n/a" where there is no figure
        value = meta.get(key)
        return _plain(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return {"release_version": meta.get("release_version"), "summary": meta.get("summary"),
            "agreement3": number("agreement3"), "mse": number("mse"), "alpha_annotators": number("alpha_annotators"),
            "alpha_with_ensemble": number("alpha_with_ensemble"), "claims": meta.get("claims"),
            "annotators": meta.get("annotators"), "disputed": meta.get("disputed"), "passed": report.get("passed"),
            "min_agreement": report.get("min_agreement"), "addendum": meta.get("addendum"),
            "materialized": record["timestamp"]}


def audit_lines(report: dict) -> list[str]:
    """The quarter's latest human audit in a line: its summary, Krippendorff's alpha and the gate."""
    a = report.get("audit")
    if not a:
        return []
    alpha = "n/a" if a["alpha_annotators"] is None else f"{a['alpha_annotators']:.3f}"
    gate = {True: "passed", False: "FAILED (a warning: look at the disputed claims)"}.get(a["passed"], "unknown")
    return [f"  human audit of release {a['release_version']}: {a['summary']}; Krippendorff's alpha {alpha} among "
            f"the annotators; gate {gate}"]


def collect_yields(config_path: str | None, quarter: str) -> dict:
    """Per stage: rows in, rows out, drops by reason and numeric extras, from the latest materialization of that
    quarter; plus the latest yield-check results of the quarter."""
    return collect_range(config_path, quarter, quarter)[0]


def collect_range(config_path: str | None, first: str, last: str) -> list[dict]:
    """``collect_yields`` for every quarter from ``first`` to ``last`` (labels or Dagster keys), oldest first. Reads
    the Dagster instance only (``history``): no code location, and no Dagster import with the default storage."""
    from dagster_project.core.config_file import load_config
    from dagster_project.core.instance_records import open_history
    from dagster_project.core.quarters import quarter_range

    labels = quarter_range(first, last)
    history = open_history(load_config(config_path))
    checks = _check_results(history, set(labels))
    return [_quarter_report(history, label, checks) for label in labels]


def format_funnel(report: dict, note: str = "") -> str:
    """The funnel of one quarter as text; ``note`` (e.g. ``SIM_NOTE``) goes into its heading."""
    from dagster_project.core.dashboard import quarter_summary

    lines = [f"Stage yields for {report['quarter']}{f' ({note})' if note else ''}:", f"  {'stage':<18}{'in':>7}{'out':>7}  drops"]
    for name, s in report["stages"].items():
        drops = ", ".join(f"{k}={v}" for k, v in sorted(s["drops"].items(), key=lambda kv: -kv[1]) if v) or "-"
        lines.append(f"  {name:<18}{s['rows_in'] if s['rows_in'] is not None else '':>7}{s['rows_out'] if s['rows_out'] is not None else '':>7}  {drops}")
    if not report["stages"]:
        lines.append("  (nothing materialized for this quarter yet)")
        return "\n".join(lines + audit_lines(report))
    summary = quarter_summary(report)
    if summary["fetch_success_rate"] is not None:
        lines.append(f"  fetch success {summary['fetch_success_rate']:.1%}")
    if summary["llm"]:
        llm = summary["llm"]
        rate = "n/a" if llm["hit_rate"] is None else f"{llm['hit_rate']:.1%}"
        lines.append(f"  llm: {llm['calls']} calls, cache hit rate {rate}, cost ${llm['cost_usd']:.4f}")
    lines += way_lines(report)
    lines += failed_answer_lines(report["stages"])
    lines += integrity_lines(report["stages"])
    lines += audit_lines(report)
    for name, check in sorted(report.get("checks", {}).items()):
        if not check["passed"]:
            lines.append(f"  {check['severity']} {name}: {check['note']}")
    return "\n".join(lines)


def way_lines(report: dict) -> list[str]:
    """Stage 4, one line per platform: its media yield, then per way in served/tried and the failures by reason."""
    from dagster_project.core.dashboard import media_yield, way_table

    yields = media_yield(report)
    table = way_table(report["stages"].get("appearances", {}).get("extras", {}))
    lines = []
    for platform in sorted(set(yields) | {p for p, _ in table}):
        row = yields.get(platform)
        media = f" (media {row['with_media']}/{row['appearances']})" if row else ""
        ways = []
        for (p, way), t in table.items():
            if p == platform:
                failed = ", ".join(f"{k}={v}" for k, v in sorted(t["failed"].items(), key=lambda kv: -kv[1]))
                ways.append(f"{way} {t['served']}/{t['tried']}" + (f" ({failed})" if failed else ""))
        lines.append(f"  ways in, {platform}{media}: " + "; ".join(ways))
    return lines


def failed_answer_lines(stages: dict) -> list[str]:
    """Stage 6's refusals, timeouts and invalid answers per member and property, and the claims lost to them."""
    from assets.rules.failed_answers import failed_answers_lines, failed_answers_report

    extras = stages.get("scored_claims", {}).get("extras", {})
    return [f"  {line}" for line in failed_answers_lines(failed_answers_report(extras))]


def integrity_lines(stages: dict) -> list[str]:
    """The release's order check, label reliability, shortcut audit and recurring share (its metadata's
    ``integrity_summary``); before a release, the scored claims' Krippendorff's alpha."""
    release = stages.get("release", {})
    if release.get("integrity_summary"):
        return [f"  {line}" for line in release["integrity_summary"].splitlines()]
    alphas = {k.removeprefix("alpha/"): v for k, v in stages.get("scored_claims", {}).get("extras", {}).items()
              if k.startswith("alpha/") and v is not None}
    return ["  Krippendorff's alpha (scored claims): " + ", ".join(f"{p} {v:.2f}" for p, v in alphas.items())] if alphas else []


def format_range(reports: list[dict]) -> str:
    """The funnel of every quarter with data, then one line naming the quarters without any."""
    if len(reports) == 1:
        return format_funnel(reports[0])
    blocks = [format_funnel(r) for r in reports if r["stages"] or r.get("audit")]
    empty = [r["quarter"] for r in reports if not r["stages"] and not r.get("audit")]
    if empty:
        blocks.append(f"Nothing materialized for: {', '.join(empty)}")
    return "\n\n".join(blocks)
