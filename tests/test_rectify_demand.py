"""Issue 27: stage 7 rewrites only the Compromised claims the release will use (stages.rectify: demand), in the order
the release prefers them, round by round at the quarter's own success rate; the rest are not_needed_for_release.
The raters are scripted on loopback (tests/test_rating_flow.py's): a rewrite of a claim marked SHAKY fails its check."""

import hashlib
import json
import random

import pytest

from assets.claims.rectified_claims import rectify_all
from assets.ensemble.scoring import score_claim
from assets.selection.demand import DemandPlan, hypothetical_variant
from assets.selection.release_selection import select_release
from dagster_project.simulation.openai_stub import serving
from dagster_project.stage_settings import ClaimRules, DemandSettings, ReleaseSettings
from schemas.records import Integrity
from tests.test_rating_flow import (  # noqa: F401 - its key fixture
    ARTICLE,
    CLAIM_RULES,
    PHOTO,
    SCORING,
    STAGE7,
    _key,
    claim,
    resource,
    scripted,
    settings,
)
from tests.test_release import ORDER_KEY

# a release of 20 claims, stage 7's other settings at their defaults
TWENTY = settings(STAGE7, release_rules=ReleaseSettings(release_size=20))

WORDS = ("harbour lantern quarry violin meadow tundra saffron glacier orchid pylon compass ember falcon walnut cobalt "
         "mosaic thistle canyon beacon raven delta piston marble willow oyster juniper bronze citadel nebula prairie "
         "lagoon summit velvet anchor cedar").split()


