"""Stages 6-7 through the real LLM resource against scripted raters on loopback (the double is at the HTTP edge).

The embedded model's answers are noise, so the order of questions, the agreement rules and rectification are
checked here with raters whose answers follow the claim text.
"""

import json
from datetime import date

import pytest

from assets.claims.rectified_claims import rectify_all
from assets.ensemble.scoring import score_claim
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import serving
from dagster_project.stage_settings import STAGE_SETTINGS, ClaimRules, DemandSettings, ScoreSettings
from schemas.records import Article, Medium, NormalizedClaim
from tests.ops_support import rating, rating_reply
from tests.test_release import ORDER_KEY

TRUE_TEXT = "The photo shows a 2019 protest in Paris."


def scripted(mode: str, body: dict):
    """Raters: 'agree' members follow the script; a 'contrarian' flips veracity; 'broken' answers nonsense."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if mode == "broken":
        return 200, "Rating: probably fine."  # nonsense, not a refusal (those are counted as refusals)
    if "You turn a compromised claim" in system:
        return 200, json.dumps({"claim": TRUE_TEXT})
    if "You check a rewritten claim" in system:
        return 200, json.dumps({"consistent": "yes", "shareable": "yes"})
    true_claim = TRUE_TEXT in user
    ooc = "OUT-OF-CONTEXT" in user and not true_claim
    category = "positive" if true_claim or "TRUE" in user else "negative"
    if mode == "contrarian":
        category = "positive" if category == "negative" else "negative"
    return rating_reply(user, rating("negative" if ooc else "positive", why="wrong year"),
                        rating(category, why="the article says otherwise" if category == "negative" else "fine"))


@pytest.fixture(scope="module")
def stub():
    with serving(scripted) as s:
        yield s


def resource(stub, tmp_path, modes=("agree", "agree", "agree")) -> LLMResource:
    members = [
        EnsembleMember(name=f"r{i}-{mode}", model="openai/scripted", api_base=stub.base(mode), api_key_env="STUB_KEY",
                       context_window=8192)
        for i, mode in enumerate(modes)
    ]
    return LLMResource(members=members, cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")


def claim(text, media=()):
    return NormalizedClaim(claim_id="c1", review_id="r1", quarter="2020Q2", text=text, original_text=text,
                           normalization="llm", language="en", claim_date=date(2020, 5, 1),
                           review_url="https://fullfact.org/x", media=list(media))


PHOTO = Medium(medium_id="p" * 64, kind="image", path="images/pp/p.jpg", width=640, height=480, alt="crowd")
# the settings stage 6's score_all and stage 7's rectify_all take, by resource key (their parameters' names)
STAGE6 = ("scoring", "claim_rules", "evidence", "demand", "release_rules", "error_budget")
STAGE7 = ("rectifying", "scoring", "claim_rules", "evidence", "demand", "release_rules", "error_budget")


def settings(keys: tuple[str, ...], **models) -> dict:
    """The settings ``keys`` name, each at its defaults unless ``models`` gives it by resource key: the keyword
    arguments of score_all (STAGE6) or rectify_all (STAGE7)."""
    assert set(models) <= set(keys), f"{sorted(set(models) - set(keys))}: not among {keys}"
    return {key: models[key] if key in models else STAGE_SETTINGS[key]() for key in keys}


SCORING, CLAIM_RULES = ScoreSettings(), ClaimRules()  # score_claim's
# one claim makes no release: on demand, none would be rewritten
EVERY = settings(STAGE7, demand=DemandSettings(rectify="all"))


def asked(stub, before: int) -> list[str]:
    kinds = []
    for _, body in stub.requests[before:]:
        user = body["messages"][-1]["content"]
        kinds.append("media" if "authenticity and on" in user else user.rsplit("Rate the claim on ", 1)[-1].split(":")[0])
    return kinds


def test_out_of_context_media_stop_before_veracity(stub, tmp_path):
    before = len(stub.requests)
    scored, reason = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "evidence",
                                 resource(stub, tmp_path), SCORING, CLAIM_RULES, None)
    assert reason == "" and asked(stub, before) == ["media"] * 3
    assert scored.veracity is None and scored.context_coverage is None
    assert (scored.integrity.score, scored.integrity.decisive_property, scored.integrity.label) == (-1.0, "contextualization", "compromised")
    assert [v.score for v in scored.media_verdicts] == [1.0, -1.0]  # authenticity reported, not decisive
    assert scored.media_verdicts[1].justification == "wrong year"


def test_false_veracity_skips_context_coverage(stub, tmp_path):
    before = len(stub.requests)
    scored, _ = score_claim(claim("Hot steam cures the virus"), "evidence", resource(stub, tmp_path), SCORING,
                            CLAIM_RULES, None)
    assert asked(stub, before) == ["veracity"] * 3
    assert scored.integrity.score == -1.0 and scored.integrity.decisive_property == "veracity"


def test_true_claim_gets_context_coverage_and_is_decided_by_it(stub, tmp_path):
    before = len(stub.requests)
    scored, _ = score_claim(claim("TRUE: masks are recommended indoors"), "e", resource(stub, tmp_path), SCORING,
                            CLAIM_RULES, None)
    assert asked(stub, before) == ["veracity"] * 3 + ["context_coverage"] * 3
    assert scored.integrity.decisive_property == "context_coverage"
    assert scored.integrity.score == pytest.approx(2 / 3) and scored.integrity.label == "intact"
    assert len(scored.ratings) == 6


def test_disagreement_and_missing_ratings_drop_the_claim(stub, tmp_path):
    llm = resource(stub, tmp_path, ("agree", "agree", "contrarian"))
    assert score_claim(claim("Hot steam cures the virus"), "e", llm, SCORING, CLAIM_RULES, None) == (
        None, "rater_disagreement")
    llm = resource(stub, tmp_path / "b", ("agree", "agree", "broken"))
    assert score_claim(claim("Hot steam cures the virus"), "e", llm, SCORING, CLAIM_RULES, None) == (
        None, "incomplete_ratings:veracity")
    # the broken member was re-asked once, then recorded as a failure
    failures = llm.ledger_summary()
    assert failures["errors"] == 1


ARTICLE = Article(review_id="r1", review_url="https://fullfact.org/x", final_url="https://fullfact.org/x",
                  raw_chars=5000, text="The photo was taken at a 2019 protest in Paris. " * 30)


def test_rectification_rescores_to_intact_and_links_both_ways(stub, tmp_path):
    llm = resource(stub, tmp_path)
    original, _ = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "e", llm,
                              SCORING, CLAIM_RULES, None)
    out, stats = rectify_all([original], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    assert [c.variant for c in out] == ["original", "rectified"]
    first, second = out
    assert first.variant_of == second.claim_id and second.variant_of == first.claim_id
    assert second.text == f"<image:0> {TRUE_TEXT}" and second.media == first.media
    assert second.integrity.label == "intact" and stats.extra["rectified"] == 1


def test_the_rewrite_is_checked_by_another_member_than_its_writer(stub, tmp_path):
    llm = resource(stub, tmp_path, ("agree", "checker", "agree3"))
    original, _ = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "e", llm,
                              SCORING, CLAIM_RULES, None)
    before = len(stub.requests)
    out, stats = rectify_all([original], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    assert stats.extra["rectified"] == 1
    roles = [(mode, body["messages"][0]["content"].split(".")[0]) for mode, body in stub.requests[before:]]
    assert [mode for mode, role in roles if role.startswith("You turn a compromised claim")] == ["agree"]
    assert [mode for mode, role in roles if role.startswith("You check a rewritten claim")] == ["checker"]


def test_a_rewrite_that_leaves_the_claims_language_is_not_kept(stub, tmp_path):
    llm = resource(stub, tmp_path)
    original, _ = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "e", llm,
                              SCORING, CLAIM_RULES, None)
    german = original.model_copy(update={"language": "de", "text": "<image:0> Menschenmenge gestern in Hongkong"})
    # the writer answers in English
    out, stats = rectify_all([german], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    assert [c.variant for c in out] == ["original"]
    assert stats.extra["not_rectified/rewrite_language_changed"] == 1


def test_agreement_is_reported_before_the_disagreement_filter_as_well_as_after(stub, tmp_path):
    """Issue 33: alpha over the claims the filter kept overstates the raters' agreement; stage 6 also reports it
    over every claim rated, those the filter dropped included (alpha_before_filter/*, reliability_before_filter_json,
    which the release's manifest and card publish as before_filter)."""
    from assets.claims.scored_claims import score_all

    claims = [claim("Hot steam cures the virus").model_copy(update={"claim_id": f"c{i}", "review_id": f"r{i}"})
              for i in range(3)]
    articles = {f"r{i}": ARTICLE.model_copy(update={"review_id": f"r{i}"}) for i in range(3)}
    llm = resource(stub, tmp_path, ("agree", "agree", "contrarian"))
    every = settings(STAGE6, demand=DemandSettings(rectify="all", score="all"))
    out, stats = score_all(claims, articles, llm, **every, media_store=None, key=ORDER_KEY)
    assert out == [] and dict(stats.drops) == {"rater_disagreement": 3}
    assert "alpha/veracity" not in stats.extra  # nothing kept, nothing to measure after the filter
    before = json.loads(stats.extra["reliability_before_filter_json"])
    assert before["veracity"]["units"] == 3 and before["veracity"]["alpha"] < 0
    assert stats.extra["alpha_before_filter/veracity"] == before["veracity"]["alpha"]
