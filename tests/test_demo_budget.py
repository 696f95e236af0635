"""What the demo config asks of a slow embedded model: a cap on the justifications it writes (sent in the answer
schema, which llama.cpp turns into a grammar) and a cap on the claims of a quarter that reach the model stages."""

import json

import pytest

from assets.claims.normalized_claims import normalize_all
from dagster_project.resources.media import MediaStore
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.stage_settings import ClaimRules, ErrorBudgetSettings, NormalizeSettings
from schemas.answers import MediaRatingAnswer
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.test_ensemble_e2e import article, correct_answer, review


@pytest.fixture()
def stub():
    s = OpenAIStub(lambda mode, body: (200, json.dumps(correct_answer(body))))
    yield s
    s.close()


def member(stub, name: str, **extra) -> EnsembleMember:
    return EnsembleMember(name=name, model="openai/scripted", api_base=stub.base(name), api_key_env="DEMO_STUB_KEY",
                          context_window=8192, **extra)


def sent_justification_limits(body: dict) -> list[int]:
    schema = body["response_format"]["schema"]
    return [d["properties"]["justification"]["maxLength"] for d in schema["$defs"].values()
            if "justification" in d.get("properties", {})]


def test_the_justification_cap_reaches_the_model_and_the_cache_key(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_STUB_KEY", "sk-test")
    capped, plain = member(stub, "capped", max_justification_chars=80), member(stub, "plain")
    llm = LLMResource(members=[capped, plain], cache_path=str(tmp_path / "cache.sqlite"))
    schema = MediaRatingAnswer.model_json_schema()
    messages = [{"role": "system", "content": "You rate media."}, {"role": "user", "content": 'dated 2020):\n"x"\n'}]
    for name in ("capped", "plain"):
        llm.complete_json(name, messages, schema, MediaRatingAnswer, template_id="rate_media", template_hash="h")
    limits = {mode: sent_justification_limits(body) for mode, body in stub.requests}
    assert limits == {"capped": [80], "plain": [600]}
    # the caller's schema is left as it was; the cap is part of what the answer is cached under
    assert schema == MediaRatingAnswer.model_json_schema()
    key = LLMResource.cache_key
    assert key(capped, messages, capped.answer_schema(schema), "t", "h", []) != key(capped, messages, schema, "t", "h", [])
    tags = capped.answer_schema(schema)["$defs"]["PropertyAnswer"]["properties"]["tags"]
    assert tags == schema["$defs"]["PropertyAnswer"]["properties"]["tags"]  # other strings keep their limits


def test_max_claims_drops_the_rest_before_any_model_call(stub, tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_STUB_KEY", "sk-test")
    claims = [review("r1", "Hot steam cures the virus"), review("r2", "The moon landing was filmed in a studio"),
              review("r3", "Vaccines contain microchips")]
    articles = {c.review_id: article(c.review_id, f"The fact-checkers looked at {c.claim_text}. " * 20) for c in claims}
    llm = LLMResource(members=[member(stub, "alpha")], cache_path=str(tmp_path / "cache.sqlite"))
    out, stats = normalize_all(claims, articles, llm, NormalizeSettings(max_claims=2), ClaimRules(), ErrorBudgetSettings(),
                               MediaStore(tmp_path / "media"))
    assert [c.review_id for c in out] == ["r1", "r2"]
    assert stats.drops == {"over_max_claims": 1}
    asked = [m["content"] for _, body in stub.requests for m in body["messages"]]
    assert len(stub.requests) == 2 and not any("microchips" in text for text in asked)
