"""Issue 33, item 2: rewrites that read like the claims people post.

Stage 7 rewrites a Compromised claim as a minimal edit; a rule refuses a rewrite that adds negation or hedge words
the claim lacks, in every language of the label scheme; the checker's (or the rule's) critique goes back to the
writer for up to ``stages.refine_rounds`` more rounds (MMCV's critique-and-refine loop), each round cached, costed
and counted; each variant records its rounds and its word-level edit ratio. Scripted members on loopback answer as
a careless writer would: a denial first, a minimal edit once told why it was refused."""

import json

import pytest
import yaml

from assets.claims.rectified_claims import added_cues, edit_ratio, rectify_all
from assets.ensemble.scoring import score_claim
from dagster_project.simulation.openai_stub import serving
from dagster_project.stage_settings import DemandSettings, RectifySettings
from prompts import HERE as PROMPTS
from tests.ops_support import rating, rating_reply
from tests.test_rating_flow import (  # noqa: F401 - fixtures
    ARTICLE,
    CLAIM_RULES,
    EVERY,
    PHOTO,
    SCORING,
    STAGE7,
    _key,
    claim,
    resource,
    settings,
)
from tests.test_release import ORDER_KEY

FALSE = "<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday"
DENIAL = "There is no evidence that the crowd is in Hong Kong yesterday."
MINIMAL = "<image:0> Crowd in Paris in 2019"  # the false detail (place, date) swapped, the claim's own words kept


