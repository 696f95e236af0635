"""Issue 13: ``veritas demo`` ends with a simulated quarter (dagster_project/simulation) so that a new user sees a
real-size release. Here the demo runs without its embedded-model quarters (they need the llama server: the
pipeline tests cover them), at a smaller size than the demo's (120 reviews, release 40) to keep the test short."""

import os

# imagehash's DCT under a loaded machine: one BLAS thread (set before numpy loads)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import contextlib  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
from pathlib import Path  # noqa: E402
from urllib.parse import urlsplit  # noqa: E402

import pytest  # noqa: E402
import yaml  # noqa: E402

from dagster_project import cli  # noqa: E402
from tests.conftest import write_demo_config  # noqa: E402


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    config = write_demo_config(folder)
    out = io.StringIO()
    home = os.environ.get("DAGSTER_HOME")
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        mp.setattr(cli, "DEMO_QUARTERS", [])
        mp.setattr(cli, "SIM_REVIEWS", 120)
        mp.setattr(cli, "SIM_RELEASE", 40)
        rc = cli.demo(config)
    print(out.getvalue())
    yield {"rc": rc, "out": out.getvalue(), "folder": folder, "config": config, "home_before": home}


def test_the_demo_shows_a_simulated_release_labelled_as_such(demo_run):
    assert demo_run["rc"] == 0, demo_run["out"]
    out = demo_run["out"]
    lines = out.strip().splitlines()
    assert "=== SIMULATED quarter 2025Q3" in out
    assert f"Stage yields for 2025Q3 ({cli.SIM_NOTE}):" in out
    sim = demo_run["folder"] / "data" / "simulated"  # <data_dir>/simulated
    release = next(line for line in lines if line.startswith("  release: ")).removeprefix("  release: ")
    assert Path(release).is_relative_to(sim / "data" / "releases" / "2025Q3")
    assert (sim / "quarter" / "truth.json").exists() and (sim / "data" / "reports" / "2025Q3" / "evaluation.json").exists()
    assert "format check: passed" in out and "'total': 40" in out
    assert "agreement with the planted truth: 3-bin accuracy 100.0%" in out
    assert "  evaluation (" in out
    assert lines[-1].startswith("[veritas] demo finished") and "SIMULATED quarter 2025Q3" in lines[-1]
    manifest = json.loads((Path(release) / "manifest.json").read_text())
    assert manifest["models"] and all(m["model"].startswith("openai/sim/") for m in manifest["models"])


def test_the_simulated_quarter_has_its_own_config_data_and_instance(demo_run):
    sim = demo_run["folder"] / "data" / "simulated"
    cfg = yaml.safe_load((sim / "veritas.yaml").read_text())
    assert cfg["data_dir"] == str(sim)
    assert (sim / "dagster").is_dir()  # its Dagster instance
    assert os.environ.get("DAGSTER_HOME") == demo_run["home_before"]  # restored after the simulated quarter
    # the demo's own config and instance know nothing of it
    assert cli.collect_yields(demo_run["config"], "2025Q3")["stages"] == {}
    assert not (demo_run["folder"] / "data" / "data" / "releases" / "2025Q3").exists()
    # the panel was on loopback only, and is gone: its port refuses connections
    assert cli._SIM_PANELS == []
    for member in cfg["llm"]["members"]:
        url = urlsplit(member["api_base"])
        assert url.hostname == "127.0.0.1" and member["model"].startswith("openai/sim/")
        with pytest.raises(ConnectionRefusedError), socket.create_connection((url.hostname, url.port), timeout=2):
            pass


def test_a_failed_simulated_quarter_fails_the_demo_and_says_why(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "DEMO_QUARTERS", [])
    monkeypatch.setattr(cli, "simulated_demo", lambda folder, **kw: (False, "scored_claims: ModelUnavailable: x", {}))
    assert cli.demo(write_demo_config(tmp_path)) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "demo FAILED" in last and "quarter 2025Q3 (SIMULATED) failed in scored_claims: ModelUnavailable: x" in last


def test_a_simulated_quarter_that_raises_fails_the_demo_and_says_why(tmp_path, monkeypatch, capsys):
    def broken(folder, **kw):
        raise OSError("no space left on device")

    monkeypatch.setattr(cli, "DEMO_QUARTERS", [])
    monkeypatch.setattr(cli, "simulated_demo", broken)
    assert cli.demo(write_demo_config(tmp_path)) == 1
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.endswith("quarter 2025Q3 (SIMULATED) failed in OSError: no space left on device")

