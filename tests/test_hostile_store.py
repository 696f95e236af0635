"""Issue 51, sections 2 and 4, as a careless or hostile user: only the pipeline writes into the store (`veritas
evaluate --out` inside it is refused; `veritas export` writes beside its target and moves the copy into place only
when complete, so a full disk leaves nothing behind), and each bad option, file or input is one line that names it,
never a traceback."""

import contextlib
import errno
import io
import json
import shutil
from pathlib import Path

import dagster as dg
import lxml.html
import pytest
import yaml

from dagster_project.cli import main
from dagster_project.core.config_file import load_config
from tests.conftest import write_demo_config
from tests.test_bad_input_eval import files_of, lines, published_store, write_release


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(list(argv))
    return rc, out.getvalue(), err.getvalue()



@pytest.fixture
def store_config(tmp_path):
    """test_bad_input_eval's store (one published 2025Q3 release, v1) with the pipeline's own evaluation report."""
    config, root = published_store(tmp_path)
    (root / "reports/2025Q3").mkdir(parents=True)
    (root / "reports/2025Q3/evaluation.json").write_text('{"the pipeline": "wrote this"}')
    return config, root


# ------------------------------------------------------------------------------ evaluate --out inside the store


@pytest.mark.parametrize("inside", ["reports/2025Q3", "releases/2025Q3/v1", ".", "reports/new/deeper"])
def test_evaluate_refuses_an_out_inside_the_store(store_config, tmp_path, inside):
    config, root = store_config
    before = files_of(root)
    preds = tmp_path / "preds.jsonl"
    preds.write_text(lines(*({"id": i, "integrity": 0.0} for i in (1, 2, 3))))
    out = root / inside if inside != "." else root
    rc, stdout, err = run_cli("--config", config, "evaluate", "--predictions", str(preds),
                              "--release", str(root / "releases/2025Q3"), "--out", str(out), "--cutoff", "")
    assert rc == 2 and stdout == "", err
    where = "is" if inside == "." else "is inside"
    assert err.startswith(f"veritas evaluate: --out {out} {where} the store {root.resolve()}") and "outside" in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert files_of(root) == before and not (root / "reports/new").exists()  # nothing written, nothing replaced
    # the same release, scored into a folder outside the store, is fine
    rc, _, err = run_cli("--config", config, "evaluate", "--predictions", str(preds),
                         "--release", str(root / "releases/2025Q3"), "--out", str(tmp_path / "mine"), "--cutoff", "")
    assert rc == 0, err
    assert (tmp_path / "mine/evaluation.json").is_file() and files_of(root) == before


def test_export_and_evaluate_share_one_store_rule():
    """The rule lives once (dagster_project.core.store_paths); export's check and evaluate's use it."""
    import inspect

    from dagster_project.commands import evaluate, export

    for module in (export, evaluate):
        source = inspect.getsource(module)
        assert "refuse_in_store" in source and "root in target.parents" not in source


# ------------------------------------------------------------------------------ export on a full disk


