"""Issue 36 section 4: `veritas export --format hf` over a range of quarters writes one dataset that researchers load
offline with `datasets` (images as pictures, a split per quarter, a config per quarter) and with `mlcroissant`
(the quarter a field, no warning), from releases written by the release code itself (`write_release`)."""

import io
import json
import logging
import warnings
from pathlib import Path

import imageio_ffmpeg
import numpy as np
import polars as pl
import pytest
from PIL import Image

from assets.release.writing import write_release
from dagster_project.cli import main
from dagster_project.resources.media import MediaStore
from schemas.records import ReleaseClaim, ReleaseIntegrity, ReleaseMedium, ReleaseScore
from tests.conftest import write_demo_config

QUARTERS = ("2025Q3", "2025Q4", "2026Q1")
COLOURS = {"2025Q3": (200, 30, 30), "2025Q4": (30, 200, 30), "2026Q1": (30, 30, 200)}


def _jpeg(colour, size) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, colour).save(buf, "JPEG")
    return buf.getvalue()


def _pixels(path: Path) -> bytes:
    with Image.open(path) as im:
        return im.tobytes()


def _mp4(path: Path) -> None:
    """Half a second of 32x32 H.264, a real video file."""
    writer = imageio_ffmpeg.write_frames(str(path), (32, 32), fps=10, codec="libx264", macro_block_size=8,
                                         ffmpeg_log_level="error")
    writer.send(None)
    for i in range(5):
        writer.send(np.full((32, 32, 3), 40 * i, np.uint8).tobytes())
    writer.close()


def _release(folder: Path, quarter: str, media: MediaStore, extra: int) -> None:
    """A quarter's release through write_release: a claim with two images, one with a video, text-only claims
    (``extra`` more of them, so that the quarters' sizes differ)."""
    media_root = Path(media.root)
    (media_root / quarter).mkdir(parents=True)
    (media_root / f"{quarter}/a.jpg").write_bytes(_jpeg(COLOURS[quarter], (8, 6)))
    (media_root / f"{quarter}/b.jpg").write_bytes(_jpeg((255, 255, 255), (4, 4)))
    _mp4(media_root / f"{quarter}/c.mp4")
    score = ReleaseScore(score=-0.6, justification="scripted")
    images = [ReleaseMedium(type="image", id=i, file_path=f"images/{i}.jpg", authenticity=score, contextualization=score)
              for i in (1, 2)]
    video = ReleaseMedium(type="video", id=3, file_path="videos/3.mp4", contextualization=score)
    claims = [
        ReleaseClaim(id=1, text="<image:1> <image:2> A flood.", date=f"{quarter[:4]}-08-01", language="en",
                     review_url="https://factcheck.example/1", media=images, veracity=score,
                     integrity=ReleaseIntegrity(score=-0.6, decisive_property="veracity")),
        ReleaseClaim(id=2, text="<video:3> A speech.", date=None, language="de", review_url="https://factcheck.example/2",
                     media=[video], veracity=ReleaseScore(score=0.7),
                     integrity=ReleaseIntegrity(score=0.7, decisive_property="veracity")),
        *(ReleaseClaim(id=3 + k, text=f"Claim {k}.", date=None, language="en", review_url=f"https://f.example/{k}",
                       veracity=ReleaseScore(score=0.0), integrity=ReleaseIntegrity(score=0.0, decisive_property="veracity"))
          for k in range(extra)),
    ]
    files = [(1, "image", f"{quarter}/a.jpg"), (2, "image", f"{quarter}/b.jpg"), (3, "video", f"{quarter}/c.mp4")]
    write_release(folder, quarter, claims, files, media, {"quarter": quarter})


