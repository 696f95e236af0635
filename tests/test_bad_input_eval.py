"""Issue 35, as a careless or hostile user: `veritas export` never deletes, overwrites or follows a pointer out of
the store; `veritas evaluate` reads predictions and releases strictly, and every refusal names the file, the line
or record and the field in one line, never a traceback."""

import json
from pathlib import Path

import pytest

from dagster_project.cli import main
from dagster_project.core.config_file import load_config
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


def published_store(tmp_path: Path) -> tuple[str, Path]:
    """A config whose store holds one published 2025Q3 release (v1), and the store's root."""
    from tests.test_release_card import make_release

    config = write_demo_config(tmp_path)
    root = Path(load_config(config)["store"]["root"])
    make_release(root / "releases/2025Q3/v1", "2025Q3")
    (root / "releases/2025Q3/LATEST").write_text("v1")
    return config, root


@pytest.fixture
def store_config(tmp_path):
    return published_store(tmp_path)


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


@pytest.mark.parametrize("pointer", ["../../../elsewhere", "ABSOLUTE", "..", "", "v1/../../2025Q4/v1", "link"])
def test_export_follows_latest_only_inside_the_store(store_config, tmp_path, capsys, pointer):
    config, root = store_config
    elsewhere = write_release(root.parent / "elsewhere")
    pointer = str(elsewhere) if pointer == "ABSOLUTE" else pointer
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


# ------------------------------------------------------------------------------------------ evaluate


def evaluate(tmp_path: Path, body: str | bytes, *extra: str, release: Path | None = None) -> tuple[int, str, str]:
    """`veritas evaluate` of a predictions file with ``body`` against a 3-claim 2025Q3 release."""
    import contextlib
    import io

    release = release or write_release(tmp_path / "release")
    pfile = tmp_path / "preds.json"
    pfile.write_bytes(body if isinstance(body, bytes) else body.encode())
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["evaluate", "--predictions", str(pfile), "--release", str(release), "--out", str(tmp_path / "r"),
                   "--cutoff", "", *extra])
    return rc, out.getvalue(), err.getvalue()


def lines(*records) -> str:
    return "\n".join(json.dumps(r) for r in records)


BAD_PREDICTIONS = {  # body -> what the one-line error says after the file's name
    "empty": ("", "is empty"),
    "blank lines": ("\n \n", "is empty"),
    "an empty object": ("{}", "holds no predictions"),
    "an empty list": ("[]", "holds no predictions (an empty list)"),
    "an empty wrapper": ('{"predictions": []}', "holds no predictions (an empty list)"),
    "only unknown ids": (lines({"id": 7, "integrity": 0.5}, {"id": 8, "integrity": 0.5}),
                         "line 1: field claim_id: 7 is not a claim of the 2025Q3 release; line 2: field claim_id: 8"),
    "one unknown id": (json.dumps([{"id": 1, "integrity": 0.5}, {"id": 99, "integrity": 0.5}]),
                       "record 2: field claim_id: 99 is not a claim of the 2025Q3 release"),
    "duplicate ids": (lines({"id": 1, "integrity": 1.0}, {"id": 1, "integrity": -0.5}),
                      "line 2: field claim_id: 1 is predicted twice (line 1 too)"),
    "duplicate ids as text and number": (json.dumps([{"id": 1, "integrity": 1.0}, {"claim_id": "1", "integrity": 0}]),
                                         "record 2: field claim_id: 1 is predicted twice (record 1 too)"),
    "true as a score": (lines({"id": 1, "integrity": True}), "line 1: field integrity: true is not a score"),
    "a string score": (lines({"id": 1, "veracity": {"score": "0.5"}}), 'line 1: field veracity.score: "0.5" is not'),
    "a score out of range": (json.dumps([{"id": 1, "integrity": 3}]), "record 1: field integrity: 3 is not a score"),
    "NaN": ('[{"id": 1, "integrity": NaN}]', "NaN is not a number JSON allows"),
    "id 1.9": (lines({"id": 1.9, "integrity": 0.5}), "line 1: field id: 1.9 is not an id"),
    "fullwidth id": (lines({"id": "１", "integrity": 0.5}), 'line 1: field id: "１" is not an id'),
    "Arabic-Indic id": (lines({"claim_id": "٣", "integrity": 0.5}), 'line 1: field claim_id: "٣" is not an id'),
    "true as an id": (lines({"id": True, "integrity": 0.5}), "line 1: field id: true is not an id"),
    "a null record": (json.dumps([{"id": 1, "integrity": 0.5}, None]), "record 2: expected an object"),
    "a record without an id": (lines({"id": 1, "integrity": 0.5}, {"integrity": 0.5}),
                               "line 2: field claim_id: missing"),
    "media a string": (lines({"id": 1, "integrity": 0.5, "media": "abc"}), 'line 1: field media: "abc" is not a list'),
    "a medium without an id": (lines({"id": 1, "media": [{"authenticity": 1}]}), "line 1: field media[0]: expected"),
    "a bad quarter": (lines({"id": 1, "quarter": "2025Q9", "integrity": 0}), "line 1: field quarter: '2025Q9' is not"),
    "deep nesting": ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    "deep nesting in a line": (lines({"id": 1}) + "\n" + "[" * 100_000, "line 2: nested too deeply"),
    "broken JSON": ('[{"id": 1, "integrity": 0.5},\n {"id": 2', "line 2 column 10: not valid JSON"),
    "a broken line": (lines({"id": 1}) + '\n{"id": 2,', "line 2: not valid JSON"),
    "not UTF-8": (b'[{"id": 1, "justification": "\xff"}]', "line 1: byte 29 is not UTF-8"),
    "a number": ("5", "holds no predictions (5)"),
    "a wrapper whose predictions are not a list": ('{"predictions": {"id": 1}}', "field predictions: expected a list"),
}