def full_disk_after(monkeypatch, files: int) -> None:
    """Every file copy after the first ``files`` writes half of it and fails as a full disk does."""
    real, done = shutil.copyfile, []

    def copyfile(src, dst, *args, **kwargs):
        if len(done) >= files:
            data = Path(src).read_bytes()
            Path(dst).write_bytes(data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device", str(dst))
        done.append(src)
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(shutil, "copyfile", copyfile)


@pytest.mark.parametrize("fmt", ["veritas", "hf"])
@pytest.mark.parametrize("existing", [False, True])
def test_export_onto_a_full_disk_leaves_nothing_and_says_why(store_config, tmp_path, monkeypatch, fmt, existing):
    config, root = store_config
    out = tmp_path / "export"
    if existing:  # an empty folder made for it
        out.mkdir()
    with monkeypatch.context() as patch:
        full_disk_after(patch, 3)
        rc, stdout, err = run_cli("--config", config, "export", "--quarter", "2025Q3", "--out", str(out),
                                  "--format", fmt)
    assert rc == 2 and stdout == "", err
    assert err.startswith(f"veritas export: cannot write --out {out}: No space left on device; nothing was exported")
    assert "free space" in err and err.count("\n") == 1 and "Traceback" not in err
    assert (not out.exists()) if not existing else list(out.iterdir()) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp-")] == []  # the partial copy is gone
    # with space again, the same command succeeds: no "not empty"
    rc, _, err = run_cli("--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--format", fmt)
    assert rc == 0, err
    assert files_of(out / "2025Q3")["claims.json"] == (root / "releases/2025Q3/v1/claims.json").read_bytes()


def test_export_table_write_failure_leaves_no_empty_parquet(store_config, tmp_path, monkeypatch):
    """--format hf writes a table per quarter after the copy: a full disk there (a 0-byte file) is cleaned up too."""
    import pyarrow.parquet as pq

    config, _ = store_config
    out = tmp_path / "hf"

    def write_table(table, where, *args, **kwargs):
        Path(where).write_bytes(b"")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pq, "write_table", write_table)
    rc, _, err = run_cli("--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--format", "hf")
    assert rc == 2 and "No space left on device" in err and err.count("\n") == 1
    assert not out.exists() and list(tmp_path.glob(".tmp-*")) == []


def test_export_force_sets_aside_only_after_the_new_copy_is_complete(store_config, tmp_path, monkeypatch):
    config, _ = store_config
    out = tmp_path / "export"
    (out / "2025Q3").mkdir(parents=True)
    (out / "2025Q3/notes.txt").write_text("mine")
    with monkeypatch.context() as patch:
        full_disk_after(patch, 1)
        rc, _, err = run_cli("--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--force")
    assert rc == 2 and "No space left on device" in err
    assert sorted(p.name for p in out.iterdir()) == ["2025Q3"] and (out / "2025Q3/notes.txt").read_text() == "mine"
    rc, _, err = run_cli("--config", config, "export", "--quarter", "2025Q3", "--out", str(out), "--force")
    assert rc == 0, err
    kept = next(out.glob("2025Q3.replaced-*"))
    assert (kept / "notes.txt").read_text() == "mine" and (out / "2025Q3/claims.json").is_file()


# ------------------------------------------------------------------------------ evaluate's options


def evaluate(tmp_path: Path, *extra: str) -> tuple[int, str, str]:
    release = write_release(tmp_path / "release")
    preds = tmp_path / "preds.jsonl"
    preds.write_text(lines(*({"id": i, "integrity": 0.0} for i in (1, 2, 3))))
    return run_cli("evaluate", "--predictions", str(preds), "--release", str(release), *extra)


BAD_OPTIONS = {  # the options -> what the one line says after "veritas evaluate: "
    "out is a file": (["--out", "{tmp}/report.txt", "--cutoff", ""], "--out {tmp}/report.txt is a file"),
    "max-mb inf": (["--max-mb", "inf", "--cutoff", ""], "--max-mb inf is not a size: give a positive number"),
    "max-mb nan": (["--max-mb", "nan", "--cutoff", ""], "--max-mb nan is not a size"),
    "max-mb 0": (["--max-mb", "0", "--cutoff", ""], "--max-mb 0 is not a size"),
    "cutoff abc": (["--cutoff", "abc"], "--cutoff 'abc' is not a knowledge cut-off: give a quarter (2024Q4)"),
    "contamination empty": (["--contamination", "", "--cutoff", ""], "--contamination is empty: give the path"),
    "contamination a list": (["--contamination", "{tmp}/c.json", "--cutoff", ""],
                             "--contamination: {tmp}/c.json: not a contamination report"),
    "contamination missing": (["--contamination", "{tmp}/none.json", "--cutoff", ""],
                              "--contamination: {tmp}/none.json: no such file"),
}


