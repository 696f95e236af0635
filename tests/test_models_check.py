"""Issue 14: ``veritas models check`` and the shipped three-provider ``veritas.real.yaml``.

Each provider's api_base points at one loopback server that answers in that provider's own format and records
the requests, so litellm's real request translation (image parts included) is what is checked. The embedded
model is checked through the CLI beside a loopback member whose answers are not JSON."""

import json

import pytest
import yaml

from assets.release.provenance import model_diversity
from dagster_project.cli import main
from dagster_project.commands.models import check_all
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.resources.llm import EnsembleMember, LLMResource, default_members
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.provider_stub import ProviderStub

KEYS = {"OPENAI_API_KEY": "sk-openai-test", "ANTHROPIC_API_KEY": "sk-anthropic-test", "GEMINI_API_KEY": "sk-gemini-test"}
API_PATH = {"openai": "/v1", "anthropic": "", "gemini": ""}  # what litellm appends differs per provider


def _said(provider, body):
    return {"colour": "red"} if "colour" in json.dumps(body) else {"answer": "yes"}


@pytest.fixture()
def real_ensemble(tmp_path, monkeypatch):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    stub = ProviderStub(_said)
    members = [EnsembleMember(**{**m, "api_base": stub.base + API_PATH[m["model"].split("/")[0]]})
               for m in load_config(PROJECT_ROOT / "veritas.real.yaml")["llm"]["members"]]
    llm = LLMResource(members=members, cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)
    yield llm, stub
    llm.close()
    stub.close()


def test_real_yaml_is_three_providers_with_vision_and_env_keys():
    llm = load_config(PROJECT_ROOT / "veritas.real.yaml")["llm"]
    members = llm["members"]
    assert [m["model"].split("/")[0] for m in members] == ["openai", "anthropic", "gemini"]
    assert all(m["vision"] is True for m in members)
    assert [m["api_key_env"] for m in members] == list(KEYS)
    assert llm["budget_usd"] == 50.0
    assert model_diversity(members) == {"members": 3, "distinct_models": 3, "models_distinct": True, "note": ""}


def test_demo_manifest_says_members_are_one_model():
    diversity = model_diversity([m.model_dump() for m in default_members()])
    assert diversity["distinct_models"] == 1 and diversity["models_distinct"] is False
    assert diversity["note"] == "3 members share 1 model(s): their agreement is not that of independent raters"


def test_each_provider_gets_its_own_request_shape(real_ensemble):
    llm, stub = real_ensemble
    rows = {r["member"]: r for r in check_all(llm)}
    assert all(r["passed"] and r["json"] == "ok" and r["correct"] and r["vision"] == "ok" for r in rows.values())
    # prices and context windows from litellm's bundled map
    assert (rows["gpt-4o-mini"]["usd_per_m_input"], rows["gpt-4o-mini"]["usd_per_m_output"],
            rows["gpt-4o-mini"]["context_window"]) == (0.15, 0.6, 128000)
    assert (rows["claude-haiku"]["usd_per_m_input"], rows["claude-haiku"]["context_window"]) == (1.0, 200000)
    assert (rows["gemini-flash"]["usd_per_m_input"], rows["gemini-flash"]["context_window"]) == (0.1, 1048576)
    # OpenAI: bearer key, chat/completions, json_schema response format, image_url part with a JPEG data URL
    (text, image) = stub.of("openai")
    assert text[0] == "/v1/chat/completions" and text[1]["authorization"] == "Bearer sk-openai-test"
    assert text[2]["model"] == "gpt-4o-mini" and text[2]["response_format"]["type"] == "json_schema"
    part = image[2]["messages"][-1]["content"][1]
    assert part["type"] == "image_url" and part["image_url"]["url"].startswith("data:image/jpeg;base64,/9j/")
    # Anthropic: x-api-key, /v1/messages, system apart, native structured output (output_format), a base64 image
    (text, image) = stub.of("anthropic")
    assert text[0] == "/v1/messages" and text[1]["x-api-key"] == "sk-anthropic-test"
    assert text[2]["model"] == "claude-haiku-4-5" and text[2]["system"][0]["text"] == "Reply with one JSON object only."
    schema = text[2]["output_format"]["schema"]
    assert text[2]["output_format"]["type"] == "json_schema" and schema["required"] == ["answer"]
    assert schema["additionalProperties"] is False and "tools" not in text[2]
    block = image[2]["messages"][-1]["content"][1]
    assert block["type"] == "image" and block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == "image/jpeg" and block["source"]["data"].startswith("/9j/")
    # Google AI Studio: x-goog-api-key, generateContent, JSON mime type and schema, inline_data image part
    (text, image) = stub.of("gemini")
    assert text[0] == "/models/gemini-2.5-flash-lite:generateContent" and text[1]["x-goog-api-key"] == "sk-gemini-test"
    config = text[2]["generationConfig"]
    assert config["response_mime_type"] == "application/json" and config["response_json_schema"]["required"] == ["answer"]
    inline = image[2]["contents"][-1]["parts"][-1]["inline_data"]
    assert inline["mime_type"] == "image/jpeg" and inline["data"].startswith("/9j/")
    assert len(stub.requests) == 6  # one text and one image request per member, nothing from the cache


def test_cli_check_embedded_model_and_a_member_without_json(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CHECK_STUB_KEY", "sk-test")
    stub = OpenAIStub(lambda mode, body: (200, "Sure! The answer is yes."))
    config = tmp_path / "veritas.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "llm": {"members": [
        {"name": "embedded", "model": "local/smollm2"},
        {"name": "chatty", "model": "openai/chatty-model", "api_base": stub.base("chatty"),
         "api_key_env": "CHECK_STUB_KEY", "input_cost_per_token": 2e-6, "output_cost_per_token": 5e-6},
    ]}}))
    try:
        assert main(["models", "check", "--config", str(config), "--json"]) == 1  # one member failed
    finally:
        stub.close()
    rows = {r["member"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["embedded"]["json"] == "ok" and rows["embedded"]["passed"] is True
    assert (rows["embedded"]["usd_per_m_input"], rows["embedded"]["context_window"]) == (0.0, 4096)
    assert rows["embedded"]["vision"] == "not configured"
    assert rows["chatty"]["json"] == "invalid JSON answer" and rows["chatty"]["passed"] is False
    assert (rows["chatty"]["usd_per_m_input"], rows["chatty"]["usd_per_m_output"]) == (2.0, 5.0)
    assert rows["chatty"]["cost_usd"] == pytest.approx(100 * 2e-6 + 20 * 5e-6)  # one answer, no re-ask
