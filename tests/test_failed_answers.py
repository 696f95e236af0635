"""Issue 34, section 1: a failed model answer in stage 6 is counted per member and property, costs a claim only as
the refusal rule says, comes under the error budget (over the claims attempted), and reaches the card."""

from datetime import date

import pytest

from assets.claims import scored_claims as stage6
from assets.ensemble import scoring
from assets.release.card import integrity_markdown
from assets.rules.failed_answers import (
    failed_answers_lines,
    failed_answers_report,
    failure_kind,
)
from assets.stage.record_errors import ErrorBudgetExceeded
from dagster_project.resources.llm import LLMAnswer
from dagster_project.stage_settings import DemandSettings, ErrorBudgetSettings, ScoreSettings
from schemas.records import Article, Medium, NormalizedClaim
from tests.test_rating_flow import STAGE6, settings
from tests.test_release import ORDER_KEY

LEVEL = {1.0: ("positive", "certain"), -1.0: ("negative", "certain"), -2 / 3: ("negative", "rather certain")}
ERRORS = {"refusal": "refusal: RefusalError: I can't help with that.",
          "timeout": "transport: Timeout: litellm.Timeout: Connection timed out after 120.0 seconds",
          "invalid_output": "invalid_output: ValidationError: 1 validation error"}


def answer(member, parsed, error=None):
    return LLMAnswer(member=member, model="scripted", parsed=parsed, raw="{}", error=error, cache_hit=False,
                     prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=0.0)


class Panel:
    """Three members that rate every property -1; ``faults(claim_text, member, prompt)`` names a failure or ''."""

    members = ("a", "b", "c")
    parallel_claims = 1

    def __init__(self, faults):
        self.faults = faults

    def member_names(self):
        return list(self.members)

    def member(self, name):
        from dagster_project.resources.llm import EnsembleMember

        return EnsembleMember(name=name, model="openai/scripted")

    def ask(self, llm, member, prompt, model, *, stage, media=(), media_store=None, **inputs):
        if fault := self.faults(inputs["claim"], member, prompt):
            return answer(member, None, ERRORS[fault])
        one = {"category": "negative", "certainty": "certain", "justification": "no", "tags": []}
        return answer(member, {"authenticity": one, "contextualization": one} if prompt == "rate_media" else one)


def claim(i: int, n_media: int = 0, rating: str = "False") -> NormalizedClaim:
    media = [Medium(medium_id=f"m{i}-{k}", kind="image", path=f"images/{i}-{k}.jpg", width=640, height=480)
             for k in range(n_media)]
    return NormalizedClaim(claim_id=f"c{i:03d}", review_id=f"r{i:03d}", quarter="2020Q2", text=f"Claim {i}.",
                           original_text=f"Claim {i}.", normalization="llm", language="en",
                           claim_date=date(2020, 5, 1), review_url=f"https://x.org/{i}", media=media, rating_text=rating)


ALL = DemandSettings(score="all")  # stage 6 scores every claim


def run(monkeypatch, claims, faults, **models):
    """Stage 6 over ``claims`` with the panel's ``faults``, and these settings of score_all by resource key (the
    others at their defaults)."""
    panel = Panel(faults)
    monkeypatch.setattr(scoring, "ask", panel.ask)
    monkeypatch.setattr(stage6, "evidence_budgets", lambda llm, evidence: {m: 1000 for m in panel.members})
    monkeypatch.setattr(stage6, "member_evidence", lambda article, text, budgets: ("evidence", []))
    articles = {c.review_id: Article.model_construct(review_id=c.review_id, text="An article.") for c in claims}
    return stage6.score_all(claims, articles, panel, **settings(STAGE6, **models), media_store=None, key=ORDER_KEY)


@pytest.mark.parametrize("error, kind", [
    (ERRORS["refusal"], "refusal"), (ERRORS["timeout"], "timeout"), (ERRORS["invalid_output"], "invalid_output"),
    ("transport: APIConnectionError: Connection refused", "transport"), (None, "invalid_output"),
])
def test_failure_kinds(error, kind):
    assert failure_kind(error) == kind


def test_a_refusing_member_leaves_the_claim_to_the_other_two(monkeypatch):
    # member c refuses every image (a provider refusing violent imagery): the other two rate it, and it stays
    faults = lambda text, member, prompt: "refusal" if member == "c" and prompt == "rate_media" else ""  # noqa: E731
    out, stats = run(monkeypatch, [claim(1, n_media=1)], faults, demand=ALL)
    assert len(out) == 1 and {v.n_ratings for v in out[0].media_verdicts} == {2} and out[0].veracity is None
    assert stats.extra["failed_answers/refusal/c/contextualization"] == 1
    assert stats.extra["failed_answers/claims_kept"] == 1
    # the rule is configurable: refusal_min_ratings = min_ratings drops every refused claim
    out, stats = run(monkeypatch, [claim(1, n_media=1)], faults, demand=ALL,
                     scoring=ScoreSettings(refusal_min_ratings=3))
    assert out == [] and stats.drops["incomplete_ratings:contextualization"] == 1
    with pytest.raises(ValueError, match="refusal_min_ratings"):
        run(monkeypatch, [claim(1)], faults, demand=ALL, scoring=ScoreSettings(refusal_min_ratings=1))