@pytest.mark.parametrize("case", list(BAD_OPTIONS))
def test_evaluate_names_a_bad_option_in_one_line(tmp_path, case):
    argv, says = BAD_OPTIONS[case]
    (tmp_path / "report.txt").write_text("my notes")
    (tmp_path / "c.json").write_text("[]")
    rc, out, err = evaluate(tmp_path, *(a.format(tmp=tmp_path) for a in argv))
    assert rc == 2 and out == "", (case, err)
    assert err.startswith(f"veritas evaluate: {says.format(tmp=tmp_path)}"), (case, err)
    assert err.count("\n") == 1 and "Traceback" not in err
    assert (tmp_path / "report.txt").read_text() == "my notes"


def test_evaluate_uses_a_contamination_report(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"models": {"m": {"flagged": [1]}}}))
    rc, _, err = evaluate(tmp_path, "--contamination", str(tmp_path / "c.json"), "--cutoff", "2024Q4",
                            "--out", str(tmp_path / "r"))
    assert rc == 0, err
    assert "contamination_controlled" in json.loads((tmp_path / "r/evaluation.json").read_text())


# ------------------------------------------------------------------------------ averitec-score's inputs


GOLD = [{"claim": "c0", "label": "Refuted", "questions": [{"question": "q?", "answers": [{"answer": "a"}]}]},
        {"claim": "c1", "label": "Supported", "questions": []}]

BAD_AVERITEC = {  # (gold, predictions) -> what the one line says after "veritas averitec-score: "
    "predictions a dict": (GOLD, {"pred_label": "Refuted"}, "{preds}: expected a JSON list of predictions"),
    "gold a dict": ({"claims": GOLD}, [], "{gold}: expected a JSON list of AVeriTeC records"),
    "a null record": (GOLD, [{"pred_label": "Refuted", "evidence": []}, None],
                      "{preds}: record 2: expected an object of predictions {pred_label, evidence}, got null"),
    "evidence a string": (GOLD, [{"pred_label": "Refuted", "evidence": "it is false"}],
                          '{preds}: record 1: field evidence: "it is false" is not a list of {question, answer}'),
    "gold questions a string": ([{**GOLD[0], "questions": "q?"}], [], "{gold}: record 1: field questions"),
    "claim_id out of range": (GOLD, [{"claim_id": 7, "pred_label": "Refuted"}],
                              "{preds}: record 1: field claim_id: 7 is not an index into the gold file (0 to 1)"),
}


@pytest.mark.parametrize("case", list(BAD_AVERITEC))
def test_averitec_score_names_a_bad_input_in_one_line(tmp_path, case):
    gold, preds, says = BAD_AVERITEC[case]
    (tmp_path / "gold.json").write_text(json.dumps(gold))
    (tmp_path / "preds.json").write_text(json.dumps(preds))
    rc, out, err = run_cli("averitec-score", "--gold", str(tmp_path / "gold.json"),
                           "--predictions", str(tmp_path / "preds.json"))
    assert rc == 2 and out == "", (case, err)
    expected = says.replace("{gold}", str(tmp_path / "gold.json")).replace("{preds}", str(tmp_path / "preds.json"))
    assert err.startswith(f"veritas averitec-score: {expected}"), (case, err)
    assert err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------------------ systems/ with a bad file


def write_system(folder: Path, stem: str, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(fields))
    return path