@pytest.fixture
def exported(tmp_path_factory):
    """Three quarters' releases published in a demo store, exported by `veritas export --from --to --format hf`."""
    tmp = tmp_path_factory.mktemp("export")
    config = write_demo_config(tmp)
    from dagster_project.config import load_config
    from dagster_project.definitions import build_resources

    store = build_resources(load_config(config))["store"]
    media = MediaStore(str(tmp / "media"))
    for n, quarter in enumerate(QUARTERS):
        staging = store.release_staging(quarter, f"v{n}")
        _release(staging, quarter, media, extra=n + 1)
        store.publish_release(quarter, staging)
    out = tmp / "hf"
    assert main(["--config", config, "export", "--from", QUARTERS[0], "--to", QUARTERS[-1], "--out", str(out),
                 "--format", "hf"]) == 0
    return out


def _offline(monkeypatch, tmp_path) -> str:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return str(tmp_path / "hf-cache")


def test_export_loads_as_one_dataset_with_pictures(exported, monkeypatch, tmp_path):
    import datasets
    from datasets import load_dataset

    cache = _offline(monkeypatch, tmp_path)
    dd = load_dataset(str(exported), cache_dir=cache)
    print(dd, dd[QUARTERS[0]].features, sep="\n")
    assert list(dd) == list(QUARTERS)
    assert {q: dd[q].num_rows for q in dd} == {"2025Q3": 3, "2025Q4": 4, "2026Q1": 5}
    features = dd["2025Q4"].features
    assert features["images"] == datasets.List(datasets.Image())
    assert features["videos"] == datasets.List(datasets.Value("string"))  # no video decoder installed: a path
    row = dd["2025Q4"][0]
    assert row["quarter"] == "2025Q4" and row["id"] == 1 and "media_json" not in row
    assert [im.size for im in row["images"]] == [(8, 6), (4, 4)]
    assert [im.tobytes() for im in row["images"]] == [_pixels(exported / f"2025Q4/images/{i}.jpg") for i in (1, 2)]
    assert [m["id"] for m in row["media"]] == [1, 2] and row["media"][0]["authenticity"] == -0.6
    video = dd["2025Q4"][1]["videos"]
    assert video == ["2025Q4/videos/3.mp4"] and (exported / video[0]).read_bytes()[4:8] == b"ftyp"
    expected = pl.read_parquet(exported / "2026Q1/claims.parquet")
    assert dd["2026Q1"]["text"] == expected["text"].to_list()
    # one config per quarter, the same files: each image is on disk once (beside the release's zip)
    one = load_dataset(str(exported), "2025Q3", cache_dir=cache)
    assert list(one) == ["2025Q3"]
    assert one["2025Q3"][0]["images"][0].tobytes() == _pixels(exported / "2025Q3/images/1.jpg") != _pixels(
        exported / "2025Q4/images/1.jpg")
    assert len(list(exported.rglob("*.jpg"))) == 2 * len(QUARTERS)
    card = (exported / "README.md").read_text()
    assert [line for line in card.splitlines() if line.startswith("- config_name")] == [
        "- config_name: default", *(f"- config_name: {q}" for q in QUARTERS)]
    assert "&id" not in card  # no YAML anchors: each config lists its files


def _no_warnings(load, caplog):
    """Run ``load`` and return its result; fail on any warning mlcroissant logs or records about the metadata.
    The deprecation warnings rdflib and pandas raise inside mlcroissant 1.1.1 (ConjunctiveGraph, reset_index's
    inplace) come from the library's own code, whatever the file, and are the only ones let through."""
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        result = load()
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    raised = [f"{w.category.__name__}: {w.message}" for w in caught
              if not (issubclass(w.category, DeprecationWarning)
                      and ("/rdflib/" in w.filename or "/mlcroissant/" in w.filename))]
    assert logged == [] and raised == []
    return result