def writer_and_checker(mode: str, body: dict):
    """'denier' writes a denial until it is told why that was refused, then a minimal edit; 'stubborn' always
    denies; the checker ('picky') refuses the first minimal edit it sees with a critique, 'refuser' refuses to
    answer; the raters follow the claim text."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    user = user if isinstance(user, str) else "\n".join(p.get("text", "") for p in user if p.get("type") == "text")
    if "You turn a compromised claim" in system:
        told = "Why it was refused:" in user
        if "not last year" in user:  # the checker's critique: a new text (the same one would hit the cache)
            return 200, json.dumps({"claim": MINIMAL.replace(" in 2019", ", 2019")})
        return 200, json.dumps({"claim": MINIMAL if told and mode != "stubborn" else DENIAL})
    if "You check a rewritten claim" in system:
        if mode == "refuser":
            return 200, "I can't help with that."
        if mode == "picky" and "Previous rewrite" not in user and MINIMAL.split("> ")[1] in user and not PICKY_SEEN:
            PICKY_SEEN.append(user)
            return 200, json.dumps({"consistent": "yes", "shareable": "no", "critique": "say 2019, not last year"})
        return 200, json.dumps({"consistent": "yes", "shareable": "yes", "critique": ""})
    true_claim = "Paris in 2019" in user or "Paris, 2019" in user
    ooc = "OUT-OF-CONTEXT" in user and not true_claim
    return rating_reply(user, rating("negative" if ooc else "positive", why="wrong year"),
                        rating("positive" if true_claim else "negative", why="fine"))


PICKY_SEEN: list = []


@pytest.fixture(scope="module")
def stub():
    with serving(writer_and_checker) as s:
        yield s


def writer_prompts(stub, since: int) -> list[str]:
    return [body["messages"][-1]["content"] if isinstance(body["messages"][-1]["content"], str) else
            " ".join(p.get("text", "") for p in body["messages"][-1]["content"] if p.get("type") == "text")
            for _, body in stub.requests[since:] if "You turn a compromised claim" in body["messages"][0]["content"]]


def original(llm):
    scored, _ = score_claim(claim(FALSE, [PHOTO]), "e", llm, SCORING, CLAIM_RULES, None)
    assert scored.integrity.label == "compromised"
    return scored


def test_a_denial_is_refused_and_the_reason_brings_a_minimal_edit_on_the_next_round(stub, tmp_path):
    llm = resource(stub, tmp_path, ("denier", "agree", "agree"))
    before = len(stub.requests)
    out, stats = rectify_all([original(llm)], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    variant = out[1]
    assert variant.text == MINIMAL and variant.rewrite_rounds == 2 and variant.integrity.label == "intact"
    prompts = writer_prompts(stub, before)
    assert len(prompts) == 2 and "Previous rewrite (round 1)" in prompts[1] and DENIAL in prompts[1]
    assert "adds negation words (no)" in prompts[1]  # the rule's refusal, as the critique
    assert stats.extra["refine/saved"] == 1 and stats.extra["refine/held_in_round_2"] == 1
    assert stats.extra["refine/refused/adds_negation"] == 1 and stats.extra["refine/calls"] == 2  # writer + checker
    assert 0 < variant.edit_ratio < 0.7 and stats.extra["edit_ratio/median"] == variant.edit_ratio


def test_without_the_loop_the_denial_is_dropped_and_counted(stub, tmp_path):
    llm = resource(stub, tmp_path, ("denier", "agree", "agree"))
    no_loop = settings(STAGE7, demand=DemandSettings(rectify="all"), rectifying=RectifySettings(refine_rounds=0))
    out, stats = rectify_all([original(llm)], {"r1": ARTICLE}, llm, **no_loop, media_store=None, key=ORDER_KEY)
    assert len(out) == 1 and stats.extra["not_rectified/adds_negation"] == 1
    llm = resource(stub, tmp_path / "stubborn", ("stubborn", "agree", "agree"))
    out, stats = rectify_all([original(llm)], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    assert len(out) == 1 and stats.extra["refine/refused/adds_negation"] == 3  # three rounds, all denials


def test_the_checkers_critique_goes_back_to_the_writer(stub, tmp_path):
    PICKY_SEEN.clear()
    llm = resource(stub, tmp_path, ("denier", "picky", "agree"))
    before = len(stub.requests)
    out, stats = rectify_all([original(llm)], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    prompts = writer_prompts(stub, before)
    assert len(prompts) == 3 and "say 2019, not last year" in prompts[2]
    assert out[1].rewrite_rounds == 3 and stats.extra["refine/refused/not_shareable"] == 1


def test_a_checker_that_gives_no_answer_is_a_failure_with_its_cause_not_inconsistent(stub, tmp_path):
    llm = resource(stub, tmp_path, ("denier", "refuser", "agree"))
    out, stats = rectify_all([original(llm)], {"r1": ARTICLE}, llm, **EVERY, media_store=None, key=ORDER_KEY)
    assert len(out) == 1 and "not_rectified/inconsistent" not in stats.extra
    assert [k for k in stats.extra if k.startswith("not_rectified/check_failed:")] == [
        "not_rectified/check_failed:refusal"]  # "I can't help with that.": a refusal in plain text


@pytest.mark.parametrize(("language", "claim_text", "rewrite", "cue"), [
    ("en", "The video shows troops in Kyiv", "The video does not show troops in Kyiv", "adds_negation:not"),
    ("en", "The video shows troops in Kyiv", "The video may show troops in Kyiv", "adds_hedge:may"),
    ("es", "El video muestra tropas en Kiev", "El video no muestra tropas en Kiev", "adds_negation:no"),
    ("de", "Das Video zeigt Soldaten in Kiew", "Das Video zeigt keine Soldaten in Kiew", "adds_negation:keine"),
    ("fr", "La vidéo montre des soldats à Kiev", "La vidéo ne montre pas de soldats à Kiev", "adds_negation:ne,pas"),
    ("pt", "O vídeo mostra tropas em Kiev", "O vídeo supostamente mostra tropas em Kiev", "adds_hedge:supostamente"),
    ("it", "Il video mostra truppe a Kiev", "Il video non mostra truppe a Kiev", "adds_negation:non"),
    ("ar", "الفيديو يظهر جنودا في كييف", "الفيديو لا يظهر جنودا في كييف", "adds_negation:لا"),
    ("en", "Masks do not cause oxygen loss", "Masks do not cause oxygen loss in 2020", ""),  # the claim's own "not"
    ("en", "The video shows troops in Kyiv", "The video shows troops in Lviv in 2014", ""),
])
def test_the_rule_refuses_added_negation_and_hedges_in_every_language_of_the_scheme(language, claim_text, rewrite, cue):
    assert added_cues(claim_text, rewrite, language) == cue


def test_every_language_of_the_label_scheme_has_negation_and_hedge_words():
    from assets.rules.negation import HEDGE, NEGATION

    scheme = yaml.safe_load((PROMPTS / "label_scheme.yaml").read_text(encoding="utf-8"))
    assert set(scheme["verdict_words"]) <= set(NEGATION) & set(HEDGE)


def test_edit_ratio_counts_words_changed_over_the_longer_text():
    assert edit_ratio("<image:0> Crowd in Hong Kong yesterday", "<image:0> Crowd in Paris in 2019") == pytest.approx(3 / 5)
    assert edit_ratio("a b c d", "a b c d") == 0.0
    assert edit_ratio("a b", "x y z w") == 1.0
