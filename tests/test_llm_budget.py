"""Issue 14: ``llm.budget_usd`` stops the model stages cleanly when a quarter's ledger reaches it; a resumed run
goes on from the cache. The provider is a loopback stub (100 prompt + 20 completion tokens an answer)."""

import pytest

from assets.claims.scored_claims import score_all
from dagster_project.resources.llm import BudgetExceeded, EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import OpenAIStub
from dagster_project.stage_settings import ScoreSettings
from schemas.records import Article, NormalizedClaim
from tests.ops_support import rating, rating_reply
from tests.test_llm import CALL, MESSAGES
from tests.test_rating_flow import STAGE6, settings
from tests.test_release import ORDER_KEY

PRICE = {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6}
PER_CALL = 100 * 1e-6 + 20 * 2e-6  # 0.00014 USD


def _answer(mode, body):
    user = body["messages"][-1]["content"]
    if "Rate the claim" in user:
        return rating_reply(user, rating("positive"), rating("positive"))
    return 200, '{"category": "negative", "certainty": "certain", "justification": "stub"}'


@pytest.fixture()
def stub(monkeypatch):
    monkeypatch.setenv("BUDGET_STUB_KEY", "sk-test")
    s = OpenAIStub(_answer)
    yield s
    s.close()


def _llm(stub, tmp_path, budget):
    member = EnsembleMember(name="paid", model="openai/paid-model", api_base=stub.base("ok"), context_window=8192,
                            api_key_env="BUDGET_STUB_KEY", **PRICE)
    llm = LLMResource(members=[member], cache_path=str(tmp_path / "cache.sqlite"), budget_usd=budget)
    llm.set_quarter("2025Q4")
    return llm


def _ask(llm, n):
    return llm.complete_json("paid", [MESSAGES[0], {"role": "user", "content": f"claim {n}"}], stage="scored_claims", **CALL)


def test_budget_stops_before_the_next_paid_call_and_cache_still_answers(stub, tmp_path):
    llm = _llm(stub, tmp_path, budget=3 * PER_CALL - 1e-6)  # three calls fit under it, the fourth does not start
    for n in range(3):
        assert _ask(llm, n).error is None
    assert llm.quarter_spend() == pytest.approx(3 * PER_CALL)
    with pytest.raises(BudgetExceeded, match=r"quarter 2025Q4 has spent \$0\.0004 of llm\.budget_usd=\$0\.0004"):
        _ask(llm, 3)
    assert stub.count("ok") == 3  # the fourth request never reached the provider
    again = _ask(llm, 0)  # answered before: the cache serves it for free
    assert again.cache_hit and again.error is None
    llm.set_quarter("2025Q3")  # another quarter has its own budget
    assert _ask(llm, 3).error is None and stub.count("ok") == 4


def _claims(n):
    return [NormalizedClaim(claim_id=f"c{i}", review_id=f"r{i}", quarter="2025Q4", text=f"Claim number {i} is true.",
                            original_text="x", normalization="original", language="en", review_url=f"https://x/{i}")
            for i in range(n)]


def _articles(n):
    return {f"r{i}": Article(review_id=f"r{i}", review_url=f"https://x/{i}", final_url=f"https://x/{i}", raw_chars=3000,
                             text=f"Claim number {i} was checked and found accurate. " * 20) for i in range(n)}


def test_stage_6_stops_on_the_budget_then_resumes_from_the_cache(stub, tmp_path):
    stage6 = settings(STAGE6, scoring=ScoreSettings(min_ratings=1))
    llm = _llm(stub, tmp_path, budget=3 * PER_CALL - 1e-6)
    # each claim: veracity (positive) then context coverage: 2 calls; the budget allows 3, so claim 2 stops the stage
    with pytest.raises(BudgetExceeded, match="LLM budget reached"):
        score_all(_claims(3), _articles(3), llm, **stage6, media_store=None, key=ORDER_KEY)
    assert stub.count("ok") == 3
    resumed = _llm(stub, tmp_path, budget=None)  # the budget raised (here: lifted) and the stage run again
    out, stats = score_all(_claims(3), _articles(3), resumed, **stage6, media_store=None, key=ORDER_KEY)
    assert len(out) == 3 and dict(stats.drops) == {}
    summary = resumed.ledger_summary(stage="scored_claims")
    assert (summary["calls"], summary["cache_hits"], summary["model_calls"]) == (3 + 6, 3, 3 + 3)
    assert stub.count("ok") == 6  # 3 before the stop + the 3 calls no run had made


def test_budget_error_is_not_swallowed_as_one_items_failure():
    from assets.stage.record_errors import map_records
    from assets.stage.tables import StageYield

    stats = StageYield(2)

    def fn(item):
        if item == "b":
            raise BudgetExceeded("LLM budget reached")
        raise ValueError("bad item")

    with pytest.raises(BudgetExceeded):
        map_records("s", ["a", "b"], fn, stats)
    assert dict(stats.drops) == {"error:ValueError": 1}  # the item before the stop was still counted
