"""Issue 49, inputs apart from answers: `veritas export --inputs-only` gives a system under test what it may read (each
claim's id, text, date, language and media) and nothing a label can be read from; a systems file says which file its
system was given, and the evaluation docs say why `review_url` must not be read."""

import io
import json
import shutil
from pathlib import Path

import pytest
import yaml
from PIL import Image

from assets.evaluation.leaderboard import load_systems, read_system
from assets.release.writing import write_release
from dagster_project.cli import main
from dagster_project.commands.export import INPUT_FIELDS, INPUT_MEDIA_FIELDS
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from schemas.records import ReleaseClaim, ReleaseIntegrity, ReleaseMedium, ReleaseScore
from tests.conftest import write_demo_config
from tests.test_export_dataset import _mp4

QUARTERS = ("2025Q3", "2025Q4")
# words of the answers: none may appear in the inputs (the claims' texts below are chosen without them)
ANSWERS = ("review_url", "factcheck.example", "score", "justification", "rating", "label", "integrity", "veracity",
           "context_coverage", "authenticity", "contextualization", "decisive", "intact", "compromised", "recurring",
           "injection", "THE-JUSTIFICATION")


def _jpeg(colour) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (8, 6), colour).save(buf, "JPEG")
    return buf.getvalue()


def release(store: StoreResource, media: MediaStore, quarter: str) -> Path:
    """A release through write_release: claims with two images, with a video, text only; every score with a
    justification, a review_url on each claim, a recurring claim and an injection flag (in claims.parquet and the
    manifest)."""
    root = Path(media.root) / quarter
    root.mkdir(parents=True)
    (root / "a.jpg").write_bytes(_jpeg((200, 30, 30)))
    (root / "b.jpg").write_bytes(_jpeg((30, 30, 200)))
    _mp4(root / "c.mp4")
    def score(x):
        return ReleaseScore(score=x, justification="THE-JUSTIFICATION")
    images = [ReleaseMedium(type="image", id=i, file_path=f"images/{i}.jpg", authenticity=score(1.0),
                            contextualization=score(-0.67)) for i in (1, 2)]
    video = ReleaseMedium(type="video", id=3, file_path="videos/3.mp4", contextualization=score(0.67))
    claims = [
        ReleaseClaim(id=1, text="<image:1> <image:2> A flood in the city centre.", date=f"{quarter[:4]}-08-01",
                     language="en", review_url="https://factcheck.example/1", media=images, veracity=score(-0.67),
                     integrity=ReleaseIntegrity(score=-0.67, decisive_property="contextualization")),
        ReleaseClaim(id=2, text="<video:3> Eine Rede im Parlament.", date=None, language="de",
                     review_url="https://factcheck.example/2", media=[video], veracity=score(0.67),
                     context_coverage=score(0.67), integrity=ReleaseIntegrity(score=0.67, decisive_property="veracity")),
        ReleaseClaim(id=3, text="The bridge opened in March.", date=f"{quarter[:4]}-07-15", language="en",
                     review_url="https://factcheck.example/3", veracity=score(0.0),
                     integrity=ReleaseIntegrity(score=0.0, decisive_property="veracity")),
    ]
    files = [(1, "image", f"{quarter}/a.jpg"), (2, "image", f"{quarter}/b.jpg"), (3, "video", f"{quarter}/c.mp4")]
    staging = store.release_staging(quarter, "v1")
    write_release(staging, quarter, claims, files, media, {"quarter": quarter}, injection_flags=[["ignore"], [], []],
                  recurring={3: {"quarter": "2025Q2", "id": 9}})
    folder = store.publish_release(quarter, staging)
    (folder.parent / "v1.audit.json").write_text('{"disputed": [{"claim_id": 1, "release_label": "compromised"}]}')
    return folder


@pytest.fixture
def published(tmp_path):
    config = write_demo_config(tmp_path)
    store = StoreResource(**load_config(config)["store"])
    media = MediaStore(str(tmp_path / "media"))
    return config, {q: release(store, media, q) for q in QUARTERS}


def files_in(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()}


def test_the_inputs_only_export_holds_no_field_a_label_can_be_read_from(published, tmp_path, capsys):
    config, releases = published
    out = tmp_path / "inputs"
    assert main(["--config", config, "export", "--quarter", *QUARTERS, "--out", str(out), "--inputs-only"]) == 0
    assert capsys.readouterr().out.split() == [str(out / q) for q in QUARTERS]
    assert sorted(p.name for p in out.iterdir()) == list(QUARTERS)  # nothing beside: the audit names labels
    for q, folder in releases.items():
        assert files_in(out / q) == {"inputs.json", "images/1.jpg", "images/2.jpg", "videos/3.mp4"}
        text = (out / q / "inputs.json").read_text()
        inputs = json.loads(text)
        assert set(inputs) == {"quarter", "release_version", "claims"} and (inputs["quarter"], inputs["release_version"]) == (q, "v1")
        for claim in inputs["claims"]:
            assert set(claim) == {"id", "text", "date", "language", "media"} == set(INPUT_FIELDS)
            assert all(set(m) == {"id", "type", "file_path"} == set(INPUT_MEDIA_FIELDS) for m in claim["media"])
        for word in ANSWERS:
            assert word not in text, word
        # every claim and medium of the release, with what a system may read of it, and the media's bytes
        released = json.loads((folder / "claims.json").read_text())["claims"]
        assert inputs["claims"] == [{"id": c["id"], "text": c["text"], "date": c["date"], "language": c["language"],
                                     "media": [{"id": m["id"], "type": m["type"], "file_path": m["file_path"]}
                                               for m in c["media"]]} for c in sorted(released, key=lambda c: c["id"])]
        for m in (m for c in released for m in c["media"]):
            assert (out / q / m["file_path"]).read_bytes() == (folder / m["file_path"]).read_bytes()


