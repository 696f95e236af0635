"""LLM resource against the real embedded llama.cpp server and loopback stubs of misbehaving providers."""

import json
import os
import sqlite3
import threading
import time
from typing import Literal

import pydantic
import pytest

from assets.stage.tables import llm_metadata
from dagster_project.resources.llm import (
    EnsembleMember,
    FallbackModel,
    LLMResource,
    direct_deployment,
    image_part,
    parse_json_text,
    strip_images,
)
from dagster_project.resources.local_llm import LocalModelServer, smollm2_gguf_path
from dagster_project.simulation.openai_stub import OpenAIStub
from tests.ops_support import fast_router_backoff

SCHEMA = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "enum": ["positive", "negative", "unknown"]},
        "certainty": {"type": "string", "enum": ["certain", "rather certain", "rather uncertain"]},
        "justification": {"type": "string", "maxLength": 200},
    },
    "required": ["category", "certainty", "justification"],
}


class Rating(pydantic.BaseModel):
    category: Literal["positive", "negative", "unknown"]
    certainty: Literal["certain", "rather certain", "rather uncertain"]
    justification: str = pydantic.Field(max_length=200)


MESSAGES = [
    {"role": "system", "content": "You rate claims. Reply with one JSON object only."},
    {"role": "user", "content": "Claim: The Eiffel Tower is in Paris. Rate the claim's veracity."},
]
CALL = {"schema": SCHEMA, "response_model": Rating, "template_id": "test_rating", "template_hash": "h1"}


# ---- loopback stub of an OpenAI-compatible provider -------------------------------------------
def _scripted(mode: str, body: dict):
    """ok = valid JSON, bad = malformed JSON, err = HTTP 500."""
    if mode == "err":
        return 500, {"error": {"message": "upstream exploded", "type": "server_error"}}
    if mode == "ok":
        return 200, '{"category": "negative", "certainty": "certain", "justification": "stub"}'
    return 200, '{"category": "negative", "certainty": '


@pytest.fixture(scope="module")
def stub():
    s = OpenAIStub(_scripted)
    yield s
    s.close()


def _stub_member(stub, mode, name=None, **kw) -> EnsembleMember:
    return EnsembleMember(name=name or f"stub-{mode}", model="openai/stub-model", api_base=stub.base(mode),
                          api_key_env="VERITAS_TEST_STUB_KEY", **kw)


@pytest.fixture(autouse=True)
def _stub_key(monkeypatch):
    monkeypatch.setenv("VERITAS_TEST_STUB_KEY", "sk-test")


# ---- the real embedded model ----------------------------------------------------------------
@pytest.fixture(scope="session")
def local_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("llm") / "cache.sqlite")


@pytest.fixture(scope="session")
def local_llm(local_cache):
    res = LLMResource(cache_path=local_cache)
    yield res
    res.close()


def test_smollm2_gguf_path_exists():
    path = smollm2_gguf_path()
    assert path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    assert os.path.getsize(path) > 50_000_000


def test_local_server_context_manager_leaves_no_process():
    with LocalModelServer(smollm2_gguf_path(), n_threads=2) as server:
        pid = server._proc.pid
        assert server.api_base.startswith("http://127.0.0.1:")
        assert server.api_base.endswith("/v1")
        assert server.running
    assert not server.running
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)  # the whole process group is gone


def test_default_members_are_three_local_temperatures(local_llm):
    assert local_llm.member_names() == ["smollm2-t0", "smollm2-t6", "smollm2-t9"]
    assert [(m.temperature, m.seed) for m in local_llm.members] == [(0.0, 1), (0.6, 2), (0.9, 3)]
    assert all(m.model == "local/smollm2" and m.api_base is None for m in local_llm.members)


