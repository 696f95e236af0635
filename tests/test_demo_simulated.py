"""Issue 13: ``veritas demo`` ends with a simulated quarter (dagster_project/simulation) so that a new user sees a
real-size release. Here the demo runs without its embedded-model quarters (they need the llama server: the
pipeline tests cover them), at a smaller size than the demo's (120 reviews, release 40) to keep the test short.
Issue 28: the demo ends on the simulated quarter's leaderboard (the registered systems and the simulated verifier
scored there) and on the commands that open it, its yields dashboard and its Dagster UI; they run here."""

import os

# imagehash's DCT under a loaded machine: one BLAS thread (set before numpy loads)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import shlex  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from dagster_project import quarter_run, yield_report  # noqa: E402
from dagster_project.commands import demo as demo_command  # noqa: E402
from dagster_project.config import PROJECT_ROOT  # noqa: E402
from tests.conftest import write_demo_config  # noqa: E402

STUB_QUARTER = "2026Q2"  # the demo snapshot's quarter with the real AFP review


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo as a user runs it, at a smaller simulated size, with one of its snapshot quarters: there the
    ensemble is a stub on loopback instead of the embedded model (a panel that knows no claim: every rating is
    "unknown"), so the demo's own quarter loop, funnel and release printing run in a test."""
    from dagster_project.simulation.panel import PanelConfig, PanelServer

    folder = tmp_path_factory.mktemp("demo")
    config = write_demo_config(folder)
    out = io.StringIO()
    home = os.environ.get("DAGSTER_HOME")
    stub = PanelServer({"claims": {}}, PanelConfig(latency_median_s=0.0, faults={}))
    with stub, pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        # the demo points DAGSTER_HOME at its own instance for its snapshot quarters: put it back after the test
        mp.setenv("DAGSTER_HOME", home) if home else mp.delenv("DAGSTER_HOME", raising=False)
        cfg = yaml.safe_load(Path(config).read_text())
        cfg["llm"]["members"] = stub.llm_members(api_key_env="DEMO_STUB_KEY")
        Path(config).write_text(yaml.safe_dump(cfg))
        mp.setenv("DEMO_STUB_KEY", "sk-stub")
        mp.setattr(demo_command, "DEMO_QUARTERS", [STUB_QUARTER])
        mp.setattr(demo_command, "SIM_REVIEWS", 120)
        mp.setattr(demo_command, "SIM_RELEASE", 40)
        rc = demo_command.demo(config)
        served = stub.panel.counters()["served"]
        home_after = os.environ.get("DAGSTER_HOME")
    print(out.getvalue())
    yield {"rc": rc, "out": out.getvalue(), "folder": folder, "config": config, "home_after": home_after,
           "cwd": Path.cwd(), "stub_served": served}  # the printed commands are relative to the demo's directory


def test_the_demos_snapshot_quarter_runs_through_its_own_loop(demo_run):
    """DEMO_QUARTERS: the snapshot quarter materialized through the demo, its funnel and its release printed; the stub
    rated every claim "unknown", so the split has no Intact/Compromised pair, and the demo says so."""
    assert demo_run["rc"] == 0, demo_run["out"]
    out = demo_run["out"]
    assert f"Stage yields for {STUB_QUARTER}" in out
    assert "NOTE: no Intact/Compromised pair was available this quarter" in out
    assert demo_run["stub_served"] > 0  # the model stages asked the stub, not the embedded model
    stages = yield_report.collect_yields(demo_run["config"], STUB_QUARTER)["stages"]
    # the AFP claim, rated "unknown", is the pool; with no pair to balance the Unknown share has no room: 0 released
    assert stages["scored_claims"]["rows_out"] == 1 and stages["release"]["drops"]["not_selected"] == 1
    release = Path(stages["release"]["path"])
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["demo"] is True and manifest["selection"]["allow_short_release"] is True
    assert "## Short release" in (release / "README.md").read_text()