def quarter_store(tmp_path: Path, predicted: dict[str, dict[int, float]]):
    """A store with one 2025Q3 release of four claims (gold -1, 0.5, 0, 1) and a systems folder with one outside
    system per entry of ``predicted`` (name -> claim id -> integrity; an empty one predicts nothing)."""
    from dagster_project.resources.store import StoreResource

    store = StoreResource(root=str(tmp_path / "data"))
    release = store.base / "releases/2025Q3/v1"
    claims = [{"id": c, "text": f"claim {c}", "date": "2025-08-01", "language": "en", "review_url": f"https://x.org/{c}",
               "media": [], "veracity": None, "context_coverage": None,
               "integrity": {"score": x, "decisive_property": "veracity"}}
              for c, x in ((1, -1.0), (2, 0.5), (3, 0.0), (4, 1.0))]
    write_release(release, claims=claims)
    (release.parent / "LATEST").write_text("v1")
    systems = tmp_path / "systems"
    for name, scores in predicted.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps([{"claim_id": c, "integrity": x} for c, x in scores.items()] or
                                   [{"claim_id": 1, "integrity": None}]))
        write_system(systems, name, kind="predictions", knowledge_cutoff="unknown", predictions={"2025Q3": str(path)})
    return store, systems


def test_a_bad_system_file_is_named_and_the_others_ranked(tmp_path):
    from assets.evaluation.leaderboard import load_systems

    store, systems = quarter_store(tmp_path, {"good": {1: -1.0, 2: 0.5, 3: 0.0, 4: 0.9}})
    (systems / "broken.yaml").write_text("name: [unclosed\nkind: predictions\n")
    (systems / "latin.yaml").write_bytes("name: Systeme \xe9t\xe9\nkind: predictions\n".encode("latin-1"))
    (systems / "list.yml").write_text("- a\n- b\n")
    for bad, says in (("broken.yaml", "line 2: not valid YAML"), ("latin.yaml", "byte 14 is not UTF-8"),
                      ("list.yml", "a system file is a mapping")):
        alone = tmp_path / f"alone-{bad}"
        alone.mkdir()
        shutil.copy(systems / bad, alone / bad)
        with pytest.raises(ValueError, match="^" + str(alone / bad).replace(".", r"\.") + ": "):
            load_systems(alone)
        unreadable: list[str] = []
        with pytest.raises(ValueError, match="no system file could be read"):
            load_systems(alone, unreadable)
        assert unreadable[0].startswith(f"{alone / bad}: {says}"), unreadable
    named = good_ranked_alone(store, systems)
    for bad in ("broken.yaml", "latin.yaml", "list.yml"):
        assert str(systems / bad) in named


# ------------------------------------------------------------------------------ the page: no interval of nothing


def test_a_system_without_predictions_shows_no_interval(tmp_path):
    from assets.evaluation.leaderboard import (
        collect,
        compute_board,
        load_systems,
        text_ranking,
    )
    from assets.evaluation.leaderboard_page import render_page

    store, systems = quarter_store(tmp_path, {"good": {1: -1.0, 2: 0.5, 3: 0.0, 4: 0.9}, "silent": {}})
    board = compute_board(collect(store, load_systems(systems), ["2025Q3"]), resamples=50)
    ranked = {s["name"]: s for s in board["systems"]}
    silent = ranked["silent"]["windows"]["all"]
    assert silent["mse"] is None and silent["ci"]["mse"] is None  # gold varies: an interval of zeros would show
    assert all(g["ci"]["mse"] is None for g in silent["modality"].values())
    assert ranked["good"]["windows"]["all"]["ci"]["mse"] is not None
    doc = lxml.html.fromstring(render_page(board))
    row = doc.xpath("//table[@id='board']/tbody/tr[@data-system='silent']")[0]
    assert row.xpath("td[@data-field='mse']")[0].text == "-" and row.xpath("td[@data-field='ci']")[0].text == "-"
    silent_line = next(line for line in text_ranking(board).splitlines() if "silent" in line)
    assert "[" not in silent_line


# ------------------------------------------------------------------------------ a full or read-only disk


