"""Issue 51, sections 2 and 4, the rest: `veritas averitec-score --out` never writes into the store or the data dir,
`veritas evaluate` never leaves half a report, a prediction that scores one medium twice is refused, and a system
file that fails its schema is named while the other systems are still ranked."""

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from dagster_project.config import PROJECT_ROOT
from dagster_project.core.config_file import load_config
from tests.test_bad_input_eval import (
    evaluate,
    files_of,
    lines,
    medium,
    published_store,
    release_claim,
    write_release,
)
from tests.test_hostile_store import good_ranked_alone, quarter_store, run_cli, write_system

FIXTURES = Path(__file__).parent / "fixtures"


# ------------------------------------------------------------------------------ averitec-score --out


@pytest.fixture
def averitec_files(tmp_path):
    """One AVeriTeC dev record (tests/fixtures) and a prediction for it that repeats its gold evidence."""
    gold = json.loads((FIXTURES / "averitec_dev_excerpt.json").read_text(encoding="utf-8"))[:1]
    questions = [{"question": q["question"], "answer": " ".join(a.get("answer", "") for a in q.get("answers", []))}
                 for q in gold[0].get("questions", [])]
    (tmp_path / "gold.json").write_text(json.dumps(gold))
    (tmp_path / "preds.json").write_text(json.dumps([{"pred_label": gold[0]["label"], "evidence": questions}]))
    return tmp_path / "gold.json", tmp_path / "preds.json"


@pytest.mark.parametrize("inside", ["store", "store/reports/result.json", "data dir", "data dir/llm_cache.sqlite"])
def test_averitec_score_refuses_an_out_in_the_store_or_the_data_dir(tmp_path, averitec_files, inside):
    config, root = published_store(tmp_path)
    data_dir = Path(load_config(config)["data_dir"])
    (data_dir / "llm_cache.sqlite").write_bytes(b"the model answers")
    before = files_of(data_dir)
    out = {"store": root, "data dir": data_dir}[inside.split("/")[0]] / inside.partition("/")[2]
    gold, preds = averitec_files
    rc, stdout, err = run_cli("--config", config, "averitec-score", "--gold", str(gold), "--predictions", str(preds),
                              "--out", str(out))
    assert rc == 2 and stdout == "", err
    place, holds = ("the store", root) if inside.startswith("store") else ("the data dir", data_dir)
    where = "is inside" if "/" in inside else "is"
    assert err.startswith(f"veritas averitec-score: --out {out} {where} {place} {holds.resolve()}"), err
    assert f"choose a folder outside {place}" in err and err.count("\n") == 1 and "Traceback" not in err
    assert files_of(data_dir) == before  # nothing written, nothing replaced


def test_averitec_score_writes_its_result_outside(tmp_path, averitec_files):
    config, _ = published_store(tmp_path)
    gold, preds = averitec_files
    rc, stdout, err = run_cli("--config", config, "averitec-score", "--gold", str(gold), "--predictions", str(preds),
                              "--out", str(tmp_path / "result.json"))
    assert rc == 0, err
    assert json.loads((tmp_path / "result.json").read_text())["n_claims"] == 1
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []


# ------------------------------------------------------------------------------ evaluate: never half a report


def test_evaluate_on_a_full_disk_keeps_the_earlier_report_whole(tmp_path):
    """The report's files are written beside their place and renamed: a write that fails part way (here the process's
    file size limit, as a full disk fails it) leaves the earlier evaluation.json as it was, and no partial file."""
    release = write_release(tmp_path / "release")
    preds = tmp_path / "preds.jsonl"
    preds.write_text(lines(*({"id": i, "integrity": 0.0} for i in (1, 2, 3))))
    out = tmp_path / "report"
    out.mkdir()
    earlier = json.dumps({"system": "earlier", "padding": "x" * 300}, indent=2)
    (out / "evaluation.json").write_text(earlier)
    config = tmp_path / "veritas.yaml"
    config.write_text(f"data_dir: {tmp_path / 'data'}\n")
    limit = 1024  # bytes: the new evaluation.json is larger

    def small_files():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing

    proc = subprocess.run([sys.executable, "-m", "dagster_project.cli", "--config", str(config), "evaluate",
                           "--predictions", str(preds), "--release", str(release), "--out", str(out), "--cutoff", ""],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300, preexec_fn=small_files,
                          env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith(f"veritas evaluate: cannot write the report to {out}: File too large")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert (out / "evaluation.json").read_text() == earlier  # whole: the earlier report, not half of the new one
    assert sorted(p.name for p in out.iterdir()) == ["evaluation.json"]  # no partial file beside it
    rc, _, err = evaluate(tmp_path, lines(*({"id": i, "integrity": 0.0} for i in (1, 2, 3))), release=release)
    assert rc == 0 and json.loads((tmp_path / "r/evaluation.json").read_text())["system"] == "preds", err


# ------------------------------------------------------------------------------ predictions: one score per medium


@pytest.mark.parametrize("second", [21, "21"])
def test_a_prediction_that_scores_one_medium_twice_is_refused(tmp_path, second):
    claims = [release_claim(1, -1.0, [medium(11)]), release_claim(2, 0.5, [medium(21), medium(22)])]
    release = write_release(tmp_path / "release", claims=claims)
    body = lines({"id": 1, "integrity": -1.0},
                 {"id": 2, "media": [{"id": 21, "authenticity": 1.0}, {"id": second, "authenticity": -1.0}]})
    rc, out, err = evaluate(tmp_path, body, release=release)
    assert rc == 2 and out == "", err
    assert err.startswith(f"veritas evaluate: {tmp_path / 'preds.json'}: line 2: field media[1].id: 21 is given twice "
                          "(media[0] too); keep one score per medium"), err
    assert err.count("\n") == 1 and "Traceback" not in err and not (tmp_path / "r").exists()


# ------------------------------------------------------------------------------ leaderboard: a system file's schema


SCHEMA_FAILURES = {  # file -> fields, and what the line naming it says
    "oracle.yaml": ({"kind": "oracle", "knowledge_cutoff": "unknown"},
                    "field kind is 'oracle': Input should be 'verifier' or"),
    "nocutoff.yaml": ({"kind": "verifier", "member": "m1"}, "field knowledge_cutoff: Field required"),
    "listed.yaml": ({"kind": "predictions", "knowledge_cutoff": "unknown", "predictions": ["a.json"]},
                    "field predictions is ['a.json']: Input should be a valid dictionary"),
}


def test_a_system_file_that_fails_its_schema_is_named_and_the_others_ranked(tmp_path):
    from assets.evaluation.leaderboard import load_systems

    store, systems = quarter_store(tmp_path, {"good": {1: -1.0, 2: 0.5, 3: 0.0, 4: 0.9}})
    for name, (fields, _) in SCHEMA_FAILURES.items():
        write_system(systems, Path(name).stem, **fields)
    unreadable: list[str] = []
    assert [s.name for s in load_systems(systems, unreadable)] == ["good"]
    for line, (name, (_, says)) in zip(sorted(unreadable), sorted(SCHEMA_FAILURES.items())):
        assert line.startswith(f"{systems / name}: {says}") and "\n" not in line, line
        assert line.endswith("fix the file or move it out of the systems folder"), line
    first = str(systems / "listed.yaml").replace(".", r"\.")
    with pytest.raises(ValueError, match=f"^{first}: field predictions"):
        load_systems(systems)  # without a list to collect them: the first bad file is the error
    named = good_ranked_alone(store, systems)
    assert all(str(systems / name) in named for name in SCHEMA_FAILURES)