def test_real_local_call_parses_then_hits_cache(local_llm, local_cache):
    first = local_llm.complete_json("smollm2-t0", MESSAGES, stage="rate_test", parse_attempts=3, **CALL)
    assert first.error is None, first.raw
    assert first.cache_hit is False
    assert first.parsed["category"] in {"positive", "negative", "unknown"}
    assert first.parsed["certainty"] in {"certain", "rather certain", "rather uncertain"}
    assert Rating.model_validate(first.parsed)
    assert first.prompt_tokens > 0 and first.completion_tokens > 0
    assert first.cost_usd == 0.0  # the embedded model is free
    assert local_llm._server is not None and local_llm._server.running  # started lazily, once

    second = local_llm.complete_json("smollm2-t0", MESSAGES, stage="rate_test", parse_attempts=3, **CALL)
    assert second.cache_hit is True
    assert second.parsed == first.parsed and second.raw == first.raw
    assert second.cost_usd == 0.0 and second.prompt_tokens == 0

    summary = local_llm.ledger_summary(stage="rate_test")
    assert summary["calls"] == 2 and summary["cache_hits"] == 1 and summary["hit_rate"] == 0.5
    assert summary["errors"] == 0
    assert summary["prompt_tokens"] == first.prompt_tokens
    assert summary["by_member"]["smollm2-t0"]["calls"] == 2

    # durable: a fresh resource on the same file answers from the cache without starting a server
    fresh = LLMResource(cache_path=local_cache)
    third = fresh.complete_json("smollm2-t0", MESSAGES, stage="rate_test", parse_attempts=3, **CALL)
    assert third.cache_hit is True and third.parsed == first.parsed
    assert fresh._server is None
    assert fresh.ledger_summary(stage="rate_test")["cache_hits"] == 2

    with sqlite3.connect(local_cache) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        (raw,) = conn.execute("SELECT raw FROM llm_cache WHERE template_id='test_rating'").fetchone()
    assert raw == first.raw

    # a different template hash is a different cache key
    other = local_llm.complete_json("smollm2-t0", MESSAGES, stage="rate_test2", parse_attempts=3,
                                    **{**CALL, "template_hash": "h2"})
    assert other.cache_hit is False


def test_close_stops_local_server(local_cache):
    res = LLMResource(cache_path=local_cache, members=[EnsembleMember(name="t", model="local/smollm2")])
    server = res.local_server()
    pid = server._proc.pid
    res.close()
    assert res._server is None
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)


# ---- misbehaving providers ---------------------------------------------------------------------
def test_malformed_json_is_invalid_output_and_not_cached(stub, tmp_path):
    cache = str(tmp_path / "c.sqlite")
    res = LLMResource(cache_path=cache, members=[_stub_member(stub, "bad")])
    before = stub.count("bad")
    ans = res.complete_json("stub-bad", MESSAGES, stage="s", parse_attempts=2, **CALL)
    assert ans.parsed is None
    assert ans.error.startswith("invalid_output")
    assert stub.count("bad") - before == 2  # one answer + one re-ask
    last_body = stub.requests[-1][1]
    assert last_body["messages"][-2] == {"role": "assistant", "content": '{"category": "negative", "certainty": '}
    assert "rejected" in last_body["messages"][-1]["content"]
    assert last_body["response_format"] == {"type": "json_object", "schema": SCHEMA}
    with sqlite3.connect(cache) as conn:
        cached = conn.execute("SELECT parsed_json, error, raw FROM llm_cache").fetchall()
        err, attempts, pt = conn.execute("SELECT error, attempts, prompt_tokens FROM llm_ledger").fetchone()
        outputs = conn.execute("SELECT attempt, raw, error FROM llm_outputs ORDER BY attempt").fetchall()
    assert err.startswith("invalid_output") and attempts == 2 and pt == 200
    # the settled failure is cached as a failure (parsed null), never as a coerced answer
    assert cached == [("null", err, '{"category": "negative", "certainty": ')]
    assert [(a, r) for a, r, _ in outputs] == [(1, '{"category": "negative", "certainty": ')] * 1 + [
        (2, '{"category": "negative", "certainty": ')]
    assert all(e.startswith("invalid_output") for _, _, e in outputs)
    # a re-run does not pay for it again ...
    again = res.complete_json("stub-bad", MESSAGES, stage="s", parse_attempts=1, **CALL)
    assert again.cache_hit is True and again.parsed is None and again.error == err
    assert stub.count("bad") - before == 2
    assert res.ledger_summary(stage="s")["errors"] == 2
    # ... unless failures are to be asked again
    retry = LLMResource(cache_path=cache, members=[_stub_member(stub, "bad")], retry_failed=True)
    third = retry.complete_json("stub-bad", MESSAGES, stage="s", parse_attempts=1, **CALL)
    assert third.cache_hit is False and third.parsed is None and stub.count("bad") - before == 3


