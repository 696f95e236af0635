"""``veritas``: thin wrappers over Dagster to run quarters, read the stage yields and export a release."""

import argparse
import gc
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
# The demo's simulated quarter (dagster_project/simulation): a feed and WARC made from real records, answered by the
# simulated model panel on loopback. Only ``veritas demo`` runs it, in <data_dir>/simulated with its own config.
SIM_QUARTER = "2025Q3"
SIM_REVIEWS, SIM_RELEASE = 300, 100
SIM_NOTE = "SIMULATED: generated from real records, rated by sim/... models"
_SIM_PANELS: list = []  # the panel servers running now (a signal stops them before the process exits)


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
    from dagster_project.partitions import to_key
    from dagster_project.quarters import partition_label

    config = load_config(config_path)
    label = partition_label(quarter)
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
            stages[name]["integrity_summary"] = meta.get("integrity_summary")
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


def format_funnel(report: dict, note: str = "") -> str:
    """The funnel of one quarter as text; ``note`` (e.g. ``SIM_NOTE``) goes into its heading."""
    from dagster_project.dashboard import quarter_summary

    lines = [f"Stage yields for {report['quarter']}{f' ({note})' if note else ''}:", f"  {'stage':<18}{'in':>7}{'out':>7}  drops"]
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
    lines += way_lines(report)
    lines += failed_answer_lines(report["stages"])
    lines += integrity_lines(report["stages"])
    for name, check in sorted(report.get("checks", {}).items()):
        if not check["passed"]:
            lines.append(f"  {check['severity']} {name}: {check['note']}")
    return "\n".join(lines)


def way_lines(report: dict) -> list[str]:
    """Stage 4, one line per platform: its media yield, then per way in served/tried and the failures by reason."""
    from dagster_project.dashboard import media_yield, way_table

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
    from assets.claims.failures import failed_answers_lines, failed_answers_report

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
    blocks = [format_funnel(r) for r in reports if r["stages"]]
    empty = [r["quarter"] for r in reports if not r["stages"]]
    if empty:
        blocks.append(f"Nothing materialized for: {', '.join(empty)}")
    return "\n\n".join(blocks)


def print_release(path: str) -> dict:
    """The release folder, its claim counts and the format check; returns its meta.json."""
    from assets.release.release import validate_release

    meta = json.loads((Path(path) / "meta.json").read_text())
    problems = validate_release(Path(path))
    print(f"  release: {path}")
    print(f"  claims: {meta['claim_counts']}  media: {meta['media_counts']}  "
          f"format check: {'passed' if not problems else problems}")
    return meta


class _environ:
    """Environment variables set for the length of a with block, then restored (the Dagster instance of the
    simulated quarter is its own: ``project_instance`` reads and sets ``DAGSTER_HOME``)."""

    def __init__(self, **values: str):
        self.values = values
        self.saved: dict = {}

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in self.values}
        os.environ.update(self.values)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


SIM_SYSTEM = "sim-closed-book"  # the simulated quarter's own verifier, as a leaderboard system


def simulated_systems(folder: Path, registry: Path, member: str) -> Path:
    """The leaderboard registry of the simulated quarter, ``folder``/systems: a copy of every registered system
    (``registry``, the project's systems/) and ``SIM_SYSTEM``, the closed-book verifier that its predictions stage
    runs on the panel member ``member``. A registered system whose member is not in the simulated ensemble has no
    predictions there and stays unranked (the board says so); nothing is predicted for it."""
    target = folder / "systems"
    target.mkdir(parents=True, exist_ok=True)
    for old in [*target.glob("*.yaml"), *target.glob("*.yml")]:
        old.unlink()
    for path in sorted([*registry.glob("*.yaml"), *registry.glob("*.yml")]) if registry.is_dir() else []:
        (target / path.name).write_text(f"# copied by `veritas demo` from {path}\n" + path.read_text(encoding="utf-8"),
                                        encoding="utf-8")
    (target / f"{SIM_SYSTEM}.yaml").write_text(
        "# written by `veritas demo`: the verifier the SIMULATED quarter's predictions stage runs (closed-book)\n"
        + yaml_dump({"kind": "verifier", "member": member, "mode": "closed_book", "knowledge_cutoff": "unknown",
                     "description": f"SIMULATED: the panel member {member} (sim/...), closed-book; the panel answers "
                                    "from the planted truth, so its score checks the plumbing, not a model"}),
        encoding="utf-8")
    return target


