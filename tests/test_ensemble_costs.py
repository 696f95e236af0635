"""``veritas costs`` on a ledger that the LLM resource wrote while talking to a loopback stub."""

import json

import pytest
import yaml

from dagster_project.cli import main
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.test_llm import CALL, MESSAGES


def _answers(mode, body):
    if mode == "bad":
        return 200, "not json"
    return 200, '{"category": "positive", "certainty": "certain", "justification": "ok"}'


@pytest.fixture()
def ledger_config(tmp_path, monkeypatch):
    monkeypatch.setenv("COSTS_STUB_KEY", "sk-test")
    stub = OpenAIStub(_answers)
    members = [
        EnsembleMember(name="cheap", model="openai/cheap-model", api_base=stub.base("ok"), api_key_env="COSTS_STUB_KEY",
                       input_cost_per_token=1e-6, output_cost_per_token=2e-6),
        EnsembleMember(name="dear", model="openai/dear-model", api_base=stub.base("bad"), api_key_env="COSTS_STUB_KEY",
                       input_cost_per_token=1e-5, output_cost_per_token=3e-5),
    ]
    (tmp_path / "data").mkdir()
    res = LLMResource(members=members, cache_path=str(tmp_path / "data" / "llm_cache.sqlite"))
    try:
        res.set_quarter("2025-10")  # a Dagster run sets it from its partition key
        second = [*MESSAGES[:1], {"role": "user", "content": "Another claim."}]
        for messages in (MESSAGES, MESSAGES, second):  # the repeat of MESSAGES is a cache hit
            res.complete_json("cheap", messages, stage="scored_claims", **CALL)
        res.complete_json("dear", MESSAGES, stage="normalized_claims", **CALL)  # invalid twice: 2 answers, 1 error
        res.set_quarter("2025Q3")
        res.complete_json("cheap", [*MESSAGES[:1], {"role": "user", "content": "Q3 claim."}], stage="scored_claims", **CALL)
    finally:
        stub.close()
    cfg = tmp_path / "veritas.yaml"
    cfg.write_text(yaml.safe_dump({"data_dir": "data"}))
    return str(cfg)


def test_costs_json_by_model_and_by_stage(ledger_config, capsys):
    assert main(["--config", ledger_config, "costs", "--quarter", "2025Q4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["quarter"] == "2025Q4" and report["quarters_in_ledger"] == ["2025Q3", "2025Q4"]
    cheap, dear = report["by_model"]["openai/cheap-model"], report["by_model"]["openai/dear-model"]
    # the stub reports 100 prompt and 20 completion tokens per answer
    assert (cheap["calls"], cheap["model_calls"], cheap["cache_hits"]) == (3, 2, 1)
    assert cheap["hit_rate"] == pytest.approx(1 / 3)
    assert (cheap["prompt_tokens"], cheap["completion_tokens"]) == (200, 40)
    assert cheap["cost_usd"] == pytest.approx(2 * (100 * 1e-6 + 20 * 2e-6))
    assert (dear["calls"], dear["errors"], dear["answers_received"], dear["prompt_tokens"]) == (1, 1, 2, 200)
    assert dear["cost_usd"] == pytest.approx(2 * (100 * 1e-5 + 20 * 3e-5))  # failed answers are paid for too
    assert report["by_stage"]["scored_claims"]["calls"] == 3
    assert report["by_stage"]["normalized_claims"]["cost_usd"] == pytest.approx(dear["cost_usd"])
    assert report["calls"] == 4 and report["cost_usd"] == pytest.approx(cheap["cost_usd"] + dear["cost_usd"])


def test_costs_table(ledger_config, capsys):
    assert main(["--config", ledger_config, "costs", "--quarter", "2025-10"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("LLM ledger 2025Q4")
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines() if line and not line.startswith(("-", "LLM"))}
    assert rows["openai/cheap-model"][:4] == ["3", "2", "1", "33.3%"]
    assert rows["openai/dear-model"][-1] == "1"  # errors
    assert rows["scored_claims"][:4] == ["3", "2", "1", "33.3%"]
    assert rows["normalized_claims"][6] == f"{2 * (100 * 1e-5 + 20 * 3e-5):.6f}"
    assert main(["--config", ledger_config, "costs", "--quarter", "2024Q1"]) == 0
    assert "no calls recorded (quarters in the ledger: 2025Q3, 2025Q4)" in capsys.readouterr().out
    assert main(["--config", ledger_config, "costs", "--quarter", "2025Q7"]) == 2