@pytest.mark.parametrize("case", list(BAD_PREDICTIONS))
def test_evaluate_refuses_a_bad_predictions_file_in_one_line(tmp_path, case):
    body, says = BAD_PREDICTIONS[case]
    rc, out, err = evaluate(tmp_path, body)
    assert rc == 2 and out == "", (case, out, err)
    assert err.startswith(f"veritas evaluate: {tmp_path / 'preds.json'}") and says in err, (case, err)
    assert err.count("\n") == 1 and "Traceback" not in err


def test_evaluate_reads_a_one_line_json_lines_file(tmp_path):
    rc, out, err = evaluate(tmp_path, lines({"id": 1, "integrity": -1.0}) + "\n")
    assert rc == 0, err
    report = json.loads((tmp_path / "r/evaluation.json").read_text())
    quarter = report["quarters"]["2025Q3"]
    assert quarter["predicted"] == 1 and quarter["property"]["integrity"]["mse"] == 0.0


def test_evaluate_prints_partial_coverage_before_the_mse(tmp_path):
    rc, out, _ = evaluate(tmp_path, lines({"id": 1, "integrity": -1.0}, {"id": 2, "integrity": None}))
    assert rc == 0
    first = out.splitlines()[0]
    assert first.startswith("WARNING: preds covers 1 of 3 claims of 2025Q3 (33.3%)")
    assert out.index("WARNING") < out.index("MSE")
    full = evaluate(tmp_path / "full", lines(*({"id": i, "integrity": 0.0} for i in (1, 2, 3))))
    assert full[0] == 0 and "WARNING" not in full[1]


def test_evaluate_refuses_a_folder_and_a_file_over_the_cap(tmp_path):
    release = write_release(tmp_path / "release")
    rc = main(["evaluate", "--predictions", str(tmp_path), "--release", str(release), "--out", str(tmp_path / "r")])
    assert rc == 2
    big = lines(*({"id": 1, "integrity": 0.0, "justification": "x" * 1000} for _ in range(1200)))
    rc, out, err = evaluate(tmp_path, big, "--max-mb", "1")
    assert rc == 2 and "MiB, over the 1 MiB cap for a predictions file" in err


def test_evaluate_names_the_folder_given_as_predictions(tmp_path, capsys):
    release = write_release(tmp_path / "release")
    assert main(["evaluate", "--predictions", str(tmp_path), "--release", str(release)]) == 2
    assert f"veritas evaluate: {tmp_path} is a folder, not a predictions file" in capsys.readouterr().err


# ------------------------------------------------------------------------------------------ the release


BAD_RELEASES = {  # what is written as claims.json (or meta.json) -> what the error says
    "a duplicated gold claim": ({"claims": [release_claim(1, 0.5), release_claim(2, 0.5), release_claim(1, 0.5)]},
                                "claims 1 and 3 share id 1"),
    "an empty claims list": ({"claims": []}, 'the release holds no claims ("claims": [])'),
    "no claims key": ({"items": []}, 'not a release\'s claims file: expected {"claims": [...]}'),
    "a list": ([release_claim(1, 0.5)], "not a release's claims file"),
    "a claim without integrity": ({"claims": [{**release_claim(1, 0.5), "integrity": None}]},
                                  "claim 1 (id 1), field integrity:"),
    "a score out of range": ({"claims": [release_claim(1, 0.5), release_claim(2, 7.0)]},
                             "claim 2 (id 2), field integrity.score:"),
    "a null claim": ({"claims": [None]}, "claim 1, field (the claim):"),
}


@pytest.mark.parametrize("case", list(BAD_RELEASES))
def test_evaluate_refuses_a_tampered_release_naming_it(tmp_path, case):
    payload, says = BAD_RELEASES[case]
    release = write_release(tmp_path / "release")
    (release / "claims.json").write_text(json.dumps(payload))
    rc, out, err = evaluate(tmp_path, lines({"id": 1, "integrity": 0.5}), release=release)
    assert rc == 2 and out == ""
    assert err.startswith(f"veritas evaluate: the release (--release {release}) cannot be used: "
                          f"{release / 'claims.json'}: ") and says in err, err
    assert err.count("\n") == 1