def test_refusal_is_recorded_as_the_models_failure(tmp_path):
    def refuse(mode, body):
        return 200, {"content": None, "refusal": "I can't help with that."}

    s = OpenAIStub(refuse)
    try:
        res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[_stub_member(s, "no")])
        ans = res.complete_json("stub-no", MESSAGES, stage="s", parse_attempts=2, **CALL)
    finally:
        s.close()
    assert ans.parsed is None and ans.error.startswith("refusal: RefusalError: I can't help with that.")
    assert s.count("no") == 2  # asked, then re-asked once
    assert [r["refusal"] for r in json.loads(res.raw_outputs("s", "")[0]["attempts_json"])] == ["I can't help with that."] * 2


def test_fallback_model_answers_when_the_members_model_is_down(stub, tmp_path):
    member = _stub_member(stub, "err", name="primary", fallbacks=[
        FallbackModel(model="openai/backup-model", api_base=stub.base("ok"), api_key_env="VERITAS_TEST_STUB_KEY")])
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[member], num_retries=1)
    before_err, before_ok = stub.count("err"), stub.count("ok")
    with fast_router_backoff() as sleeps:
        ans = res.complete_json("primary", MESSAGES, stage="fb", **CALL)
    assert sleeps  # the Router backed off before retrying the failing model
    assert ans.error is None and ans.parsed["justification"] == "stub"
    assert ans.model == "openai/backup-model" and ans.member == "primary"
    assert stub.count("err") - before_err >= 1 and stub.count("ok") - before_ok == 1
    again = res.complete_json("primary", MESSAGES, stage="fb", **CALL)
    assert again.cache_hit and again.model == "openai/backup-model"  # the cache remembers who answered
    report = res.ledger_report()
    assert report["by_model"]["openai/backup-model"]["calls"] == 2


def test_http_500_is_transport_error_with_ledger_row(stub, tmp_path):
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[_stub_member(stub, "err")], num_retries=1)
    before = stub.count("err")
    with fast_router_backoff():
        ans = res.complete_json("stub-err", MESSAGES, stage="s", **CALL)
    assert ans.parsed is None and ans.cache_hit is False
    assert ans.error.startswith("transport:")
    assert stub.count("err") - before >= 2  # the Router retried
    summary = res.ledger_summary(stage="s")
    assert summary["calls"] == 1 and summary["errors"] == 1 and summary["cost_usd"] == 0.0


def test_cost_override_and_cache_hit_is_free(stub, tmp_path):
    member = _stub_member(stub, "ok", input_cost_per_token=1e-6, output_cost_per_token=5e-6)
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[member])
    ans = res.complete_json("stub-ok", MESSAGES, stage="cost", **CALL)
    assert ans.error is None
    assert ans.parsed == {"category": "negative", "certainty": "certain", "justification": "stub"}
    assert (ans.prompt_tokens, ans.completion_tokens) == (100, 20)
    assert ans.cost_usd == pytest.approx(100 * 1e-6 + 20 * 5e-6)
    hit = res.complete_json("stub-ok", MESSAGES, stage="cost", **CALL)
    assert hit.cache_hit and hit.cost_usd == 0.0
    summary = res.ledger_summary(stage="cost")
    assert summary["cost_usd"] == pytest.approx(2e-4)
    assert summary["calls"] == 2 and summary["cache_hits"] == 1


def test_images_only_reach_vision_members(stub, tmp_path):
    members = [_stub_member(stub, "ok", name="text-only"), _stub_member(stub, "ok", name="seeing", vision=True)]
    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=members)
    part = image_part(b"\xff\xd8\xff\xe0fakejpeg")
    assert part["image_url"]["url"].startswith("data:image/jpeg;base64,/9j/")
    msgs = [{"role": "user", "content": [{"type": "text", "text": "Describe <image:1>."}, part]}]
    res.complete_json("text-only", msgs, media_hashes=["abc"], **CALL)
    assert stub.requests[-1][1]["messages"] == [{"role": "user", "content": "Describe <image:1>."}]
    res.complete_json("seeing", msgs, media_hashes=["abc"], **CALL)
    sent = stub.requests[-1][1]["messages"][0]["content"]
    assert any(p.get("type") == "image_url" for p in sent)