def shaky(mode: str, body: dict):
    """The scripted raters, except that the checker finds a rewrite of a SHAKY claim inconsistent, and that the
    writer's rewrites read like the claims of the pool (``text``; the raters score a claim that says TRUE Intact)."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "You check a rewritten claim" in system and "SHAKY" in user:
        return 200, json.dumps({"consistent": "no", "shareable": "yes"})
    if "You turn a compromised claim" in system:
        return 200, json.dumps({"claim": text(int(hashlib.sha256(user.encode()).hexdigest()[:8], 16) % 10**6) + " TRUE"})
    return scripted(mode, body)


class Log:
    """A stage log that keeps its warnings."""

    def __init__(self):
        self.warnings: list[str] = []

    def info(self, message: str) -> None:
        pass

    def warning(self, message: str) -> None:
        self.warnings.append(message)


def standing_out(mode: str, body: dict):
    """The scripted raters as they are: every rewrite is the same sentence, which no claim of the pool resembles."""
    return scripted(mode, body)


@pytest.fixture(scope="module")
def stub():
    with serving(shaky) as s:
        yield s


def rewrites(stub, since: int) -> int:
    return sum("You turn a compromised claim" in body["messages"][0]["content"] for _, body in stub.requests[since:])


def text(i: int) -> str:
    words = random.Random(i).sample(WORDS, 7)  # distinct word sets: no two claims are near-duplicates
    return f"The {words[0]} of {words[1]} shows {words[2]} {words[3]} near {words[4]} {words[5]} {words[6]} {i}"


def pool(stub, tmp_path, intact: int, compromised: int, unknown: int, shaky_every: int = 0):
    """Scored claims: the Compromised ones copies of one scored through the raters (their rewrites go to the
    stub), the Intact and Unknown ones set directly (they are never rewritten)."""
    original, _ = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "e",
                              resource(stub, tmp_path), SCORING, CLAIM_RULES, None)
    claims = []
    for i in range(intact + compromised + unknown):
        kind = "intact" if i < intact else "compromised" if i < intact + compromised else "unknown"
        marker = " SHAKY" if kind == "compromised" and shaky_every and i % shaky_every == 0 else ""
        # every claim says TRUE, as the writer's rewrites must (for the raters): no word of it tells a rewrite apart
        update = {"claim_id": f"c{i:03d}", "review_id": f"r{i:03d}", "text": text(i) + " TRUE" + marker, "media": []}
        if kind != "compromised":
            update["integrity"] = Integrity(score=1.0 if kind == "intact" else 0.0, decisive_property="veracity",
                                            label=kind)
        claims.append(original.model_copy(update=update))
    articles = {c.review_id: ARTICLE.model_copy(update={"review_id": c.review_id}) for c in claims}
    return claims, articles


def test_the_plan_counts_the_variants_the_release_lacks(stub, tmp_path):
    claims, _ = pool(stub, tmp_path, intact=5, compromised=30, unknown=4)
    plan = DemandPlan(claims, ReleaseSettings(release_size=20), ClaimRules(), key=ORDER_KEY)
    assert (plan.without, plan.target) == (11, 20)  # 5 pairs and 1 Unknown; with variants, the full 20
    k = plan.needed([], plan.candidates)
    assert k == 4  # 9 pairs: 5 natural Intact + 4 variants, 9 of the other 26 Compromised
    variants = [hypothetical_variant(c) for c in plan.candidates[:k]]
    linked = {v.variant_of: v.claim_id for v in variants}  # as stage 7 links an original to its variant
    originals = [c.model_copy(update={"variant_of": linked.get(c.claim_id, "")}) for c in claims]
    chosen, report = select_release(originals + variants, 20, 0.8, 92, key=ORDER_KEY)
    assert report["feasible_size"] == 20 and {c.claim_id for c in variants} <= {c.claim_id for c in chosen}
    # the release's own Compromised picks are the last candidates: none of the rewritten ones is picked as one
    picked = {c.claim_id for c in chosen if c.integrity.label == "compromised"}
    assert not picked & {c.claim_id for c in plan.candidates[:k]}
    # a pool that balances without rewrites needs none
    assert DemandPlan(claims, ReleaseSettings(release_size=10), ClaimRules(), key=ORDER_KEY).needed(
        [], plan.candidates) == 0


def test_demand_rewrites_only_what_the_release_needs(stub, tmp_path):
    claims, articles = pool(stub, tmp_path, intact=5, compromised=30, unknown=4)
    no_surplus = {**TWENTY, "demand": DemandSettings(rectify_surplus=0.0)}
    llm = resource(stub, tmp_path)
    before = len(stub.requests)
    out, stats = rectify_all(claims, articles, llm, **no_surplus, media_store=None, key=ORDER_KEY)
    assert rewrites(stub, before) == 4  # prompts to the writer
    assert stats.extra["rectify/attempted"] == stats.extra["rectify/planned"] == 4 and stats.extra["rectify/rounds"] == 1
    assert stats.extra["not_rectified/not_needed_for_release"] == 26 and stats.extra["rectified"] == 4
    assert stats.extra["rectify/size_reached"] == stats.extra["rectify/target_size"] == 20
    _, report = select_release(out, 20, 0.8, 92, dedupe=False, key=ORDER_KEY)
    assert report["feasible_size"] == 20
    # by default 30% more than the release uses, for the release's adversarial filter to leave out: 6 of 4; the
    # rewrites read like the pool's claims, so the filter would leave none out and asks for no more
    before = len(stub.requests)
    _, extra = rectify_all(claims, articles, resource(stub, tmp_path / "surplus"), **TWENTY, media_store=None,
                           key=ORDER_KEY)
    assert extra.extra["rectify/attempted"] == extra.extra["rectified"] == 6 and rewrites(stub, before) == 6
    assert extra.extra["rectify/detectable_share"] == 0.0
    before = len(stub.requests)
    _, every = rectify_all(claims, articles, resource(stub, tmp_path / "all"),
                           **{**TWENTY, "demand": DemandSettings(rectify="all")}, media_store=None, key=ORDER_KEY)
    assert every.extra["rectify/attempted"] == 30 and every.extra["rectified"] == 30
    assert rewrites(stub, before) == 30


def test_rewrites_that_stand_out_call_for_more_until_the_release_can_leave_them_out(tmp_path):
    """The shortcut audit blocked a rehearsal's release (rectified-style accuracy 0.56 against 0.50 + 0.06) and the
    demo's 40-claim one (0.83): the simulated writer's templates stood out, and a fixed 30% surplus left the
    adversarial filter no room to leave them out. Stage 7 now measures, as the release will, the share of its
    rewrites the filter tells from natural claims, and rewrites more until the rest cover the release."""
    with serving(standing_out) as loud:
        claims, articles = pool(loud, tmp_path, intact=5, compromised=30, unknown=4)
        before = len(loud.requests)
        log = Log()
        out, stats = rectify_all(claims, articles, resource(loud, tmp_path), **TWENTY, media_store=None, log=log,
                                 key=ORDER_KEY)
        made = rewrites(loud, before)
    # every rewrite is one sentence none of the natural claims resembles: the filter would leave nearly all out, so
    # stage 7 goes on to the last candidate (21; the other 9 are the release's own Compromised picks)
    candidates = DemandPlan(claims, ReleaseSettings(release_size=20), ClaimRules(), key=ORDER_KEY).candidates
    assert stats.extra["rectify/detectable_share"] > 0.5
    assert made == stats.extra["rectify/attempted"] == len(candidates) == 21
    assert stats.extra["not_rectified/not_needed_for_release"] == 9
    assert any("the shortcut audit may block it" in line for line in log.warnings)  # no candidate left for more


def test_when_rewrites_fail_it_goes_on_at_the_rate_it_measured(stub, tmp_path):
    claims, articles = pool(stub, tmp_path, intact=5, compromised=30, unknown=4, shaky_every=2)
    out, stats = rectify_all(claims, articles, resource(stub, tmp_path), **TWENTY, media_store=None, key=ORDER_KEY)
    held = stats.extra["rectified"]
    assert held >= 4 and stats.extra["rectify/rounds"] >= 2  # the first round's failures called for another
    assert stats.extra["rectify/size_reached"] == 20
    assert stats.extra["not_rectified/inconsistent"] == stats.extra["rectify/attempted"] - held
    assert stats.extra["rectify/attempted"] < 30 and stats.extra["not_rectified/not_needed_for_release"] > 0


def test_recurring_drop_rewrites_every_compromised_claim_so_the_release_is_not_short(stub, tmp_path):
    """Issue 36: under recurring: drop the release leaves out the claims of earlier releases, with their variants,
    after stage 7 has run; a plan made without them counted on claims that are then gone and the release came out
    short. No release is an input of stage 7 (the release reads stage 7: Dagster refuses the cycle), so stage 7
    rewrites every Compromised claim then, as stage 6 scores every claim."""
    claims, articles = pool(stub, tmp_path, intact=5, compromised=30, unknown=4)
    plan = DemandPlan(claims, ReleaseSettings(release_size=20), ClaimRules(), key=ORDER_KEY)
    # the claims that recur from an earlier release: two natural Intact ones and the four demand rewrites
    recurring = {c.claim_id for c in claims[:2]} | {c.claim_id for c in plan.candidates[:4]}

    def released(out):  # the release's drop: an original that recurs takes its variant with it
        gone = {k for c in out if c.claim_id in recurring for k in (c.claim_id, c.variant_of)}
        return select_release([c for c in out if c.claim_id not in gone], 20, 0.8, 92, dedupe=False, key=ORDER_KEY)[1]

    demand, _ = rectify_all(claims, articles, resource(stub, tmp_path), **TWENTY, media_store=None, key=ORDER_KEY)
    assert released(demand)["feasible_size"] < 20  # what recurring: drop with a demand plan gave
    out, stats = rectify_all(claims, articles, resource(stub, tmp_path / "drop"),
                             **{**TWENTY, "release_rules": ReleaseSettings(release_size=20, recurring="drop")},
                             media_store=None, key=ORDER_KEY)
    assert stats.extra["rectify/mode"] == "all (recurring: drop)" and stats.extra["rectify/attempted"] == 30
    assert released(out)["feasible_size"] == 20


def test_running_rewrites_count_below_their_mean():
    """A round decided while rewrites still run counts on them for fewer variants than the rate says (the check once
    they are done then seldom finds one lacking), never fewer than none, and on all of them at a rate of 1."""
    from assets.claims.rectified_claims import running_held

    assert running_held(0, 0.83) == 0 and running_held(48, 1.0) == 48 and running_held(3, 0.1) == 0
    assert 35 < running_held(48, 0.83) < 0.83 * 48 - 4