@pytest.mark.parametrize("meta", [{"year": 2025, "quarter": 9}, {"year": "２０２５", "quarter": 3}, {"year": 2025},
                                  [], {"year": True, "quarter": 3}])
def test_a_bad_meta_quarter_is_blamed_on_the_release(tmp_path, meta):
    release = write_release(tmp_path / "release", meta=meta)
    rc, out, err = evaluate(tmp_path, lines({"id": 1, "integrity": 0.5}), release=release)
    assert rc == 2
    assert f"the release (--release {release}) cannot be used: {release / 'meta.json'}: fields year and quarter" in err
    assert "preds.json" not in err


def test_a_release_pointer_loop_is_an_error_not_a_recursion(tmp_path):
    quarter = tmp_path / "2025Q3"
    quarter.mkdir()
    (quarter / "LATEST").write_text(".")
    rc, out, err = evaluate(tmp_path, lines({"id": 1, "integrity": 0.5}), release=quarter)
    assert rc == 2 and "LATEST names '.'" in err


def test_the_pipeline_reads_a_short_release_of_no_claims_but_evaluate_refuses_it(tmp_path):
    from assets.evaluation.predictions import load_release

    release = write_release(tmp_path / "release", claims=[])
    assert load_release(release, allow_empty=True) == []  # the assets: a short release may hold none
    with pytest.raises(ValueError, match="the release holds no claims"):
        load_release(release)


# ------------------------------------------------------------------------------------------ issue 51: still accepted


def medium(mid: int) -> dict:
    return {"type": "image", "id": mid, "file_path": f"images/{mid}.jpg", "authenticity": None,
            "contextualization": None}


QUIET_PREDICTIONS = {  # body -> what the one-line error says after the file's name (each was scored before)
    "a duplicate key in a line": ('{"id": 1, "integrity": 1.0, "integrity": -0.5}',
                                  "line 1: field integrity: given twice in one record (JSON keeps only the last)"),
    "a duplicate key in a record": ('[{"id": 1, "integrity": 0.5}, {"id": 2, "id": 3, "integrity": 0.5}]',
                                    "record 2: field id: given twice in one record"),
    "a duplicate key in a medium": ('{"id": 1, "media": [{"id": 11, "authenticity": 1, "authenticity": -1}]}',
                                    "line 1: field media[0].authenticity: given twice"),
    "a duplicate predictions list": ('{"predictions": [{"id": 1, "integrity": 1}], "predictions": [{"id": 2}]}',
                                     "field predictions: given twice (JSON keeps only the last)"),
    "an unknown media id": (lines({"id": 1, "media": [{"id": 99, "authenticity": 0.5}]}),
                            ("line 1: field media[0].id: 99 is not a medium of claim 1 (it is no medium of the 2025Q3 "
                             "release; claim 1's: 11)")),
    "another claim's media id": (lines({"id": 1, "integrity": 0}, {"id": 2, "media": [{"id": 11, "authenticity": 1}]}),
                                 ("line 2: field media[0].id: 11 is not a medium of claim 2 (it is claim 1's; "
                                  "claim 2's: 21, 22)")),
    "integrity as an object without a score": (lines({"id": 1, "integrity": {"value": 0.5}}),
                                               'line 1: field integrity: {"value": 0.5} has no score'),
    "a medium score without a score": (lines({"id": 1, "media": [{"id": 11, "authenticity": {"x": 1}}]}),
                                       'line 1: field media[0].authenticity: {"x": 1} has no score'),
    "both claim_id and id": (lines({"claim_id": 1, "id": 2, "integrity": 0.5}),
                             "line 1: field id: 2 given beside claim_id 1; give one of them"),
    "claims beside predictions": ('{"predictions": [{"id": 1, "integrity": 1}], "claims": [{"id": 2}]}',
                                  "field claims: given beside predictions; give one list"),
}


@pytest.mark.parametrize("case", list(QUIET_PREDICTIONS))
def test_evaluate_refuses_what_it_used_to_accept_quietly(tmp_path, case):
    body, says = QUIET_PREDICTIONS[case]
    claims = [release_claim(1, -1.0, [medium(11)]), release_claim(2, 0.5, [medium(21), medium(22)]),
              release_claim(3, 1.0)]
    release = write_release(tmp_path / "release", claims=claims)
    rc, out, err = evaluate(tmp_path, body, release=release)
    assert rc == 2 and out == "", (case, out, err)
    assert err.startswith(f"veritas evaluate: {tmp_path / 'preds.json'}") and says in err, (case, err)
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_release_claims_file_and_its_own_media_are_still_accepted(tmp_path):
    claims = [release_claim(1, -1.0, [medium(11)]), release_claim(2, 0.5, [medium(21), medium(22)]),
              release_claim(3, 1.0)]
    release = write_release(tmp_path / "release", claims=claims)
    body = json.dumps({"claims": [{**c, "media": [{**m, "authenticity": {"score": 0.5, "justification": ""}}
                                                  for m in c["media"]]} for c in claims]})
    rc, out, err = evaluate(tmp_path, body, release=release)
    assert rc == 0, err
