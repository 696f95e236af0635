"""SIGTERM ends `veritas run` in a model stage within seconds: no server left, no partial table, the cache resumes."""

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from dagster_project.config import load_config
from dagster_project.quarter_run import materialize_quarter
from tests.conftest import write_demo_config
from tests.ops_support import VENV_BIN, stop_group

MODEL_STAGES = ("normalized_claims", "scored_claims", "rectified_claims")


def _children(pid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose parent is ``pid``."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append((int(entry.name), cmdline))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}").exists() else ""
    return bool(stat) and stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


def test_sigterm_in_a_model_stage_ends_veritas_run_within_10s_and_the_rerun_resumes(tmp_path, monkeypatch):
    config_path = write_demo_config(tmp_path, max_candidate_media=2, max_media=2, evidence_tokens_embedded=150)
    config = load_config(config_path)
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster")}
    log = tmp_path / "run.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(VENV_BIN / "veritas"), "--config", config_path, "run", "--quarter", "2026Q2"],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        cache = Path(config["llm"]["cache_path"])
        deadline = time.monotonic() + 300
        while True:  # in the middle of a model stage: it has had answers from the embedded model
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "no model stage started"
            if cache.exists():
                try:
                    with sqlite3.connect(cache) as db:
                        rows = db.execute("SELECT stage FROM llm_ledger WHERE cache_hit=0 AND error IS NULL"
                                          " ORDER BY id").fetchall()
                except sqlite3.OperationalError:  # the file is there before the resource has made its tables
                    rows = []
                if len(rows) >= 2:
                    break
            time.sleep(0.1)
        stage = rows[-1][0]
        servers = [pid for pid, cmd in _children(proc.pid) if "llama_cpp.server" in cmd]
        assert len(servers) == 1
        sent, sent_wall = time.monotonic(), time.time()
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
        took = time.monotonic() - sent
    finally:
        stop_group(proc)
    text = log.read_text()
    print(f"SIGTERM in {stage}: veritas run exited {proc.returncode} after {took:.1f}s")
    assert took < 10 and proc.returncode == 128 + signal.SIGTERM, text[-3000:]
    assert "[veritas] run stopped by SIGTERM: 1 embedded model server(s) stopped" in text
    assert not _alive(servers[0])
    store = Path(config["store"]["root"])
    assert stage in MODEL_STAGES
    written_after = [p for p in (store / "tables").rglob("LATEST") if p.stat().st_mtime >= sent_wall]
    assert written_after == []  # no stage published a table version once the signal came

    with sqlite3.connect(cache) as db:
        answered = {k for (k,) in db.execute("SELECT cache_key FROM llm_ledger WHERE cache_hit=0 AND error IS NULL")}
        first_run = {r for (r,) in db.execute("SELECT DISTINCT run_id FROM llm_ledger")}
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    ok, reason = materialize_quarter(config_path, "2026Q2", until=stage)
    assert ok, reason
    with sqlite3.connect(cache) as db:
        rerun = db.execute(f"SELECT cache_key, cache_hit FROM llm_ledger WHERE run_id NOT IN"
                           f" ({','.join('?' * len(first_run))})", sorted(first_run)).fetchall()
    asked_again = {k for k, hit in rerun if not hit} & answered
    assert asked_again == set()  # no answered call is paid twice
    assert {k for k, hit in rerun if hit} >= answered  # every answer of the stopped run came from the cache
    assert (store / "tables" / stage / "2026Q2" / "LATEST").exists()
