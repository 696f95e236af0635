"""Croissant metadata, the dataset card and the Hugging Face export of a release, all read back offline by the
libraries researchers use (mlcroissant, huggingface_hub, datasets)."""

import io
import json
import os
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from assets.release.card import (
    croissant,
    export_hf,
    media_frame,
    write_release_card,
    zip_name,
)
from assets.release.writing import release_frame, write_zip
from schemas.records import ReleaseClaim, ReleaseIntegrity, ReleaseMedium, ReleaseScore

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"


def _claims(quarter: str) -> list[ReleaseClaim]:
    year = quarter[:4]
    photo = ReleaseMedium(type="image", id=1, file_path="images/1.jpg",
                          authenticity=ReleaseScore(score=0.8, justification="no edit traces"),
                          contextualization=ReleaseScore(score=-0.9, justification="taken in 2015, elsewhere"))
    return [
        ReleaseClaim(id=1, text="<image:1> Floods in the city centre this week.", date=f"{year}-02-03", language="en",
                     review_url="https://factcheck.example/floods", media=[photo],
                     veracity=ReleaseScore(score=-0.6), context_coverage=ReleaseScore(score=0.2),
                     integrity=ReleaseIntegrity(score=-0.9, decisive_property="contextualization")),
        ReleaseClaim(id=2, text="Der Minister kündigte eine Steuersenkung an.", date=f"{year}-02-10", language="de",
                     review_url="https://faktencheck.example/steuer", veracity=ReleaseScore(score=0.7),
                     context_coverage=ReleaseScore(score=0.5),
                     integrity=ReleaseIntegrity(score=0.5, decisive_property="context_coverage")),
        ReleaseClaim(id=3, text="Vaccine X was approved in March.", date=None, language="en",
                     review_url="https://factcheck.example/vaccine", veracity=ReleaseScore(score=0.1),
                     context_coverage=ReleaseScore(score=0.0),
                     integrity=ReleaseIntegrity(score=0.0, decisive_property="context_coverage")),
    ]


def make_release(folder: Path, quarter: str) -> Path:
    """A release folder as write_release lays it out (meta.json, claims.json/.parquet, images/, videos/, zip)."""
    claims = _claims(quarter)
    (folder / "images").mkdir(parents=True)
    (folder / "videos").mkdir()
    buf = io.BytesIO()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(buf, "JPEG")
    (folder / "images/1.jpg").write_bytes(buf.getvalue())
    meta = {"year": int(quarter[:4]), "quarter": int(quarter[5]),
            "claim_counts": {"intact": 1, "nei": 1, "compromised": 1, "total": 3},
            "media_counts": {"images": 1, "videos": 0}}
    (folder / "meta.json").write_text(json.dumps(meta))
    (folder / "claims.json").write_text(json.dumps({"claims": [c.model_dump() for c in claims]}))
    release_frame(claims).write_parquet(folder / "claims.parquet")
    write_zip(folder, zip_name(quarter))
    write_release_card(folder, quarter, "v20250401T000000000000-abcdef12")
    return folder


def test_media_table():
    frame = media_frame([c.model_dump() for c in _claims("2025Q1")])
    assert frame.to_dicts() == [{"claim_id": 1, "medium_id": 1, "type": "image", "file_path": "images/1.jpg",
                                 "authenticity": 0.8, "contextualization": -0.9}]


def test_croissant_validates_and_mlcroissant_loads_the_claims(tmp_path):
    import mlcroissant as mlc

    folder = make_release(tmp_path / "rel", "2025Q1")
    meta = json.loads((folder / "croissant.json").read_text())
    assert meta["conformsTo"] == "http://mlcommons.org/croissant/1.0"
    files = {d["@id"]: d for d in meta["distribution"]}
    import hashlib
    for name in ("claims.parquet", "media.parquet", "claims.json", "meta.json", "veritas_2025_q1.zip"):
        assert files[name]["sha256"] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert files["images"]["containedIn"] == {"@id": "veritas_2025_q1.zip"}
    assert [r["@id"] for r in meta["recordSet"]] == ["claims", "media"]

    dataset = mlc.Dataset(jsonld=folder / "croissant.json")  # raises mlc.ValidationError on any error
    assert dataset.metadata.ctx.issues.errors == set()
    records = list(dataset.records("claims"))
    expected = pl.read_parquet(folder / "claims.parquet")
    assert [r["claims/id"] for r in records] == [1, 2, 3]
    assert [r["claims/text"].decode() for r in records] == expected["text"].to_list()
    assert [r["claims/label"].decode() for r in records] == ["compromised", "intact", "unknown"]
    assert [r["claims/integrity"] for r in records] == [-0.9, 0.5, 0.0]
    media = list(dataset.records("media"))
    assert [(m["media/claim_id"], m["media/file_path"].decode()) for m in media] == [(1, "images/1.jpg")]


