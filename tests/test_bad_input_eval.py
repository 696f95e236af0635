"""Issue 35, as a careless or hostile user: `veritas export` never deletes, overwrites or follows a pointer out of
the store; `veritas evaluate` reads predictions and releases strictly, and every refusal names the file, the line
or record and the field in one line, never a traceback."""

import json
from pathlib import Path

import pytest

from dagster_project.cli import main
from dagster_project.settings import load_config
from tests.conftest import write_demo_config


def release_claim(cid: int, integrity: float, media: list | None = None) -> dict:
    return {"id": cid, "text": f"claim {cid}", "date": "2025-08-01", "language": "en",
            "review_url": f"https://x.org/{cid}", "media": media or [], "veracity": None, "context_coverage": None,
            "integrity": {"score": integrity, "decisive_property": "veracity"}}


def write_release(folder: Path, quarter: str = "2025Q3", claims: list | None = None, meta: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    claims = [release_claim(c, s) for c, s in [(1, -1.0), (2, 0.5), (3, 1.0)]] if claims is None else claims
    (folder / "claims.json").write_text(json.dumps({"claims": claims}))
    meta = {"year": int(quarter[:4]), "quarter": int(quarter[5])} if meta is None else meta
    (folder / "meta.json").write_text(json.dumps(meta))
    return folder


# ------------------------------------------------------------------------------------------ export


@pytest.fixture
def store_config(tmp_path):
    """A config whose store holds one published 2025Q3 release (v1)."""
    from tests.test_release_card import make_release

    config = write_demo_config(tmp_path)
    root = Path(load_config(config)["store"]["root"])
    make_release(root / "releases/2025Q3/v1", "2025Q3")
    (root / "releases/2025Q3/LATEST").write_text("v1")
    return config, root


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_export_refuses_an_out_that_overlaps_the_store(store_config, capsys):
    config, root = store_config
    before = files_of(root)
    for out, where in ((root / "releases", "is inside"), (root, "is"), (root / "releases/2025Q3/v1/sub", "is inside"),
                       (root.parent, "contains")):
        assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(out)]) == 2
        assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--force",
                     "--format", "hf"]) == 2
        err = capsys.readouterr().err
        assert err.count(f"veritas: --out {out} {where} the store {root}") == 2 and "Traceback" not in err
    assert files_of(root) == before  # the release is still there, byte for byte


def test_export_refuses_a_folder_that_is_not_empty_and_never_deletes(store_config, tmp_path, capsys):
    config, root = store_config
    project = tmp_path / "project"
    project.mkdir()
    (project / "README.md").write_text("my project's readme\n")
    (project / "2025Q3").mkdir()
    (project / "2025Q3/notes.txt").write_text("mine")
    for fmt in ("veritas", "hf"):
        assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(project), "--format", fmt]) == 2
        err = capsys.readouterr().err
        assert f"--out {project} is not empty" in err and "--force" in err
    assert (project / "README.md").read_text() == "my project's readme\n"
    # --force writes, but keeps what it replaces beside it: nothing is lost.
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(project), "--format", "hf",
                 "--force"]) == 0
    kept_readme = next(project.glob("README.md.replaced-*"))
    kept_quarter = next(project.glob("2025Q3.replaced-*"))
    assert kept_readme.read_text() == "my project's readme\n" and (kept_quarter / "notes.txt").read_text() == "mine"
    assert "config_name" in (project / "README.md").read_text() and (project / "2025Q3/claims.json").is_file()
    # an empty folder, or a new one, needs no --force
    (tmp_path / "empty").mkdir()
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(tmp_path / "empty")]) == 0
    assert files_of(tmp_path / "empty/2025Q3") == files_of(root / "releases/2025Q3/v1")
    # a file as --out
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(project / "README.md")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_export_hf_never_overwrites_a_file_it_did_not_write(tmp_path):
    from assets.release.card import export_hf

    release = write_release(tmp_path / "rel")
    out = tmp_path / "hf"
    out.mkdir()
    (out / "README.md").write_text("someone else's")
    with pytest.raises(ValueError, match="README.md exist already"):
        export_hf({"2025Q3": release}, out)
    assert (out / "README.md").read_text() == "someone else's" and not (out / "2025Q3").exists()


@pytest.mark.parametrize("pointer", ["../../../elsewhere", "/tmp", "..", "", "v1/../../2025Q4/v1", "link"])
def test_export_follows_latest_only_inside_the_store(store_config, tmp_path, capsys, pointer):
    config, root = store_config
    elsewhere = write_release(root.parent / "elsewhere")
    (root / "releases/2025Q3/link").symlink_to(elsewhere, target_is_directory=True)
    (root / "releases/2025Q3/LATEST").write_text(pointer)
    out = tmp_path / "out"
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "LATEST names" in err and "not a version folder inside" in err and str(root / "releases/2025Q3") in err
    assert not out.exists() or not any(out.iterdir())


def test_store_follows_latest_only_inside_the_store(store_config):
    from dagster_project.resources.store import StoreResource

    config, root = store_config
    store = StoreResource(root=str(root))
    assert store.latest_release("2025Q3") == root / "releases/2025Q3/v1"
    (root / "releases/2025Q3/LATEST").write_text("../../..")
    with pytest.raises(ValueError, match="LATEST names '../../..'"):
        store.latest_release("2025Q3")