def test_cache_key_ignores_api_base_and_media_order():
    a = EnsembleMember(name="a", model="openai/x", api_base="http://127.0.0.1:1/v1", seed=1)
    moved = EnsembleMember(name="a", model="openai/x", api_base="http://127.0.0.1:2/v1", seed=1)  # new port
    k = LLMResource.cache_key
    assert k(a, MESSAGES, SCHEMA, "t", "h", ["m1", "m2"]) == k(moved, MESSAGES, SCHEMA, "t", "h", ["m2", "m1"])
    # another member on the same model string may be another deployment: it never gets a's answers
    other = moved.model_copy(update={"name": "b"})
    assert k(a, MESSAGES, SCHEMA, "t", "h", []) != k(other, MESSAGES, SCHEMA, "t", "h", [])
    assert k(a, MESSAGES, SCHEMA, "t", "h", []) != k(a.model_copy(update={"seed": 2}), MESSAGES, SCHEMA, "t", "h", [])


def test_parse_json_text_strips_fences_only():
    assert parse_json_text('```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError):
        parse_json_text('Sure! {"a": 1}')
    # a raw newline inside a string (seen from the local model at high temperature) keeps its value
    assert parse_json_text('{"j": "line one\nline two"}') == {"j": "line one\nline two"}
    assert strip_images([{"role": "user", "content": "plain"}]) == [{"role": "user", "content": "plain"}]


def test_calls_on_short_lived_threads_share_a_few_cache_connections(stub, tmp_path):
    """Stages ask on threads made per question; the cache connections are pooled, not kept per thread (a
    4,000-review run once died of "Too many open files" that way)."""
    import threading

    res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[_stub_member(stub, "ok")])
    for wave in range(50):
        threads = [threading.Thread(target=res.complete_json,
                                    args=("stub-ok", [*MESSAGES, {"role": "user", "content": f"{wave}/{i}"}]),
                                    kwargs={"stage": "pool", **CALL}) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert res.ledger_summary(stage="pool")["calls"] == 200
    free, opened = res._conns
    assert len(opened) <= 5 and len(free) == len(opened)  # 4 threads at a time, plus the summary's own
    res.close()
    assert res._conns is None


def test_openai_compatible_members_go_through_the_sdk_with_the_request_litellm_would_send(tmp_path):
    """OpenAIDirect (llm.transport: auto, for a member on an OpenAI-compatible server of its own, without fallbacks) sends the
    body litellm's Router sends for the same call, and gets the same answer, tokens and cost; a member with fallbacks,
    and OpenAI's own models (whose parameters litellm maps per model), keep the Router."""
    s = OpenAIStub(_scripted)
    try:
        member = _stub_member(s, "ok", input_cost_per_token=1e-6, output_cost_per_token=5e-6, seed=7, max_tokens=99)
        answers = {}
        for transport in ("auto", "litellm"):
            res = LLMResource(cache_path=str(tmp_path / f"{transport}.sqlite"), members=[member], transport=transport)
            answers[transport] = res.complete_json("stub-ok", MESSAGES, stage="s", **CALL)
            assert (type(res._routers["stub-ok"]).__name__ == "OpenAIDirect") == (transport == "auto")
        direct, routed = (body for _, body in s.requests)
        assert direct == routed and direct["model"] == "stub-model" and direct["seed"] == 7
        assert direct["max_tokens"] == 99 and direct["response_format"]["type"] == "json_object"
        keep = ("parsed", "raw", "error", "model", "prompt_tokens", "completion_tokens", "cost_usd")
        assert {k: getattr(answers["auto"], k) for k in keep} == {k: getattr(answers["litellm"], k) for k in keep}
        assert answers["auto"].cost_usd == pytest.approx(100 * 1e-6 + 20 * 5e-6)
        fb = _stub_member(s, "ok", name="with-fallback", fallbacks=[FallbackModel(model="openai/b", api_base=s.base("ok"))])
        res = LLMResource(cache_path=str(tmp_path / "fb.sqlite"), members=[fb], transport="auto")
        assert type(res._router(fb)).__name__ == "Router"
        assert not direct_deployment({"model": "openai/gpt-4o-mini"}, [])
    finally:
        s.close()


def test_the_sdk_transport_waits_as_a_429_asks_and_retries_5xx(tmp_path):
    seen: list[str] = []

    def flaky(mode, body):
        seen.append(mode)
        if mode == "busy" and seen.count("busy") == 1:
            return 429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"Retry-After": "0.3"}
        if mode == "busy" and seen.count("busy") == 2:
            return 503, {"error": {"message": "overloaded", "type": "server_error"}}
        return _scripted("ok", body)

    s = OpenAIStub(flaky)
    try:
        res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[_stub_member(s, "busy")], num_retries=2,
                          transport="auto")
        with fast_router_backoff() as sleeps:
            ans = res.complete_json("stub-busy", MESSAGES, stage="s", **CALL)
        assert ans.error is None and ans.parsed["justification"] == "stub" and seen == ["busy"] * 3
        assert sleeps[0] == pytest.approx(0.3) and len(sleeps) == 2  # the Retry-After, then a backoff
        seen.clear()
        res = LLMResource(cache_path=str(tmp_path / "d.sqlite"), members=[_stub_member(s, "busy")], num_retries=0,
                          transport="auto")
        ans = res.complete_json("stub-busy", MESSAGES, stage="s", **CALL)
        assert ans.error.startswith("transport: RateLimitError") and seen == ["busy"]
    finally:
        s.close()