def test_the_demo_shows_a_simulated_release_labelled_as_such(demo_run):
    assert demo_run["rc"] == 0, demo_run["out"]
    out = demo_run["out"]
    lines = out.strip().splitlines()
    assert "=== SIMULATED quarter 2025Q3" in out
    assert f"Stage yields for 2025Q3 ({demo_command.SIM_NOTE}):" in out
    sim = demo_run["folder"] / "data" / "simulated"  # <data_dir>/simulated
    simulated = lines[next(i for i, line in enumerate(lines) if line.startswith("=== SIMULATED quarter")):]
    release = next(line for line in simulated if line.startswith("  release: ")).removeprefix("  release: ")
    assert Path(release).is_relative_to(sim / "data" / "releases" / "2025Q3")
    assert (sim / "quarter" / "truth.json").exists() and (sim / "data" / "reports" / "2025Q3" / "evaluation.json").exists()
    assert "format check: passed" in out and "'total': 40" in out
    assert "agreement with the planted truth: 3-bin accuracy 100.0%" in out
    assert "  evaluation (" in out
    assert "shortcut audit (" in out  # the release's integrity summary, in one line
    finished = next(line for line in lines if line.startswith("[veritas] demo finished"))
    assert "SIMULATED quarter 2025Q3" in finished and lines.index(finished) == len(lines) - 5
    manifest = json.loads((Path(release) / "manifest.json").read_text())
    assert manifest["models"] and all(m["model"].startswith("openai/sim/") for m in manifest["models"])


def test_the_simulated_quarter_has_its_own_config_data_and_instance(demo_run):
    sim = demo_run["folder"] / "data" / "simulated"
    cfg = yaml.safe_load((sim / "veritas.yaml").read_text())
    assert cfg["data_dir"] == str(sim)
    assert (sim / "dagster").is_dir()  # its Dagster instance
    # the demo's own instance (its snapshot quarters), not the simulated quarter's, once that quarter is done
    assert demo_run["home_after"] == str(demo_run["folder"] / "data" / "dagster")
    # the demo's own config and instance know nothing of it
    assert yield_report.collect_yields(demo_run["config"], "2025Q3")["stages"] == {}
    assert not (demo_run["folder"] / "data" / "data" / "releases" / "2025Q3").exists()
    # the panel was on loopback only, and is gone: its port refuses connections
    assert quarter_run.SIM_PANELS == []
    for member in cfg["llm"]["members"]:
        url = urlsplit(member["api_base"])
        assert url.hostname == "127.0.0.1" and member["model"].startswith("openai/sim/")
        with pytest.raises(ConnectionRefusedError), socket.create_connection((url.hostname, url.port), timeout=2):
            pass


def test_a_failed_simulated_quarter_fails_the_demo_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo_command, "DEMO_QUARTERS", [])
    monkeypatch.setattr(demo_command, "simulated_demo", lambda folder, **kw: (False, "scored_claims: ModelUnavailable: x", {}))
    assert demo_command.demo(write_demo_config(tmp_path)) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "demo FAILED" in last and "quarter 2025Q3 (SIMULATED) failed in scored_claims: ModelUnavailable: x" in last


def test_a_simulated_quarter_that_raises_fails_the_demo_and_says_why(tmp_path, monkeypatch, capsys):
    def broken(folder, **kw):
        raise OSError("no space left on device")

    monkeypatch.setattr(demo_command, "DEMO_QUARTERS", [])
    monkeypatch.setattr(demo_command, "simulated_demo", broken)
    assert demo_command.demo(write_demo_config(tmp_path)) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("quarter 2025Q3 (SIMULATED) failed in OSError: no space left on device")



def _board_lines(out: str) -> tuple[str, dict[str, str]]:
    """The demo's last four lines: the simulated quarter's leaderboard, and the commands that open its page, its
    yields dashboard and its Dagster UI (each at the end of its line)."""
    lines = out.strip().splitlines()
    assert lines[-4].startswith("[veritas] leaderboard of the SIMULATED quarter 2025Q3: "), lines[-5:]
    commands = {}
    for line, (key, what) in zip(lines[-3:], demo_command.OPEN_LINES.items()):
        assert line.startswith(f"[veritas] {what}: "), (line, what)
        commands[key] = line.removeprefix(f"[veritas] {what}: ")
    return lines[-4], commands