def yaml_dump(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


def simulated_leaderboard(config_path: str, quarter: str) -> dict:
    """Materializes the ``leaderboard`` asset in the simulated quarter's config and instance (``DAGSTER_HOME`` set by
    the caller) and sums it up: ``{"ok", "reason", "line", "ranked", "claims", "board"}``; ``line`` names each
    system left unranked and why (the member its predictions need is not in the simulated ensemble)."""
    import dagster as dg

    from assets.evaluation.leaderboard import REPORT_DIR, load_systems
    from dagster_project.config import load_config
    from dagster_project.definitions import BOARD_ASSETS, build_resources

    config = load_config(config_path)
    resources = build_resources(config)
    result = dg.materialize(BOARD_ASSETS, resources={k: resources[k] for k in ("store", "pipeline")},
                            instance=_instance(config), raise_on_error=False,
                            run_config={"loggers": {"console": {"config": {
                                "log_level": os.environ.get("VERITAS_LOG_LEVEL", "WARNING")}}}})
    if not result.success:
        return {"ok": False, "reason": failure_reason(result)}
    board = json.loads(resources["store"].get_bytes(f"{REPORT_DIR}/leaderboard.json"))["board"]
    members = {m["name"] for m in config["llm"]["members"]}
    systems = {s.name: s for s in load_systems(config["stages"]["systems_dir"])}
    ranked = [s for s in board["systems"] if s["rank"]]
    claims = sum(s["windows"]["all"]["n"] for s in ranked)
    shown = [f"{s['rank']}. {s['name']} MSE {s['windows']['all']['mse']:.4f}, 3-bin accuracy "
             f"{s['windows']['all']['acc3']:.1%} ({s['windows']['all']['n']} claims)" for s in ranked]
    unranked = []
    for s in board["systems"]:
        if s["rank"]:
            continue
        system = systems.get(s["name"])
        if system is not None and system.kind == "verifier" and system.member not in members:
            why = f"needs ensemble member {system.member}, which the simulated quarter's sim/... ensemble does not have"
        elif system is not None and system.kind == "predictions" and quarter not in system.predictions:
            why = f"lists no prediction file for {quarter}"
        else:
            why = "no predictions"
        unranked.append(f"{s['name']} ({why})")
    line = (f"leaderboard of the SIMULATED quarter {quarter}: {len(ranked)} of {len(board['systems'])} systems ranked "
            f"over {claims} claims: " + ("; ".join(shown) or "none")
            + (f"; not scored: {', '.join(unranked)}" if unranked else ""))
    return {"ok": bool(ranked), "reason": "" if ranked else f"leaderboard: no system was scored on {quarter}", "line": line,
            "ranked": len(ranked), "claims": claims, "board": board}


def _shell_path(path: Path) -> str:
    """A path for a printed command: relative to the working directory when inside it, shell-quoted."""
    import shlex

    path = Path(path).absolute()
    try:
        text = str(path.relative_to(Path.cwd()))
    except ValueError:
        text = str(path)
    return shlex.quote(text)


def open_commands(config_path: str, folder: Path, quarter: str) -> dict[str, str]:
    """The commands that open the simulated quarter's leaderboard page, yields dashboard and Dagster UI (offline;
    the UI with the simulated quarter's own instance and config)."""
    from dagster_project.config import PROJECT_ROOT

    bin_dir = Path(sys.executable).parent
    veritas = _shell_path(bin_dir / "veritas") if (bin_dir / "veritas").exists() else "veritas"
    dagster = _shell_path(bin_dir / "dagster") if (bin_dir / "dagster").exists() else "dagster"
    config = _shell_path(Path(config_path))
    return {
        "leaderboard": f"{veritas} --config {config} leaderboard --html {_shell_path(folder / 'leaderboard.html')}",
        "yields": f"{veritas} --config {config} yields --quarter {quarter} --html {_shell_path(folder / 'yields.html')}",
        "ui": f"DAGSTER_HOME={_shell_path(folder / 'dagster')} VERITAS_CONFIG={config} {dagster} dev "
              f"-w {_shell_path(PROJECT_ROOT / 'workspace.yaml')}",
    }


OPEN_LINES = {"leaderboard": f"{SIM_QUARTER} leaderboard page (writes it, then open the file)",
              "yields": f"{SIM_QUARTER} yields dashboard (writes it, then open the file)",
              "ui": f"{SIM_QUARTER} in the Dagster UI (http://127.0.0.1:3000)"}


def simulated_demo(folder: Path, quarter: str = SIM_QUARTER, reviews: int = SIM_REVIEWS,
                   release_size: int = SIM_RELEASE, registry: str | None = None) -> tuple[bool, str, dict]:
    """The demo's simulated quarter in ``folder`` (the demo's <data_dir>/simulated): a quarter generated from the
    committed real-record excerpt, the simulated panel on 127.0.0.1 (zero latency, no faults) as the ensemble, its own
    config, data dir and Dagster instance, every stage run; then its funnel, release and agreement with the planted
    truth are printed, each labelled SIMULATED; then the leaderboard asset scores the registered systems (``registry``,
    default: the project's systems/) and the simulated verifier on it, in the same config and instance
    (``simulated_systems``). Returns ``(ok, why it failed, summary)``; ``summary["leaderboard"]["line"]`` and
    ``summary["open"]`` are what the demo prints at its end."""
    from dagster_project.simulation.panel import PanelConfig, PanelServer
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records
    from dagster_project.config import PipelineResource
    from dagster_project.simulation.run import agreement, latest_release, write_config

    folder = Path(folder)
    registry = registry or PipelineResource.model_fields["systems_dir"].default
    started = time.monotonic()
    print(f"[veritas] SIMULATED quarter {quarter}: generating {reviews} reviews from real records in {folder}",
          flush=True)
    # the balanced label mix: a small quarter whose release still shows every label (the real mix is 4% Intact)
    truth = generate(folder / "quarter", QuarterConfig(quarter=quarter, reviews=reviews, video_share=0.03,
                                                       label_mix="balanced"), load_records(prefer_shared=False))
    summary: dict = {"quarter": quarter, "folder": str(folder), "generated_s": round(time.monotonic() - started, 1)}
    # zero latency and no faults: the demo shows the release; the faults' handling is tests/test_rehearsal_e2e.py's
    panel = PanelConfig(latency_median_s=0.0, retry_after_s=0.0, faults={})
    with _environ(VERITAS_SIM_KEY="sk-simulated", DAGSTER_HOME=str(folder / "dagster")), PanelServer(truth, panel) as server:
        _SIM_PANELS.append(server)
        try:
            members = server.llm_members()
            systems = simulated_systems(folder, Path(registry), members[0]["name"])
            config = write_config(folder, folder / "quarter", server, release_size=release_size, parallel_claims=4,
                                  data_dir=folder, stages={"systems_dir": str(systems)})
            ok, reason = materialize_quarter(config, quarter)
            summary["panel"] = {k: v for k, v in server.panel.counters().items() if k in ("served", "faults")}
            report = collect_yields(config, quarter)
            if ok:  # every registered system, and the simulated verifier, scored on the simulated release
                board = simulated_leaderboard(config, quarter)
                ok, reason = board["ok"], board["reason"]
                summary["leaderboard"] = {k: v for k, v in board.items() if k != "board"}
                summary["open"] = open_commands(config, folder, quarter)
        finally:
            _SIM_PANELS.remove(server)
    summary["took_s"] = round(time.monotonic() - started, 1)
    print()
    print(f"=== SIMULATED quarter {quarter} (not real data: the models are sim/..., the truth is planted) ===")
    print(format_funnel(report, SIM_NOTE))
    if report["stages"].get("release", {}).get("path"):
        release = latest_release(folder, quarter)
        meta = print_release(str(release))
        summary["claim_counts"] = meta["claim_counts"]
        found = agreement(release, truth)
        found.pop("wrong")
        summary["agreement"] = found
        print(f"  agreement with the planted truth: 3-bin accuracy {found['accuracy_3bin']:.1%}, "
              f"category accuracy {found['accuracy_category']:.1%}, MSE {found['mse']:.4f} ({found['claims']} claims)")
    evaluation = report["stages"].get("evaluation", {}).get("extras", {})
    path = folder / "data" / "reports" / quarter / "evaluation.json"
    if evaluation and path.exists():
        summary["evaluation"] = {k: evaluation.get(k) for k in ("integrity_acc3", "integrity_mse", "coverage")}
        systems = ", ".join(json.loads(path.read_text()).get("systems", {}))
        acc3, mse = evaluation.get("integrity_acc3"), evaluation.get("integrity_mse")
        print(f"  evaluation ({systems}): integrity 3-bin accuracy "
              f"{'n/a' if acc3 is None else f'{acc3:.1%}'}, MSE {'n/a' if mse is None else f'{mse:.4f}'}, "
              f"coverage {evaluation.get('coverage')}; report {path}")
    print(f"  SIMULATED quarter took {summary['took_s']:.0f}s (generation {summary['generated_s']:.0f}s)")
    return ok, reason, summary


def demo(config_path: str | None) -> int:
    from dagster_project.resources.llm import stop_requested
    from dagster_project.settings import load_config

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
            counts = print_release(path)["claim_counts"]
            if counts["intact"] == 0 and counts["compromised"] == 0:
                print("  NOTE: no Intact/Compromised pair was available this quarter, so the split has none; "
                      "nothing was faked to balance it (the embedded model's labels are noise).")
        print()
    closing: list[str] = []  # the simulated quarter's leaderboard, then the commands that open it: the last lines
    if not stop_requested():  # the simulated quarter needs no embedded model: it runs even after a failed quarter
        config = load_config(config_path)
        folder = Path(config["data_dir"]) / "simulated"
        try:
            ok, reason, summary = simulated_demo(folder, reviews=SIM_REVIEWS, release_size=SIM_RELEASE,
                                                 registry=config.get("stages", {}).get("systems_dir"))
            if summary.get("leaderboard", {}).get("line"):
                closing.append(f"[veritas] {summary['leaderboard']['line']}")
            for key, what in OPEN_LINES.items():  # one command a line, the line's end: copied as it stands
                if summary.get("open", {}).get(key):
                    closing.append(f"[veritas] {what}: {summary['open'][key]}")
        except Exception as err:  # noqa: BLE001 - e.g. the generator or the panel: the last line says why
            ok, reason = False, f"{type(err).__name__}: {err}"
        if not ok:
            failed.append((f"{SIM_QUARTER} (SIMULATED)", reason))
        print()
    took = time.monotonic() - started
    if failed:
        for line in closing:
            print(line, flush=True)
        print(f"[veritas] demo FAILED after {took:.0f}s: "
              + "; ".join(f"quarter {quarter} failed in {reason}" for quarter, reason in failed), flush=True)
        return 1
    print(f"[veritas] demo finished in {took:.0f}s. "
          "The embedded SmolLM2-135M model proves the plumbing only; its labels are meaningless. "
          f"The full-size release is the SIMULATED quarter {SIM_QUARTER}.")
    for line in closing:
        print(line)
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
        panels = list(_SIM_PANELS)
        for panel in panels:  # the demo's simulated panel: its port closes before the process exits
            panel.__exit__(None, None, None)
        worker.join(STOP_GRACE_S)
        print(f"[veritas] {command} stopped by {name}: {servers} embedded model server(s)"
              f"{' and the simulated model panel' if panels else ''} stopped, no stage output "
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


READ_ONLY = {"yields", "costs", "export", "evaluate", "averitec-score", "models", "plan", "web"}  # write no data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="veritas", description=__doc__)
    parser.add_argument("--config", help="config file (default: $VERITAS_CONFIG or veritas.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="run the offline demo snapshot end to end with the embedded model, then a SIMULATED "
                                      "full-size quarter (simulated model panel on loopback, in <data_dir>/simulated)")
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
        from dagster_project.settings import check_data_dir, load_config

        check_data_dir(load_config(args.config), writes=args.command not in READ_ONLY)
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


def entry() -> int:
    """The ``veritas`` program: ``main``, whose objects are then left for the exit to free (``gc.freeze``): Python's
    last collection at exit walked every object the Dagster code location made, 0.7 s after each command."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(entry())
