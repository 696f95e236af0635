"""Issue 28: the handbook's pictures are rendered by tests, so they are real and current.

Here: the Dagster asset graph. ``dg dev`` serves the project as ``make dev`` does (``[tool.dg]`` in pyproject.toml;
issue 47) on 127.0.0.1 on a free port, with a fresh ``DAGSTER_HOME`` (telemetry off) and the demo config with its data
folder in a temporary folder; headless Chromium takes a screenshot of the global asset lineage page
into ``build/test-artifacts/asset-graph/`` (or ``$VERITAS_TEST_ARTIFACTS``). The yields dashboard, the
leaderboard page and the audit's labelling page are taken by tests/test_dashboard.py, tests/test_leaderboard.py and
tests/test_audit_label_studio.py. ``docs/hooks.py`` copies them over the site's copies of ``docs/img/`` when it
builds after a test run.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from dagster_project.config import PROJECT_ROOT
from tests.conftest import write_demo_config

CHROMIUM = shutil.which("chromium")
VENV = Path(sys.executable).parent.parent
DG = VENV / "bin" / "dg"
GRAPH_PATH = "/asset-groups"  # Dagster 1.13's global asset lineage (every asset of every code location)
# its groups start collapsed; `expanded=` opens them (ids `global@global:<group>`, the UI's own query parameter)
STARTUP_S = 240  # the code server imports dagster, polars and litellm: a minute or more on a busy 2-core machine
WINDOW = (2000, 800)


def artifacts(name: str) -> Path:
    folder = Path(os.environ.get("VERITAS_TEST_ARTIFACTS") or PROJECT_ROOT / "build" / "test-artifacts") / name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def asset_nodes(base: str) -> dict[str, str]:
    """Asset key -> group, as the webserver's GraphQL API lists them (empty while the code location is loading)."""
    body = json.dumps({"query": "{ assetNodes { assetKey { path } groupName } }"}).encode()
    request = urllib.request.Request(f"{base}/graphql", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        nodes = json.loads(response.read())["data"]["assetNodes"]
    return {"/".join(n["assetKey"]["path"]): n["groupName"] for n in nodes}


@pytest.fixture(scope="module")
def webserver(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ui")
    home = folder / "dagster_home"
    home.mkdir()
    # telemetry off as `make dev` writes it; no "join the community" dialog over the graph
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\nnux:\n  enabled: false\n")
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(home), "VERITAS_CONFIG": write_demo_config(folder),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "GX_ANALYTICS_ENABLED": "false",
           "DAGSTER_DISABLE_TELEMETRY": "1", "VIRTUAL_ENV": str(VENV), "PATH": f"{VENV / 'bin'}:{os.environ['PATH']}"}
    log = open(folder / "webserver.log", "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([str(DG), "dev", "--host", "127.0.0.1", "--port", str(port)], cwd=PROJECT_ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)  # its own process group: webserver, daemon and code server go with it
    base = f"http://127.0.0.1:{port}"
    deadline, keys, error = time.monotonic() + STARTUP_S, {}, None
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                keys = asset_nodes(base)
                if keys:
                    break
            except (OSError, ValueError, KeyError, TypeError) as err:  # not listening yet, or the location loading
                error = err
            time.sleep(2)
        assert keys, (f"dg dev listed no asset within {STARTUP_S}s (exit {proc.poll()}, last error "
                      f"{error!r}):\n{(folder / 'webserver.log').read_text()[-4000:]}")
        yield {"base": base, "keys": keys, "folder": folder}
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(30)
        except ProcessLookupError:
            pass
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


def test_the_webserver_serves_the_asset_graph(webserver):
    for key in ("reviews", "scored_claims", "release", "predictions", "evaluation", "leaderboard"):
        assert key in webserver["keys"]
    with urllib.request.urlopen(webserver["base"] + GRAPH_PATH, timeout=30) as response:
        assert response.status == 200 and b"<html" in response.read().lower()


def test_workspace_yaml_still_loads_the_code_location_for_dagster_dev(tmp_path):
    """``dagster dev -w workspace.yaml`` serves the same code location as ``dg dev``: the workspace loads and every
    definition validates (``dagster definitions validate``, what the webserver's code server runs)."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "VERITAS_CONFIG": write_demo_config(tmp_path),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "DAGSTER_DISABLE_TELEMETRY": "1"}
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    done = subprocess.run([str(VENV / "bin" / "dagster"), "definitions", "validate", "-w", "workspace.yaml"],
                          cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=STARTUP_S)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "veritas" in done.stdout + done.stderr


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (`chromium` not on PATH); "
                    "the webserver is checked by test_the_webserver_serves_the_asset_graph")
def test_chromium_screenshots_the_asset_graph(webserver, tmp_path):
    from PIL import Image

    shot = tmp_path / "asset-graph.png"
    groups = ",".join(f"global@global:{g}" for g in sorted(set(webserver["keys"].values())))
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=30000",
         f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={shot}",
         f"{webserver['base']}{GRAPH_PATH}?expanded={urllib.parse.quote(groups, safe=',:@')}"],
        check=True, timeout=120, capture_output=True,
    )
    with Image.open(shot) as image:
        assert image.size == WINDOW
        rgb = image.convert("RGB")
        colors = rgb.getcolors(maxcolors=WINDOW[0] * WINDOW[1])
    # not blank: besides the background, many pixels of other colours (nodes, edges, names, the sidebar)
    background = max(colors)[1]
    drawn = sum(n for n, c in colors if sum(abs(a - b) for a, b in zip(c, background)) > 48)
    assert drawn > 0.03 * WINDOW[0] * WINDOW[1], f"{drawn} non-background pixels: a blank or loading page"
    assert len(colors) > 200  # text, icons and node colours, not a spinner on a plain page
    target = artifacts("asset-graph")
    shutil.copy(shot, target / "asset-graph.png")
    assert (target / "asset-graph.png").stat().st_size == shot.stat().st_size


def test_the_docs_hook_puts_fresh_screenshots_over_the_sites_copies(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("veritas_docs_hooks", PROJECT_ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    png = b"\x89PNG\r\n\x1a\n" + b"fresh"
    made = tmp_path / "artifacts"
    for _target, (source, _test) in hooks.SCREENSHOTS.items():
        (made / source).parent.mkdir(parents=True, exist_ok=True)
    (made / "dashboard" / "yields.png").write_bytes(png)
    (made / "leaderboard" / "leaderboard.png").write_bytes(b"not a png")  # a broken artifact is not copied
    site = tmp_path / "site"
    (site / "img").mkdir(parents=True)
    (site / "img" / "leaderboard.png").write_bytes(b"committed")
    assert hooks.copy_screenshots(site, made) == ["img/dashboard.png"]
    assert (site / "img" / "dashboard.png").read_bytes() == png
    assert (site / "img" / "leaderboard.png").read_bytes() == b"committed"
    # every committed copy exists, and each page that shows one points at docs/img/
    for target in hooks.SCREENSHOTS:
        assert (PROJECT_ROOT / "docs" / target).is_file(), target
    pages = {p: p.read_text() for p in (PROJECT_ROOT / "docs").rglob("*.md")}
    for name in ("asset-graph.png", "dashboard.png", "leaderboard.png", "audit-labelling.png"):
        shown = [p for p, text in pages.items() if f"img/{name})" in text]
        assert shown, f"no page shows img/{name}"
    assert not (PROJECT_ROOT / "docs" / "leaderboard.png").exists()