def test_the_inputs_only_export_reads_the_store_only(published, tmp_path):
    from tests.test_cli_fast import probe

    config, _ = published
    result, printed = probe("--config", config, "export", "--quarter", "2025Q3", "--out", str(tmp_path / "x"),
                            "--inputs-only")
    assert result == {"rc": 0, "loaded": []} and printed == str(tmp_path / "x" / "2025Q3")


def test_the_inputs_only_export_is_written_whole_or_not_at_all(published, tmp_path, capsys):
    config, releases = published
    (releases["2025Q4"] / "videos" / "3.mp4").unlink()  # a damaged release: the second quarter fails
    out = tmp_path / "inputs"
    assert main(["--config", config, "export", "--quarter", *QUARTERS, "--out", str(out), "--inputs-only"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("veritas: ") and "medium 3 names 'videos/3.mp4', not a file of the release" in err
    assert len(err.splitlines()) == 1 and not out.exists() and not list(tmp_path.glob(".*inputs*"))
    shutil.copy(releases["2025Q3"] / "videos" / "3.mp4", releases["2025Q4"] / "videos" / "3.mp4")
    claims = json.loads((releases["2025Q4"] / "claims.json").read_text())
    outside = Path("../../../../../media/2025Q4/a.jpg")  # a file, but not the release's
    assert (releases["2025Q4"] / outside).is_file()
    claims["claims"][0]["media"][0]["file_path"] = str(outside)
    (releases["2025Q4"] / "claims.json").write_text(json.dumps(claims))
    assert main(["--config", config, "export", "--quarter", "2025Q4", "--out", str(out), "--inputs-only"]) == 2
    assert "medium 1 names '../../../../../media/2025Q4/a.jpg', not a file of the release" in capsys.readouterr().err
    (releases["2025Q4"] / "claims.json").write_text(json.dumps({"claims": [{"id": 1, "media": []}]}))
    assert main(["--config", config, "export", "--quarter", "2025Q4", "--out", str(out), "--inputs-only"]) == 2
    assert "not a release's claims (KeyError 'text')" in capsys.readouterr().err and not out.exists()
    assert main(["--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--inputs-only",
                 "--format", "hf"]) == 2
    assert "leave out --format" in capsys.readouterr().err and not out.exists()


def test_a_system_says_which_file_it_was_given(tmp_path):
    systems = tmp_path / "systems"
    systems.mkdir()
    base = {"kind": "predictions", "knowledge_cutoff": "2024Q4", "predictions": {"2025Q3": "p.json"}}
    (systems / "told.yaml").write_text(yaml.safe_dump({**base, "input": "inputs_only"}))
    (systems / "silent.yaml").write_text(yaml.safe_dump(base))
    silent, told = load_systems(systems)
    # one that does not say may have read the whole release, review_url included
    assert (told.input, silent.input) == ("inputs_only", "full_release")
    (systems / "bad.yaml").write_text(yaml.safe_dump({**base, "input": "answers"}))
    with pytest.raises(ValueError) as caught:
        read_system(systems / "bad.yaml")
    message = str(caught.value)
    assert message.startswith(f"{systems / 'bad.yaml'}: field input is 'answers': ") and "inputs_only" in message
    assert "\n" not in message
    assert {s.input for s in load_systems(PROJECT_ROOT / "systems")} == {"full_release"}
    for path in (PROJECT_ROOT / "systems").glob("*.yaml"):  # the shipped files say it, never leave it to the default
        assert "input" in yaml.safe_load(path.read_text()), path


def test_the_evaluation_docs_say_review_url_reveals_the_verdict_and_name_the_inputs_file():
    def read(page: str) -> str:  # the prose, its lines joined
        return " ".join((PROJECT_ROOT / page).read_text().split())

    score = read("docs/how-to/score-a-system.md")
    assert "`veritas export --quarter 2025Q4 --inputs-only" in score and "input: inputs_only" in score
    assert "`review_url`" in score and "states the verdict" in score and "must not read" in score
    for page in ("docs/concepts/release.md", "docs/concepts/integrity.md"):
        text = read(page)
        assert "`review_url`" in text and "verdict" in text and "--inputs-only" in text, page
    reference = (PROJECT_ROOT / "docs/reference/release-format.md").read_text()
    section = reference.split("## inputs.json")[1].split("\n## ")[0]
    assert all(f"`{field}`" in section for field in (*INPUT_FIELDS, *INPUT_MEDIA_FIELDS, "release_version"))