def test_costs_names_a_ledger_it_cannot_read(tmp_path, monkeypatch):
    import sqlite3

    config = write_demo_config(tmp_path)
    ledger = Path(load_config(config)["llm"]["cache_path"])
    ledger.parent.mkdir(parents=True, exist_ok=True)
    ledger.write_bytes(b"not a database, " * 100)
    rc, out, err = run_cli("--config", config, "costs")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"veritas costs: cannot read the LLM ledger {ledger} (file is not a database)")
    assert "llm.cache_path" in err

    def read_only(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(sqlite3, "connect", read_only)
    rc, out, err = run_cli("--config", config, "costs")
    assert rc == 2 and err.count("\n") == 1 and f"the LLM ledger {ledger}" in err
    assert "read-only file or mount" in err and "llm.cache_path" in err and "chmod" not in err


@pytest.mark.parametrize("failure", ["full", "read-only", "other"])
def test_run_on_a_full_or_read_only_disk_says_so_in_one_line(tmp_path, monkeypatch, failure):
    import sqlite3

    import sqlalchemy.exc

    from dagster_project import quarter_run

    config = write_demo_config(tmp_path)
    data_dir = load_config(config)["data_dir"]
    error = {"full": sqlalchemy.exc.OperationalError("INSERT INTO event_logs ...", {}, sqlite3.OperationalError(
                 "database or disk is full")),
             "read-only": OSError(errno.EROFS, "Read-only file system", f"{data_dir}/data/x.parquet"),
             "other": RuntimeError("a bug")}[failure]

    def run_quarter(*args, **kwargs):
        raise error

    monkeypatch.setattr(quarter_run, "run_quarter", run_quarter)
    if failure == "other":  # anything else is not dressed up as a disk problem
        with pytest.raises(RuntimeError, match="a bug"):
            run_cli("--config", config, "run", "--quarter", "2025Q3")
        return
    rc, out, err = run_cli("--config", config, "run", "--quarter", "2025Q3")
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err and "chmod" not in err
    if failure == "full":
        assert err.startswith(f"veritas run: the disk under the data dir {data_dir} is full (database or disk is "
                              "full); free space there")
    else:
        assert err.startswith(f"veritas run: the data dir {data_dir} is on a read-only file system")
        assert "set data_dir in the config to a folder on a writable disk" in err


def test_a_store_on_a_read_only_mount_is_named_as_such_not_sent_to_chmod(tmp_path, monkeypatch):
    """A read-only mount: no permission can help, so the message says so instead of advising chmod (issue 51 §4)."""
    import os

    from dagster_project.core import config_file
    from dagster_project.core.config_file import ConfigError, check_data_dir

    data = tmp_path / "data"
    data.mkdir()
    real = os.statvfs

    class ReadOnly:
        def __init__(self, result):
            self.result = result

        def __getattr__(self, name):
            return getattr(self.result, name)

        @property
        def f_flag(self):
            return self.result.f_flag | os.ST_RDONLY

    monkeypatch.setattr(config_file.os, "statvfs", lambda path: ReadOnly(real(path)))
    config = {"path": str(tmp_path / "veritas.yaml"), "data_dir": str(data), "store": {}}
    with pytest.raises(ConfigError) as caught:
        check_data_dir(config, writes=True)
    message = str(caught.value)
    assert "read-only file system" in message and "chmod" not in message and "\n" not in message
    check_data_dir(config, writes=False)  # a read-only command still reads it


def good_ranked_alone(store, systems) -> list[str]:
    """Materialize the leaderboard over ``systems``: the one valid system ("good") is ranked alone; returns the
    files the board names as unreadable."""
    from assets.evaluation.leaderboard import leaderboard
    from dagster_project.stage_settings import LeaderboardSettings

    result = dg.materialize([leaderboard], resources={"store": store,
                                                      "board": LeaderboardSettings(systems_dir=str(systems))})
    assert result.success
    board = json.loads((store.base / "reports/leaderboard/leaderboard.json").read_text())["board"]
    assert [(s["name"], s["rank"]) for s in board["systems"]] == [("good", 1)]
    return result.asset_materializations_for_node("leaderboard")[0].metadata["unreadable_system_files"].value