def test_a_timeout_still_needs_every_rating_and_counts_per_member_and_property(monkeypatch):
    faults = lambda text, member, prompt: "timeout" if member == "b" and text == "Claim 2." else ""  # noqa: E731
    out, stats = run(monkeypatch, [claim(i) for i in range(1, 4)], faults, demand=ALL)
    assert len(out) == 2 and stats.drops["incomplete_ratings:veracity"] == 1
    assert stats.extra["failed_answers/timeout"] == 1 and stats.extra["failed_answers/timeout/b/veracity"] == 1
    assert stats.extra["failed_answers/claims_lost"] == 1


def test_claims_lost_to_failed_answers_past_the_budget_stop_the_stage_naming_member_and_reason(monkeypatch):
    faults = lambda text, member, prompt: "invalid_output" if member == "a" else ""  # noqa: E731
    budget = ErrorBudgetSettings(error_budget_share=0.0, error_budget_min=2)
    with pytest.raises(ErrorBudgetExceeded, match=r"failed_answer:invalid_output:a x3.*member 'a' gave no valid"):
        run(monkeypatch, [claim(i) for i in range(5)], faults, demand=ALL, error_budget=budget)
    # two lost claims are within the budget: dropped, counted and kept on record
    out, stats = run(monkeypatch, [claim(i) for i in range(2)], faults, demand=ALL, error_budget=budget)
    assert out == [] and stats.extra["failed_answers/invalid_output/a/veracity"] == 2


def test_the_budget_on_demand_counts_the_claims_attempted(monkeypatch):
    """Stage 6 on demand scores 10 of 100 claims; the second lost claim is past a 10% budget of the work (1), though
    within 10% of every claim (10), which the budget counted before)."""
    import assets.selection.demand as demand

    class FirstTen:
        def __init__(self, claims, release_rules, claim_rules, demand, key):
            self.claims = claims

        def run(self, score_batch, log=None, stage=""):
            return score_batch(self.claims[:10]), {"score/mode": "demand"}

    monkeypatch.setattr(demand, "ScoringDemand", FirstTen)
    faults = lambda text, member, prompt: "timeout" if member == "c" and text in ("Claim 1.", "Claim 2.", "Claim 3.") else ""  # noqa: E731
    with pytest.raises(ErrorBudgetExceeded, match=r"2 of 10 records failed.*budget of 1"):
        run(monkeypatch, [claim(i) for i in range(100)], faults, demand=DemandSettings(score="demand"),
            error_budget=ErrorBudgetSettings(error_budget_share=0.1, error_budget_min=0))


def test_refusal_losses_by_media_kind_and_category_reach_the_card(monkeypatch):
    # c refuses images; two of them (a refusal and a timeout) lose the image claims rated false
    def faults(text, member, prompt):
        if prompt == "rate_media" and member == "c":
            return "refusal"
        if prompt == "rate_media" and member == "b" and text in ("Claim 0.", "Claim 1."):
            return "timeout"
        return ""

    claims = [claim(i, n_media=1) for i in range(4)] + [claim(i, rating="True") for i in range(4, 6)]
    out, stats = run(monkeypatch, claims, faults, demand=ALL)
    assert len(out) == 4
    assert stats.extra["refusals/lost/image/compromised"] == 2
    assert stats.extra["refusals/lost_share/image/compromised"] == 0.5
    assert stats.extra["refusals/lost_share/text/intact"] == 0.0
    report = failed_answers_report(stats.extra)
    assert report["by_member"]["c"]["contextualization"] == {"refusal": 4}
    card = integrity_markdown({"failed_answers": report})
    assert "## Failed model answers" in card and "| image | compromised | 2 | 50.0% |" in card
    assert any("image/compromised 2 (50.0%)" in line for line in failed_answers_lines(report))


def test_the_release_reads_the_quarters_failed_answers_from_stage_6s_metadata(monkeypatch):
    import json

    import dagster as dg

    from assets.rules.failed_answers import stage_failed_answers
    from dagster_project.core.quarters import to_key

    faults = lambda text, member, prompt: "refusal" if member == "c" else ""  # noqa: E731
    _, stats = run(monkeypatch, [claim(1)], faults, demand=ALL)
    instance = dg.DagsterInstance.ephemeral()
    assert stage_failed_answers(instance, "2020Q2") == {}
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key="scored_claims", partition=to_key("2020Q2"),
        metadata={"failed_answers_json": stats.extra["failed_answers_json"]}))
    report = stage_failed_answers(instance, "2020Q2")
    assert report == json.loads(stats.extra["failed_answers_json"]) and report["kinds"]["refusal"] == 1
    assert "| c | veracity | 1 | 0 | 0 | 0 |" in integrity_markdown({"failed_answers": report})
