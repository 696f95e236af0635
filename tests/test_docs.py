"""The handbook cannot drift from the code: every block marked runnable runs, and the site builds with --strict.

A fenced block whose previous line is exactly ``<!-- runnable -->`` is runnable (docs/architecture.md, "The
handbook"): ``sh``/``bash`` blocks run with ``bash -e``, ``python`` blocks with this Python, each in a fresh
temporary folder with ``.venv/bin`` first on PATH, the repository on PYTHONPATH and ``VERITAS_CONFIG`` at a copy of
the demo config whose data folder is inside that temporary folder (offline, empty).
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MARK = "<!-- runnable -->"
FENCE = re.compile(r"^(`{3,})(\w*)[^\n]*\n(.*?)^\1\s*$", re.MULTILINE | re.DOTALL)
RUNNERS = {"sh": ["bash", "-e"], "bash": ["bash", "-e"], "python": [sys.executable]}
TIMEOUT_S = 60  # a runnable block takes seconds; a slow one belongs in a plain block


def runnable_blocks() -> list[tuple[str, int, str, str]]:
    """(page, line, language, code) of every block marked runnable."""
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if before.strip() == MARK:
                out.append((page.relative_to(ROOT).as_posix(), text.count("\n", 0, m.start()) + 1, m.group(2), m.group(3)))
    return out


BLOCKS = runnable_blocks()


def test_the_handbook_has_runnable_blocks_and_each_has_a_runner():
    assert len(BLOCKS) >= 5
    assert not [(p, n, lang) for p, n, lang, _ in BLOCKS if lang not in RUNNERS]
    # a marker must sit right before a fence: one anywhere else marks nothing, silently
    for page in DOCS.rglob("*.md"):
        lines = page.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() == MARK:
                assert i + 1 < len(lines) and lines[i + 1].startswith("```"), f"{page}:{i + 1}: {MARK} not before a fence"


def demo_config(folder: Path) -> Path:
    """The demo config with its paths made absolute and its data folder inside ``folder``."""
    raw = yaml.safe_load((ROOT / "veritas.yaml").read_text())
    raw["data_dir"] = str(folder / ".veritas")
    for source in raw.get("sources") or []:
        if source.get("path") and "://" not in source["path"]:
            source["path"] = str(ROOT / source["path"])
    web = raw.setdefault("web", {})
    web["warc_paths"] = [str(ROOT / p) for p in web.get("warc_paths", [])]
    path = folder / "veritas.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.mark.parametrize("page,line,lang,code", BLOCKS, ids=[f"{p}:{n}" for p, n, _, _ in BLOCKS])
def test_a_runnable_block_runs(page, line, lang, code, tmp_path):
    env = {**os.environ,
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])),
           "VERITAS_CONFIG": str(demo_config(tmp_path)),
           "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true", "GX_ANALYTICS_ENABLED": "false"}
    env.pop("DAGSTER_HOME", None)
    script = tmp_path / ("block.py" if lang == "python" else "block.sh")
    script.write_text(code)
    proc = subprocess.run([*RUNNERS[lang], str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    assert proc.returncode == 0, f"{page}:{line} ({lang}) exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs is not installed (it is in requirements.lock: make install)")
def test_the_site_builds_strictly(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    cli = (site / "reference" / "cli" / "index.html").read_text()
    assert "veritas backfill" in cli and "--retry" in cli  # generated from the parser
    config = (site / "reference" / "configuration" / "index.html").read_text()
    assert "release_size" in config and "parallel_claims" in config and "endpoint_url" in config
    assert (site / "evaluation_example.png").exists() and (site / "img" / "leaderboard.png").exists()


def test_the_readme_is_short_and_its_links_resolve():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in target:
            assert (ROOT / target).exists(), target
    assert "make test" in (ROOT / ".ci" / "run").read_text() and "make test" in text