def test_the_demo_ends_on_a_leaderboard_of_the_simulated_quarter(demo_run):
    assert demo_run["rc"] == 0, demo_run["out"]
    sim = demo_run["folder"] / "data" / "simulated"
    # the leaderboard asset ran in the simulated quarter's own store and instance
    report = json.loads((sim / "data" / "reports" / "leaderboard" / "leaderboard.json").read_text())
    board = report["board"]
    assert board["all_quarters"] == ["2025Q3"] and (sim / "data" / "reports" / "leaderboard" / "leaderboard.html").exists()
    ranked = [s for s in board["systems"] if s["rank"]]
    claims = sum(s["windows"]["all"]["n"] for s in ranked)
    assert ranked and claims > 0 and all(s["windows"]["all"]["n"] > 0 for s in ranked)
    assert [s["name"] for s in ranked] == [demo_command.SIM_SYSTEM]
    # every registered system is on the board; what the demo cannot predict stays unscored, never filled in
    registered = {p.stem for p in (PROJECT_ROOT / "systems").glob("*.yaml")}
    assert registered and {s["name"] for s in board["systems"]} == registered | {demo_command.SIM_SYSTEM}
    for s in board["systems"]:
        if s["name"] in registered:
            assert s["rank"] is None and s["windows"]["all"]["n"] == 0 and s["quarters"]["2025Q3"]["predicted"] == 0
    cfg = yaml.safe_load((sim / "veritas.yaml").read_text())
    assert cfg["stages"]["systems_dir"] == str(sim / "systems")
    import dagster as dg

    with dg.DagsterInstance.from_config(str(sim / "dagster")) as instance:
        assert instance.get_latest_materialization_event(dg.AssetKey("leaderboard")) is not None
    line, _ = _board_lines(demo_run["out"])
    assert f"{len(ranked)} of {len(board['systems'])} systems ranked over {claims} claims: 1. {demo_command.SIM_SYSTEM} MSE " in line
    for name in sorted(registered):
        assert f"{name} (needs ensemble member smollm2-t0, which the simulated quarter's sim/... ensemble does not have)" in line


def _run(command: str, cwd: Path, **env) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "VERITAS_CONFIG")}
    return subprocess.run(["bash", "-ec", command], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**clean, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", **env})


def test_the_printed_commands_open_the_leaderboard_and_the_dashboard(demo_run):
    assert demo_run["rc"] == 0, demo_run["out"]
    sim = demo_run["folder"] / "data" / "simulated"
    _, commands = _board_lines(demo_run["out"])
    board_cmd, yields_cmd, ui_cmd = commands["leaderboard"], commands["yields"], commands["ui"]
    assert " leaderboard --html " in board_cmd and " yields --quarter 2025Q3 --html " in yields_cmd
    # the leaderboard and the yields dashboard: offline, from the simulated folder alone (no DAGSTER_HOME, no key)
    board = _run(board_cmd, demo_run["cwd"])
    assert board.returncode == 0, board.stdout + board.stderr
    assert demo_command.SIM_SYSTEM in board.stdout and "smollm2-closed-book" in board.stdout
    page = Path(shlex.split(board_cmd)[-1])
    page = page if page.is_absolute() else demo_run["cwd"] / page
    assert page.is_relative_to(sim) and demo_command.SIM_SYSTEM in page.read_text()
    yields = _run(yields_cmd, demo_run["cwd"])
    assert yields.returncode == 0, yields.stdout + yields.stderr
    assert "Stage yields for 2025Q3" in yields.stdout and "[veritas] dashboard: " in yields.stdout
    dashboard = Path(shlex.split(yields_cmd)[-1])
    dashboard = dashboard if dashboard.is_absolute() else demo_run["cwd"] / dashboard
    assert dashboard.is_relative_to(sim) and "2025Q3" in dashboard.read_text()
    # the Dagster UI: the command's instance and config load the definitions and hold the demo's runs
    words = shlex.split(ui_cmd)
    env = dict(w.split("=", 1) for w in words[:2])
    assert set(env) == {"DAGSTER_HOME", "VERITAS_CONFIG"} and words[3:5] == ["dev", "-w"]
    assert Path(words[2]).name == "dagster" and (demo_run["cwd"] / words[2]).exists()
    assert (demo_run["cwd"] / words[5]).resolve() == PROJECT_ROOT / "workspace.yaml"
    probe = ("import dagster as dg; from dagster_project.definitions import defs; "
             "assert defs.resolve_asset_graph().has(dg.AssetKey('leaderboard')); "
             "i = dg.DagsterInstance.get(); "
             "assert i.get_latest_materialization_event(dg.AssetKey('leaderboard')) is not None; "
             "assert i.get_latest_materialization_event(dg.AssetKey('release')) is not None; print('ok')")
    ui = _run(f"{shlex.quote(sys.executable)} -c {shlex.quote(probe)}", PROJECT_ROOT,
              **{k: str((demo_run['cwd'] / v).resolve()) for k, v in env.items()})
    assert ui.returncode == 0 and ui.stdout.strip().endswith("ok"), ui.stdout + ui.stderr