def test_croissant_checksum_covers_the_media(tmp_path):
    folder = make_release(tmp_path / "rel", "2025Q1")
    before = croissant(folder, "2025Q1")
    (folder / "images/1.jpg").write_bytes(b"\xff\xd8\xff" + b"0" * 20)
    write_zip(folder, "veritas_2025_q1.zip")
    after = croissant(folder, "2025Q1")
    sums = [{d["@id"]: d.get("sha256") for d in m["distribution"]} for m in (before, after)]
    assert sums[0]["veritas_2025_q1.zip"] != sums[1]["veritas_2025_q1.zip"]
    assert sums[0]["claims.parquet"] == sums[1]["claims.parquet"]


def test_dataset_card_is_read_by_huggingface_hub(tmp_path):
    from huggingface_hub import DatasetCard

    folder = make_release(tmp_path / "rel", "2025Q1")
    card = DatasetCard.load(folder / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "cc-by-nc-4.0"
    assert data["language"] == ["de", "en"]
    assert data["task_categories"] == ["text-classification", "image-classification"]
    assert [c["config_name"] for c in data["configs"]] == ["default", "2025Q1"]
    assert data["configs"][1]["data_files"] == [{"split": "2025Q1", "path": "claims.parquet"}]
    assert "| 2025Q1 | 3 | 1 | 1 | 1 | 1 | 0 |" in card.text
    assert "`compromised`: integrity score below -1/3" in card.text


def test_export_hf_loads_with_datasets_offline(tmp_path):
    from datasets import load_dataset

    releases = {q: make_release(tmp_path / q, q) for q in ("2025Q1", "2025Q2")}
    out = export_hf(releases, tmp_path / "hf")
    assert (out / "2025Q1/croissant.json").exists() and (out / "2025Q2/images/1.jpg").exists()
    cache = str(tmp_path / "cache")
    # From the card's configs: the default config has one split per quarter, each quarter is a config too.
    dd = load_dataset(str(out), cache_dir=cache)
    assert sorted(dd) == ["2025Q1", "2025Q2"]
    assert dd["2025Q2"]["text"] == pl.read_parquet(releases["2025Q2"] / "claims.parquet")["text"].to_list()
    assert dd["2025Q1"].num_rows == 3 and dd["2025Q1"]["date"][0] == "2025-02-03"
    assert list(load_dataset(str(out), "2025Q2", cache_dir=cache)) == ["2025Q2"]
    # Plain parquet loading, a split per quarter.
    plain = load_dataset("parquet", data_files={q: str(out / q / "claims.parquet") for q in releases}, cache_dir=cache)
    assert {k: v.num_rows for k, v in plain.items()} == {"2025Q1": 3, "2025Q2": 3}
    card = (out / "README.md").read_text()
    assert "config_name: default" in card and "- 2025Q2/metadata.parquet" in card


def test_export_command_hf(tmp_path, capsys):
    """`veritas export --format hf` over the local store: the latest release of each quarter, one split each."""
    from dagster_project.cli import main
    from dagster_project.config import load_config
    from dagster_project.definitions import build_resources
    from tests.conftest import write_demo_config

    config = write_demo_config(tmp_path)
    store = build_resources(load_config(config))["store"]
    for quarter in ("2025Q1", "2025Q2"):
        store.publish_release(quarter, make_release(store.release_staging(quarter, f"v-{quarter}"), quarter))
    out = tmp_path / "out"
    assert main(["--config", config, "export", "--quarter", "2025Q1", "2025Q2", "--out", str(out), "--format", "hf"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert (out / "README.md").exists() and (out / "2025Q2/claims.parquet").exists()
    assert main(["--config", config, "export", "--quarter", "2025Q1", "--out", str(tmp_path / "plain")]) == 0
    assert (tmp_path / "plain/2025Q1/croissant.json").exists() and not (tmp_path / "plain/README.md").exists()
