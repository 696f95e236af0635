"""``veritas demo``: the offline demo snapshot's quarters end to end with the embedded model, then a SIMULATED
full-size quarter (``simulated_demo``: a quarter generated from real records, the simulated model panel on loopback,
its own config, data dir and Dagster instance), its leaderboard (``simulated_systems``, ``simulated_leaderboard``) and
the commands that open it (``open_commands``); each quarter's funnel and release are printed on the way."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dagster_project.quarter_run import (
    SIM_PANELS,
    failure_reason,
    materialize_quarter,
    run_stoppable,
)
from dagster_project.yield_report import collect_yields, format_funnel

DEMO_QUARTERS = ["2020Q2", "2026Q2"]
# The demo's simulated quarter (dagster_project/simulation): a feed and WARC made from real records, answered by the
# simulated model panel on loopback. Only ``veritas demo`` runs it, in <data_dir>/simulated with its own config.
SIM_QUARTER = "2025Q3"
SIM_REVIEWS, SIM_RELEASE = 300, 100
SIM_NOTE = "SIMULATED: generated from real records, rated by sim/... models"


def print_release(path: str) -> dict:
    """The release folder, its claim counts and the format check; returns its meta.json."""
    from assets.release.validation import validate_release

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
    from dagster_project.core.config_file import log_level
    from dagster_project.core.instance import project_instance
    from dagster_project.definitions import BOARD_ASSETS, build_resources

    config = load_config(config_path)
    resources = build_resources(config)
    result = dg.materialize(BOARD_ASSETS, resources={k: resources[k] for k in ("store", "board")},
                            instance=project_instance(config), raise_on_error=False,
                            run_config={"loggers": {"console": {"config": {
                                "log_level": log_level("WARNING")}}}})
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
    from dagster_project.simulation.run import agreement, latest_release, write_config
    from dagster_project.stage_settings import LeaderboardSettings

    folder = Path(folder)
    registry = registry or LeaderboardSettings.model_fields["systems_dir"].default
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
        SIM_PANELS.append(server)
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
            SIM_PANELS.remove(server)
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
    from dagster_project.core.config_file import load_config
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


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("demo", help="run the offline demo snapshot end to end with the embedded model, then a "
                                           "SIMULATED full-size quarter (simulated model panel on loopback, in "
                                           "<data_dir>/simulated)")
    p.set_defaults(handler=run)
    return []  # no option of its own, not even --config after it: ``veritas --config FILE demo``


def run(args: argparse.Namespace) -> int:
    return run_stoppable("demo", lambda: demo(args.config))
