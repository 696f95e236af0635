"""Issue 34: a release names the code that built it. A dirty working tree is recorded as HEAD plus a dirty mark,
and only the demo's own configuration (the bundled snapshot) may publish without a known code version."""

import subprocess

from assets.release.provenance import code_version
from dagster_project.config import PROJECT_ROOT
from dagster_project.stage_settings import IngestionSettings, SourceSpec


def git(folder, *args):
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_dirty_checkout_is_recorded_as_head_with_a_dirty_mark(tmp_path, monkeypatch):
    git(tmp_path, "init", "-q")
    (tmp_path / "stage.py").write_text("x = 1\n")
    git(tmp_path, "add", "stage.py")
    git(tmp_path, "-c", "user.email=t@example.org", "-c", "user.name=t", "commit", "-qm", "one")
    head = git(tmp_path, "rev-parse", "HEAD")
    monkeypatch.setattr("assets.release.provenance.PROJECT_ROOT", tmp_path)
    assert code_version() == head
    (tmp_path / "notes.txt").write_text("untracked files are not the code")
    assert code_version() == head
    (tmp_path / "stage.py").write_text("x = 2\n")  # the release would come from code no commit holds
    assert code_version() == f"{head}-dirty"


def test_only_the_bundled_snapshots_config_is_a_demo(tmp_path):
    snapshot = SourceSpec(kind="datafeed", path=str(PROJECT_ROOT / "demo" / "snapshot" / "feed.json"))
    own = SourceSpec(kind="datafeed", path=str(tmp_path / "feed.json"))
    assert IngestionSettings(demo=True, sources=[snapshot]).demo_release()
    assert not IngestionSettings(demo=True, sources=[own]).demo_release()  # demo: true in another config
    assert not IngestionSettings(demo=True, sources=[snapshot, own]).demo_release()
    assert not IngestionSettings(demo=True).demo_release()
    assert not IngestionSettings(demo=False, sources=[snapshot]).demo_release()