def test_export_croissant_covers_every_quarter_without_warnings(exported, caplog):
    import mlcroissant as mlc

    meta = json.loads((exported / "croissant.json").read_text())
    assert meta["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    assert {d["@id"] for d in meta["distribution"]} >= {f"{q}/metadata.parquet" for q in QUARTERS}

    dataset = _no_warnings(lambda: mlc.Dataset(jsonld=exported / "croissant.json"), caplog)
    assert dataset.metadata.ctx.issues.errors == set() and dataset.metadata.ctx.issues.warnings == set()
    claims = _no_warnings(lambda: list(dataset.records("claims")), caplog)
    counts = {q: sum(r["claims/quarter"] == q.encode() for r in claims) for q in QUARTERS}
    print("mlcroissant claims per quarter:", counts)
    assert counts == {"2025Q3": 3, "2025Q4": 4, "2026Q1": 5}
    assert [(r["claims/quarter"], r["claims/id"]) for r in claims][:2] == [(b"2025Q3", 1), (b"2025Q3", 2)]
    media = _no_warnings(lambda: list(dataset.records("media")), caplog)
    assert sorted((m["media/quarter"].decode(), m["media/medium_id"], m["media/type"].decode()) for m in media) == [
        (q, i, "image" if i < 3 else "video") for q in QUARTERS for i in (1, 2, 3)]


@pytest.mark.parametrize("quarter", QUARTERS[:2])
def test_each_release_croissant_loads_without_warnings(exported, caplog, quarter):
    import mlcroissant as mlc

    dataset = _no_warnings(lambda: mlc.Dataset(jsonld=exported / quarter / "croissant.json"), caplog)
    records = _no_warnings(lambda: list(dataset.records("claims")), caplog)
    assert len(records) == json.loads((exported / quarter / "meta.json").read_text())["claim_counts"]["total"]


def test_export_force_keeps_the_earlier_croissant(exported, tmp_path):
    """--force sets the earlier card and Croissant file aside, as it does the quarter folders."""
    import argparse

    import mlcroissant as mlc

    from dagster_project.commands.export import run

    (exported / "croissant.json").write_text("earlier")
    config = str(exported.parent / "veritas.yaml")  # the fixture's demo config
    args = argparse.Namespace(config=config, quarter=["2025Q3"], first=None, last=None, out=str(exported),
                              format="hf", force=True)
    assert run(args) == 0
    assert [p.read_text() for p in exported.glob("croissant.json.replaced-*")] == ["earlier"]
    assert json.loads((exported / "croissant.json").read_text())["identifier"] == "veritas_2025Q3"
    # the earlier 2025Q3 folder, set aside, and the quarters not exported this time are not read
    claims = list(mlc.Dataset(jsonld=exported / "croissant.json").records("claims"))
    assert {r["claims/quarter"] for r in claims} == {b"2025Q3"} and len(claims) == 3


def test_an_older_release_without_the_recurring_columns_joins_the_dataset(tmp_path, monkeypatch):
    """A release written before claims.parquet had recurring_quarter/recurring_id exports beside a newer one: its
    split has those columns, empty (datasets refuses splits whose columns differ)."""
    from datasets import load_dataset

    from assets.release.card import export_hf

    media = MediaStore(str(tmp_path / "media"))
    releases = {q: tmp_path / q for q in QUARTERS[:2]}
    for n, (quarter, folder) in enumerate(releases.items()):
        folder.mkdir()
        _release(folder, quarter, media, extra=n)
    old = releases[QUARTERS[0]] / "claims.parquet"
    pl.read_parquet(old).drop("recurring_quarter", "recurring_id").write_parquet(old)
    out = export_hf(releases, tmp_path / "hf")
    dd = load_dataset(str(out), cache_dir=_offline(monkeypatch, tmp_path))
    assert dd[QUARTERS[0]]["recurring_id"] == [None, None] and dd[QUARTERS[1]].num_rows == 3


def test_export_asks_for_quarters_one_way(exported, capsys):
    config = str(exported.parent / "veritas.yaml")  # the fixture's demo config
    # --quarter repeated adds quarters (argparse's default would keep the last one only)
    out = exported.parent / "two"
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--quarter", "2026Q1", "--format", "hf",
                 "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["2025Q3", "2026Q1", "README.md", "croissant.json"]
    for argv in (["--quarter", "2025Q3", "--from", "2025Q3"], ["--to", "2025Q4"], []):
        assert main(["--config", config, "export", *argv, "--out", str(exported.parent / "x")]) == 2
        assert "give either --quarter Q [Q ...] or --from A [--to B]" in capsys.readouterr().err