@pytest.mark.parametrize("transport", ["auto", "litellm"])
def test_a_request_unanswered_past_hedge_after_s_is_sent_again_and_the_first_answer_wins(tmp_path, transport):
    """The first request of a question hangs (as a stuck connection does); with hedge_after_s the same request goes out
    again beside it and its answer returns long before the hung one would; the re-send is counted per member. Without
    it, the call waits for the hung request. When both fail, the call fails with the error of the first."""
    seen: list[str] = []
    hung: list[str] = []
    hang = threading.Event()

    def stuck_once(mode, body):
        seen.append(mode)
        if mode == "dead":  # the first request fails late (after the re-send went out), the re-send at once
            first = seen.count("dead") == 1
            time.sleep(1.0 if first else 0)
            return 400, {"error": {"message": "first" if first else "second", "type": "invalid_request_error"}}
        if not hung:
            hung.append(mode)
            hang.wait(20)  # the hung request, released at the end of the test
        return _scripted("ok", body)

    s = OpenAIStub(stuck_once)
    try:
        res = LLMResource(cache_path=str(tmp_path / "c.sqlite"), members=[_stub_member(s, "m")], num_retries=0,
                          transport=transport, hedge_after_s=0.5)
        res._run_id = "run-1"
        t0 = time.monotonic()
        ans = res.complete_json("stub-m", MESSAGES, stage="s", **CALL)
        took = time.monotonic() - t0
        assert ans.error is None and ans.parsed["justification"] == "stub" and seen == ["m", "m"]
        assert 0.5 <= took < 10, took  # the re-send's answer, not the hung request's (released after 20 s)
        assert res.hedged("s") == {"stub-m": 1} and res.hedged("other") == {}
        assert llm_metadata(res, "s", "run-1")["llm/hedged/stub-m"] == 1
        # the hung request's thread does not hold up the process's exit (nobody waits for its answer)
        hedging = [t for t in threading.enumerate() if t.name.startswith("llm-hedge")]
        assert hedging and all(t.daemon for t in hedging)
        # an answer within hedge_after_s: one request, no re-send
        seen.clear()
        assert res.complete_json("stub-m", MESSAGES + [{"role": "user", "content": "again"}], stage="s",
                                 **CALL).error is None
        assert seen == ["m"] and res.hedged("s") == {"stub-m": 1}
        # both requests fail: the first's error
        dead = LLMResource(cache_path=str(tmp_path / "d.sqlite"), members=[_stub_member(s, "dead")], num_retries=0,
                           transport=transport, hedge_after_s=0.5)
        error = dead.complete_json("stub-dead", MESSAGES, stage="s", **CALL).error
        assert error.startswith("transport: BadRequest") and "first" in error and seen.count("dead") == 2
    finally:
        hang.set()
        s.close()
