"""Issue 14: ``veritas agreement`` rates claims with an expert verdict through stage 6's code and scores the
ensemble against the expert signal. Two loopback raters with a fixed opinion make every number exact; the
embedded model's report says it is noise. Fixtures: the AVeriTeC dev and 5Pils test excerpts."""

import json

import pytest
import yaml

from dagster_project.cli import main
from dagster_project.commands.agreement import DEFAULT_PATHS, run_agreement
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.ops_support import rating, rating_reply


def _opinion(mode, body):
    """'neg' always rates negative and certain, 'pos' positive and certain."""
    verdict = rating("negative" if mode == "neg" else "positive")
    return rating_reply(body["messages"][-1]["content"], verdict, verdict)


@pytest.fixture()
def raters(tmp_path, monkeypatch):
    monkeypatch.setenv("AGREEMENT_STUB_KEY", "sk-test")
    stub = OpenAIStub(_opinion)
    members = [EnsembleMember(name=name, model=f"openai/{name}-model", api_base=stub.base(mode),
                              api_key_env="AGREEMENT_STUB_KEY") for name, mode in (("sceptic", "neg"), ("believer", "pos"))]
    llm = LLMResource(members=members, cache_path=str(tmp_path / "cache.sqlite"))
    yield llm, stub
    llm.close()
    stub.close()


def _records(name):
    return json.loads(DEFAULT_PATHS[name].read_text(encoding="utf-8"))


def test_averitec_exact_mse_and_agreement(raters):
    llm, stub = raters
    report = run_agreement(llm, "averitec-dev", _records("averitec-dev"))
    # the excerpt: 5 Refuted (-1), 5 Supported (+1), 5 Not Enough Evidence (0); Conflicting has no sign
    assert report["claims"] == 15
    assert report["left_out"] == {"Conflicting Evidence/Cherrypicking": 5}
    # a rater that always says -1 (or +1): squared errors 0, 4 and 1 on the three labels -> 25/15; right on one third
    assert report["by_member"]["sceptic"]["veracity"] == {"n": 15, "missing": 0, "mse": 1.666667, "agreement3": 0.333333}
    assert report["by_member"]["believer"]["veracity"] == {"n": 15, "missing": 0, "mse": 1.666667, "agreement3": 0.333333}
    assert report["by_member"]["sceptic"]["integrity"] == report["by_member"]["sceptic"]["veracity"]
    # the ensemble mean is 0 (Unknown): squared error 1 on Refuted and Supported -> 10/15; right on the NEE third
    assert report["ensemble"]["veracity"] == {"n": 15, "missing": 0, "mse": 0.666667, "agreement3": 0.333333}
    assert report["ensemble"]["integrity"] == report["ensemble"]["veracity"]
    # veracity 0 is not above 0: context coverage is never asked, and that is counted, not guessed
    assert report["ensemble"]["context_coverage"] == {"n": 0, "missing": 15, "mse": None, "agreement3": None}
    assert report["baseline"]["mse_always_zero"] == 0.666667
    assert report["notes"] == []  # two distinct loopback models, none embedded
    assert stub.count("neg") == stub.count("pos") == 15


def test_5pils_contextualization_sign(raters):
    llm, stub = raters
    records = _records("5pils")
    report = run_agreement(llm, "5pils", records)
    kinds = [r["type_of_image"] for r in records]
    ooc, true = kinds.count("out-of-context"), kinds.count("true")
    assert report["claims"] == ooc + true
    assert report["left_out"] == {k: kinds.count(k) for k in ("manipulated", "fake") if k in kinds}
    n = ooc + true
    assert report["by_member"]["sceptic"]["contextualization"] == {
        "n": n, "missing": 0, "mse": round(4 * true / n, 6), "agreement3": round(ooc / n, 6)}
    assert report["by_member"]["believer"]["contextualization"] == {
        "n": n, "missing": 0, "mse": round(4 * ooc / n, 6), "agreement3": round(true / n, 6)}
    assert report["ensemble"]["contextualization"]["mse"] == 1.0  # mean 0 against +-1 everywhere
    assert stub.count("neg") == n  # one media rating per claim and member; nothing else is asked


def test_cli_embedded_model_report_says_noise(tmp_path, capsys):
    config = tmp_path / "veritas.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data")}))  # the default: three embedded members
    assert main(["agreement", "--config", str(config), "--set", "averitec-dev", "--n", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["claims"] == 1 and report["members"] == ["smollm2-t0", "smollm2-t6", "smollm2-t9"]
    assert any("its ratings are noise" in note for note in report["notes"])
    assert any("3 members but 1 distinct model" in note for note in report["notes"])
    assert report["ensemble"]["veracity"]["n"] + report["ensemble"]["veracity"]["missing"] == 1
