"""A dead model fails a whole run within seconds, naming the member and the cause; stage 5 counts its fallbacks."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.quarter_run import materialize_quarter
from dagster_project.resources import local_llm
from dagster_project.simulation.openai_stub import serving
from dagster_project.yield_report import collect_yields
from tests.conftest import write_demo_config
from tests.ops_support import free_port, schema_responder


def _config(tmp_path: Path, members: list[dict] | None = None) -> str:
    path = write_demo_config(tmp_path, max_candidate_media=2, max_media=2, evidence_tokens_embedded=150)
    if members is not None:
        cfg = yaml.safe_load(Path(path).read_text())
        cfg["llm"] = {"members": members}
        Path(path).write_text(yaml.safe_dump(cfg))
    return path


def _latest(config_path: str, asset: str, quarter: str = "2026Q2") -> Path:
    return Path(load_config(config_path)["store"]["root"]) / "tables" / asset / quarter / "LATEST"


def _stacks() -> str:
    """Every thread's stack, for a run that hangs."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(f"--- {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
                     for ident, frame in sys._current_frames().items())


@pytest.fixture(autouse=True)
def _stub_key(monkeypatch):
    monkeypatch.setenv("VERITAS_TEST_STUB_KEY", "sk-test")


def test_members_on_a_port_where_nothing_listens_fail_the_run_within_30s(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    port = free_port()
    cfg = _config(tmp_path, [{"name": f"dead-{i}", "model": "openai/stub-model", "api_base": f"http://127.0.0.1:{port}/v1",
                              "api_key_env": "VERITAS_TEST_STUB_KEY"} for i in range(3)])
    assert materialize_quarter(cfg, "2026Q2", until="appearances")[0]
    t0 = time.monotonic()
    ok, reason = materialize_quarter(cfg, "2026Q2", until="scored_claims")
    took = time.monotonic() - t0
    print(f"dead port: the run failed {took:.1f}s after it started: {reason}")
    assert not ok and took < 30
    # the breaker names the member and its endpoint; when a stage's calls stop short of it (stage 5 drops a claim
    # whose media question failed, so it asks fewer), the stage's own check names the member and the refused connection
    # (any of the three: stage 5 spreads its media questions over the members)
    assert reason.startswith("normalized_claims: ModelUnavailable: ensemble member 'dead-0' (model openai/stub-model,"
                             f" endpoint http://127.0.0.1:{port}/v1) is unreachable: ConnectionRefusedError") or (
        reason.startswith("normalized_claims: ModelUnavailable: normalized_claims: none of its")
        and re.search(r"member 'dead-\d' \(model openai/stub-model\)", reason) and "Connection error" in reason), reason
    assert not _latest(cfg, "normalized_claims").exists()  # the failed stage wrote no table version
    assert _latest(cfg, "appearances").exists()


def test_killing_the_embedded_server_in_scored_claims_fails_the_run_within_30s(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    cfg = _config(tmp_path)  # the three embedded SmolLM2 members
    assert materialize_quarter(cfg, "2026Q2", until="normalized_claims")[0]
    db = sqlite3.connect(load_config(cfg)["llm"]["cache_path"])
    result: dict = {}
    runner = threading.Thread(target=lambda: result.update(r=materialize_quarter(cfg, "2026Q2", until="scored_claims")))
    runner.start()
    deadline = time.monotonic() + 180
    while not db.execute("SELECT COUNT(*) FROM llm_ledger WHERE stage='scored_claims' AND cache_hit=0").fetchone()[0]:
        assert runner.is_alive() and time.monotonic() < deadline, "scored_claims made no model call"
        time.sleep(0.1)
    (server,) = list(local_llm._LIVE)
    killed = time.monotonic()
    os.kill(server._proc.pid, signal.SIGKILL)
    runner.join(60)
    took = time.monotonic() - killed
    assert not runner.is_alive(), f"the run still goes on {took:.0f}s after the kill:\n{_stacks()}"
    ok, reason = result["r"]
    print(f"embedded server killed: the run failed {took:.1f}s later: {reason}")
    assert not ok and took < 30
    assert reason.startswith("scored_claims: ModelUnavailable: ensemble member 'smollm2-t")
    assert "(model local/smollm2, endpoint http://127.0.0.1:" in reason
    assert "the embedded model server (llama_cpp.server) killed by SIGKILL (exit 137)" in reason
    assert not _latest(cfg, "scored_claims").exists() and _latest(cfg, "normalized_claims").exists()
    assert not local_llm._LIVE


def test_stage_5_counts_each_fallback_to_the_fact_checkers_wording_and_warns(tmp_path, monkeypatch, capfd):
    """A model whose rewrite leaks the verdict: the claim keeps the fact-checker's text, counted by cause."""
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))

    def leaky(mode, body):
        status, content = schema_responder(mode, body)
        answer = json.loads(content)
        if "claim" in answer:
            answer["claim"] = "This post is false."
        return status, json.dumps(answer)

    with serving(leaky) as stub:
        cfg = _config(tmp_path, [{"name": "leaky", "model": "openai/stub-model", "api_base": stub.base("m"),
                                  "api_key_env": "VERITAS_TEST_STUB_KEY"}])
        assert materialize_quarter(cfg, "2026Q2", until="normalized_claims")[0]
    stage = collect_yields(cfg, "2026Q2")["stages"]["normalized_claims"]
    assert stage["rows_in"] == 1 and stage["rows_out"] == 1
    assert stage["extras"]["normalization/original"] == 1
    assert stage["extras"]["fallback/model_text:verdict_leak"] == 1
    assert "normalized_claims: 1 of 1 claims kept the fact-checker's wording" in capfd.readouterr().err


@pytest.mark.parametrize("load_conftest", [False, True])
def test_a_test_process_started_with_sigint_ignored_still_stops_on_sigterm_after_a_run(load_conftest):
    """A background job of a shell without job control starts with SIGINT ignored; Dagster maps SIGTERM to SIGINT's
    handler when a run on the main thread ends, so without conftest's stoppable_by_sigterm the test process (and the
    compute-log ``tail`` of its next run, which Dagster then waits 30 s for) ignored SIGTERM."""
    code = ("import signal\n" + ("import tests.conftest\n" if load_conftest else "") +
            "from dagster._utils.interrupts import capture_interrupts\n"
            "with capture_interrupts():\n    pass\n"
            "print(signal.getsignal(signal.SIGTERM) is signal.SIG_IGN)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=PROJECT_ROOT,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ("False" if load_conftest else "True")  # ours, then Dagster's own behaviour
