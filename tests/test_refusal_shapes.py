"""Issue 48, section 1: refusals as the providers send them.

Each provider's refusal, recorded in its own wire format (tests/fixtures/provider_refusals/, sources in
tests/fixtures/README.md), is served from a loopback server and asked for through the LLM resource with the provider's
real model prefix, so litellm's (or the openai SDK's) parsing runs as it does against the provider: every shape is
counted as a refusal, never as an invalid answer or a transport error. Then what the stages make of it: stage 5's
media filter asks the next member after a content-policy 400, stage 7 counts its re-score's failed answers per member
and property under the error budget, and a claim lost to failed answers is blamed on the failure that lost it."""

import copy
import json
import threading
from collections.abc import Callable
from datetime import date
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pydantic
import pytest

from assets.claims import scored_claims as stage6
from assets.claims.normalized_claims import ask_filter, filter_order
from assets.claims.rectified_claims import rectify_all
from assets.ensemble.scoring import losing_failure, score_claim
from assets.rules.failed_answers import FailedAnswer, failure_kind
from assets.stage.record_errors import ErrorBudgetExceeded
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.llm.refusals import error_refusal, response_refusal, text_refusal
from dagster_project.stage_settings import ClaimRules, DemandSettings, ErrorBudgetSettings, ScoreSettings
from schemas.records import Article, ClaimAppearances, Medium, NormalizedClaim
from tests.test_rating_flow import STAGE6, STAGE7, settings
from tests.test_release import ORDER_KEY

FIXTURES = Path(__file__).parent / "fixtures" / "provider_refusals"
KEYS = {"OPENAI_API_KEY": "sk-openai-test", "ANTHROPIC_API_KEY": "sk-anthropic-test", "GEMINI_API_KEY": "sk-gemini",
        "AZURE_API_KEY": "azure-test", "MISTRAL_API_KEY": "mistral-test", "LOCAL_KEY": "sk-local"}


def recorded(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


# (status, body) -> the member's whole answer; a route may also look at the request
Route = Callable[[str, dict], tuple[int, dict]]


class Replay:
    """Answers POST /<route>/... on 127.0.0.1 with ``routes[route](path, body)``; every request is recorded."""

    def __init__(self, routes: dict[str, Route]):
        self.routes, self.requests = routes, []
        replay = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                route = self.path.strip("/").split("/")[0]
                replay.requests.append((route, self.path, body))
                status, obj = replay.routes[route](self.path, body)
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def base(self, route: str) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/{route}"

    def paths(self, route: str) -> list[str]:
        return [path for r, path, _ in self.requests if r == route]

    def close(self) -> None:
        self.httpd.shutdown()


@pytest.fixture
def replay(monkeypatch):
    for k, v in KEYS.items():
        monkeypatch.setenv(k, v)
    servers: list[Replay] = []

    def start(routes: dict[str, Route]) -> Replay:
        servers.append(Replay(routes))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def fixed(name: str, status: int = 200) -> Route:
    return lambda path, body: (status, recorded(name))


def chat_answer(content: str) -> dict:
    """The recorded llama.cpp server answer with ``content`` as its message: an OpenAI-compatible server's reply."""
    body = recorded("llamacpp_plain_text_refusal.json")
    body["choices"][0]["message"]["content"] = content
    return body


def answers_schema(path: str, body: dict) -> tuple[int, dict]:
    """A valid answer to the prompts these tests ask: a media filter verdict, a rating, a rewrite or its check."""
    system = body["messages"][0]["content"]
    fmt = body.get("response_format") or {}
    props = (fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema") or {}).get("properties", {})
    if "medium_1" in props:
        said = {f"medium_{i}": {"keep": "yes", "reason": "part_of_claim"} for i in range(1, len(props) + 1)}
    elif "You turn a compromised claim" in system:
        said = {"claim": REWRITE}
    elif "You check a rewritten claim" in system:
        said = {"consistent": "yes", "shareable": "yes", "critique": ""}
    else:
        said = {"category": "negative", "certainty": "certain", "justification": "The article says otherwise.",
                "tags": []}
    return 200, chat_answer(json.dumps(said))


class Rating(pydantic.BaseModel):
    category: str
    certainty: str
    justification: str


SCHEMA = {"type": "object", "required": ["category", "certainty", "justification"],
          "properties": {"category": {"type": "string", "enum": ["positive", "negative", "unknown"]},
                         "certainty": {"type": "string"}, "justification": {"type": "string", "maxLength": 200}}}
MESSAGES = [{"role": "system", "content": "You rate claims. Reply with one JSON object only."},
            {"role": "user", "content": "Claim: The Eiffel Tower is in Paris. Rate the claim's veracity."}]


def ask_one(replay: Replay, tmp_path, model: str, route: str, suffix: str = "", transport: str = "auto",
            key_env: str | None = None):
    member = EnsembleMember(name="m", model=model, api_base=replay.base(route) + suffix, api_key_env=key_env)
    llm = LLMResource(members=[member], cache_path=str(tmp_path / "cache.sqlite"), num_retries=0, transport=transport)
    try:
        answer = llm.complete_json("m", MESSAGES, SCHEMA, Rating, template_id="t", template_hash="h", stage="s")
        return answer, llm.raw_outputs("s", "")
    finally:
        llm.close()


# fixture, HTTP status, model, api_base suffix, transport, the provider's path, the reason the error names
SHAPES = [
    ("anthropic_stop_reason_refusal.json", 200, "anthropic/claude-haiku-4-5", "", "auto", "/v1/messages",
     "This request was refused due to policy."),
    ("anthropic_refusal_without_explanation.json", 200, "anthropic/claude-haiku-4-5", "", "auto", "/v1/messages",
     "stop_reason refusal"),
    ("gemini_prompt_blocked.json", 200, "gemini/gemini-2.0-flash", "", "auto",
     "/models/gemini-2.0-flash:generateContent", "finish_reason content_filter"),
    ("gemini_finish_safety.json", 200, "gemini/gemini-2.0-flash", "", "auto",
     "/models/gemini-2.0-flash:generateContent", "finish_reason content_filter"),
    ("azure_finish_content_filter.json", 200, "azure/gpt-4o", "", "auto", "/openai/deployments/gpt-4o/chat/completions",
     "violence (medium)"),
    ("azure_400_content_filter.json", 400, "azure/gpt-4o", "", "auto", "/openai/deployments/gpt-4o/chat/completions",
     "sexual (high)"),
    ("openai_400_content_policy_violation.json", 400, "openai/gpt-4o-mini", "/v1", "litellm", "/v1/chat/completions",
     "rejected as a result of our safety system"),
    ("openai_400_invalid_prompt.json", 400, "openai/gpt-4o-mini", "/v1", "litellm", "/v1/chat/completions",
     "flagged as potentially violating our usage policy"),
    ("azure_finish_content_filter.json", 200, "openai/gpt-4o", "/v1", "litellm", "/v1/chat/completions",
     "violence (medium)"),
    ("mistral_plain_text_refusal.json", 200, "mistral/mistral-large-latest", "/v1", "auto", "/v1/chat/completions",
     "I'm sorry, but I can't help with rating this claim."),
    # a local OpenAI-compatible server, through the openai SDK (OpenAIDirect): its answers and its 400s
    ("llamacpp_plain_text_refusal.json", 200, "local/smollm2", "/v1", "auto", "/v1/chat/completions",
     "Es tut mir leid"),
    ("azure_finish_content_filter.json", 200, "local/smollm2", "/v1", "auto", "/v1/chat/completions",
     "violence (medium)"),
    ("openai_400_content_policy_violation.json", 400, "local/smollm2", "/v1", "auto", "/v1/chat/completions",
     "rejected as a result of our safety system"),
    ("azure_400_content_filter.json", 400, "local/smollm2", "/v1", "auto", "/v1/chat/completions", "sexual (high)"),
]


@pytest.mark.parametrize("name, status, model, suffix, transport, path, reason", SHAPES,
                         ids=[f"{s[0].removesuffix('.json')}-{s[2].split('/')[0]}-{s[4]}" for s in SHAPES])
def test_each_providers_refusal_is_counted_as_a_refusal(replay, tmp_path, name, status, model, suffix, transport,
                                                        path, reason):
    server = replay({"p": fixed(name, status)})
    answer, outputs = ask_one(server, tmp_path, model, "p", suffix, transport,
                              "LOCAL_KEY" if model.startswith("local/") else None)
    assert [p.split("?")[0] for p in server.paths("p")][0].endswith(path)  # the provider's own route was asked
    assert answer.parsed is None and failure_kind(answer.error) == "refusal", answer.error
    assert reason in answer.error
    tried = json.loads(outputs[0]["attempts_json"])
    assert all(reason in t["refusal"] for t in tried) and all(t["error"].startswith("refusal") for t in tried)
    # a refused request is not sent again (the same prompt would be refused); a refused answer is re-asked once
    assert len(server.paths("p")) == (1 if status == 400 else 2)


def test_a_refusal_is_cached_as_the_models_failure_not_asked_again(replay, tmp_path):
    server = replay({"p": fixed("azure_400_content_filter.json", 400)})
    first, _ = ask_one(server, tmp_path, "azure/gpt-4o", "p")
    again, _ = ask_one(server, tmp_path, "azure/gpt-4o", "p")
    assert again.cache_hit and again.error == first.error and len(server.paths("p")) == 1


@pytest.mark.parametrize("content, kind", [
    # the JSON asked for is an answer, whatever its words say
    ('{"category": "unknown", "certainty": "unknown", "justification": "I cannot tell from the article."}', None),
    ("I'm sorry, but I cannot rate this claim.", "refusal"),
    ("```json\nI can't help with that.\n```", "invalid_output"),  # not the opening of the answer
    ('{"category": "negative", "certainty": ', "invalid_output"),
    ("The claim is false.", "invalid_output"),
])
def test_plain_text_counts_as_a_refusal_only_when_it_is_not_the_json_asked_for(replay, tmp_path, content, kind):
    server = replay({"p": lambda path, body: (200, chat_answer(content))})
    answer, _ = ask_one(server, tmp_path, "local/smollm2", "p", "/v1", key_env="LOCAL_KEY")
    assert (answer.error is None) if kind is None else failure_kind(answer.error) == kind


@pytest.mark.parametrize("text, refusal", [
    ("I'm sorry, but I can't help with that.", True), ("I can’t assist with this request.", True),
    ("  \"Sorry, I cannot rate claims about violence.", True), ("**I cannot** provide a rating.", True),
    ("Es tut mir leid, dabei kann ich nicht helfen.", True), ("Je suis désolé, je ne peux pas répondre.", True),
    ("Lo siento, no puedo ayudar con eso.", True), ("Desculpe, não posso ajudar com isso.", True),
    ("Mi dispiace, non posso aiutarti.", True), ("عذرًا، لا أستطيع المساعدة في ذلك.", True),
    ("抱歉，我无法协助。", True), ("Извините, я не могу помочь.", True),
    ("The article says the photo is from 2019.", False), ("Sorrow filled the streets.", False),
    ('{"claim": "I cannot believe it"}', False), ("", False),
])
def test_refusal_openings_in_the_benchmarks_languages(text, refusal):
    assert bool(text_refusal(text)) is refusal


def test_an_answer_without_a_refusal_signal_is_none_of_them():
    class Plain(Exception):
        status_code = 400
        body = {"error": {"code": "context_length_exceeded", "message": "too long"}}

    assert error_refusal(Plain("too long")) == "" and response_refusal(object()) == ""


# ---- stage 5: the media filter asks the next member after a refusal ---------------------------------------------
def test_the_media_filter_asks_the_next_member_after_a_content_policy_400(replay, tmp_path):
    medium = Medium(medium_id="m" * 64, kind="image", path="images/m.jpg", width=640, height=480, alt="the photo",
                    origin="appearance")
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", quarter="2020Q2", language="en",
                             claim_text="This photo shows a mast burning in Hong Kong", media=[medium])
    server = replay({"azure": fixed("azure_400_content_filter.json", 400), "local": answers_schema})
    drawn = LLMResource(members=[EnsembleMember(name=n, model="x/y") for n in "ab"], cache_path=str(tmp_path / "d"))
    names = filter_order(drawn, claim.review_id, [medium.medium_id])  # the refusing member gets the name asked first
    members = [EnsembleMember(name=names[0], model="azure/gpt-4o", api_base=server.base("azure")),
               EnsembleMember(name=names[1], model="local/smollm2", api_base=server.base("local") + "/v1",
                              api_key_env="LOCAL_KEY")]
    llm = LLMResource(members=members, cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)
    member, answer = ask_filter(claim, [medium], llm, None)
    assert llm.member(member).model == "local/smollm2" and answer == {"medium_1": {"keep": "yes",
                                                                                   "reason": "part_of_claim"}}
    assert len(server.paths("azure")) == 1 and len(server.paths("local")) == 1


# ---- a claim lost to failed answers is blamed on the failure that lost it -------------------------------------------
def text_claim(text: str, i: int = 1) -> NormalizedClaim:
    return NormalizedClaim(claim_id=f"c{i}", review_id=f"r{i}", quarter="2020Q2", text=text, original_text=text,
                           normalization="llm", language="en", claim_date=date(2020, 5, 1),
                           review_url=f"https://fullfact.org/{i}")


ARTICLE_TEXT = "The fact-checkers found that hot steam does not cure the virus, and kettles clean with steam. " * 20


def panel(server: Replay, tmp_path, routes: list[str], cache: str = "cache.sqlite") -> LLMResource:
    """Members named after their routes: 'gemini' a Gemini model, every other an OpenAI-compatible server."""
    def member(route: str) -> EnsembleMember:
        if route.startswith("gemini"):
            return EnsembleMember(name=route, model="gemini/gemini-2.0-flash", api_base=server.base(route),
                                  context_window=8192)
        return EnsembleMember(name=route, model="local/smollm2", api_base=server.base(route) + "/v1",
                              api_key_env="LOCAL_KEY", context_window=8192)

    return LLMResource(members=[member(r) for r in routes], cache_path=str(tmp_path / cache), num_retries=0)


def test_a_lost_claim_names_the_failure_that_lost_it_not_the_first_seen(replay, tmp_path):
    """Three raters, three ratings needed: 'gemini' refuses veracity (Gemini's SAFETY finish), which lowers the need
    to two; then 'broken' answers no JSON, leaving one: the invalid answer lost the claim, not the refusal."""
    server = replay({"gemini": fixed("gemini_finish_safety.json"),
                     "broken": lambda path, body: (200, chat_answer('{"category": "negative", "certainty": ')),
                     "ok": answers_schema})
    llm = panel(server, tmp_path, ["gemini", "broken", "ok"])
    claims = [text_claim("Hot steam cures the virus in one day.")]
    articles = {"r1": Article(review_id="r1", review_url="https://fullfact.org/1", final_url="https://fullfact.org/1",
                              raw_chars=2000, text=ARTICLE_TEXT)}
    budget = ErrorBudgetSettings(error_budget_share=0.0, error_budget_min=0)
    with pytest.raises(ErrorBudgetExceeded) as lost:
        stage6.score_all(claims, articles, llm, **settings(STAGE6, demand=DemandSettings(score="all"),
                                                          error_budget=budget), media_store=None, key=ORDER_KEY)
    assert "failed_answer:invalid_output:broken x1" in str(lost.value)
    assert "the other failures there: gemini refusal" in str(lost.value)


@pytest.mark.parametrize("kinds, members, lost", [
    (("refusal", "invalid_output"), 3, 1),  # the refusal lowered the need; the invalid answer went below it
    (("invalid_output", "refusal"), 3, 0),  # the invalid answer alone went below three
    (("refusal", "refusal"), 3, 1),  # one refusal is allowed (down to two ratings), the second is not
    (("timeout",), 4, 0),  # four members, three needed: nothing lost by it, so the last failure is named
])
def test_losing_failure_follows_the_refusal_rule(kinds, members, lost):
    failed = [FailedAnswer(f"m{i}", ("veracity",), -1, kind, kind) for i, kind in enumerate(kinds)]
    assert losing_failure("incomplete_ratings:veracity", failed, members, 3, 2) is failed[lost]


# ---- stage 7: the re-score's failed answers are counted like stage 6's -----------------------------------------------
CLAIM = "Hot steam cures the virus in one day."
REWRITE = "Hot steam cleans the kettle in one day."


def test_the_rescores_failed_answers_are_counted_per_member_and_property_under_the_budget(replay, tmp_path):
    """The rewrite's re-score: 'filtered' is refused by its content filter (Azure's recorded answer), 'broken'
    answers no JSON; the rewrite is lost with them. Both are counted per member and property, and the lost rewrite
    comes under the error budget naming the failure that lost it, as stage 6 does."""
    def rating_the_rewrite(fails: Route) -> Route:
        def route(path, body):  # the writer's and the checker's questions are answered; ratings of the rewrite fail
            asks = body["messages"][0]["content"]
            rates_rewrite = REWRITE in json.dumps(body["messages"][1:])  # the re-ask too
            if rates_rewrite and "You turn a compromised" not in asks and "You check a rewritten" not in asks:
                return fails(path, body)
            return answers_schema(path, body)
        return route

    server = replay({"writer": answers_schema, "w2": answers_schema, "w3": answers_schema,
                     "broken": rating_the_rewrite(lambda path, body: (200, chat_answer("The rewrite looks fine."))),
                     "filtered": rating_the_rewrite(fixed("azure_finish_content_filter.json"))})
    original, why = score_claim(text_claim(CLAIM), "Hot steam does not cure the virus.",
                                panel(server, tmp_path, ["writer", "w2", "w3"], "original.sqlite"), ScoreSettings(),
                                ClaimRules(), None)
    assert original is not None and original.integrity.label == "compromised", why
    llm = panel(server, tmp_path, ["writer", "broken", "filtered"])
    articles = {"r1": Article(review_id="r1", review_url="https://fullfact.org/1", final_url="https://fullfact.org/1",
                              raw_chars=2000, text=ARTICLE_TEXT)}
    every = settings(STAGE7, demand=DemandSettings(rectify="all"))
    out, stats = rectify_all([original], articles, llm, **every, media_store=None, key=ORDER_KEY)
    assert [c.variant for c in out] == ["original"]
    assert stats.extra["not_rectified/rescore_incomplete_ratings:veracity"] == 1
    assert stats.extra["failed_answers/refusal/filtered/veracity"] == 1
    assert stats.extra["failed_answers/invalid_output/broken/veracity"] == 1
    assert stats.extra["failed_answers/rewrites_lost"] == 1
    # past the budget the stage stops, naming the failure that lost the rewrite
    tight = {**every, "error_budget": ErrorBudgetSettings(error_budget_share=0.0, error_budget_min=0)}
    with pytest.raises(ErrorBudgetExceeded, match=r"failed_answer:invalid_output:broken.*the rewrite is dropped"):
        rectify_all([copy.deepcopy(original)], articles, llm, **tight, media_store=None, key=ORDER_KEY)
