"""Issue 27: stage 6 scores on demand (stages.score: demand). Every claim whose rating is not "false" is scored;
of those rated false, only as many as the release needs, in the release's own order, with the variants stage 7 makes
at the expected success; the rest are not_needed_for_release and the scored ones of that stratum stand for it in the
release's Unknown share. The raters are scripted on loopback (tests/test_rating_flow.py's)."""

import pytest

from assets.claims.rectified_claims import rectify_all
from assets.claims.scored_claims import score_all
from assets.selection.demand import ScoringDemand, held_share
from assets.selection.release_selection import select_release
from dagster_project.stage_settings import ClaimRules, DemandSettings, ReleaseSettings
from schemas.records import Integrity, ScoredClaim
from tests.test_rating_flow import (  # noqa: F401 - fixtures
    ARTICLE,
    STAGE6,
    STAGE7,
    _key,
    claim,
    resource,
    settings,
    stub,
)
from tests.test_rectify_demand import TWENTY, Log, text
from tests.test_release import ORDER_KEY


def quarter(n_true: int, n_false: int) -> list:
    """Claims rated "True" (the raters find them true) and claims rated "False" (found false)."""
    out = []
    for i in range(n_true + n_false):
        rated_true = i < n_true
        c = claim(text(i) + (" TRUE" if rated_true else ""))
        out.append(c.model_copy(update={"claim_id": f"c{i:03d}", "review_id": f"r{i:03d}",
                                        "rating_text": "True" if rated_true else "False"}))
    return out


def articles(claims) -> dict:
    return {c.review_id: ARTICLE.model_copy(update={"review_id": c.review_id}) for c in claims}


def released(stub, tmp_path, claims, release_rules: ReleaseSettings,  # noqa: F811 - the fixture
             demand: DemandSettings | None = None):
    """Stages 6 and 7 and the release's selection, with these settings (the others at their defaults)."""
    llm = resource(stub, tmp_path)
    before = len(stub.requests)
    models = {"release_rules": release_rules, "demand": demand or DemandSettings()}
    scored, stats = score_all(claims, articles(claims), llm, **settings(STAGE6, **models), media_store=None,
                              key=ORDER_KEY)
    asked = len(stub.requests) - before
    out, _ = rectify_all(scored, articles(claims), llm, **settings(STAGE7, **models), media_store=None, key=ORDER_KEY)
    chosen, report = select_release(out, release_rules.release_size, release_rules.media_share, 0.0, dedupe=False,
                                    key=ORDER_KEY)
    return scored, stats, asked, chosen, report


def test_demand_scores_the_claims_rated_false_the_release_needs(stub, tmp_path):  # noqa: F811 - the fixture
    claims = quarter(n_true=5, n_false=60)
    scored, stats, asked, chosen, report = released(stub, tmp_path / "demand", claims, ReleaseSettings(release_size=20))
    # all 5 rated true; of the 60 rated false, a Compromised half (10) and the rewrites for the 5 pairs the claims
    # rated true cannot make, at 50% holding (10): 20, in the release's order
    assert stats.extra["score/rated_false"] == 60 and stats.extra["score/rated_false_scored"] == 20
    assert stats.extra["score/rounds"] == 1 and stats.extra["score/release_reached"] == 20
    assert stats.drops["not_needed_for_release"] == 40 and len(scored) == 25
    assert {c.weight for c in scored if c.rating_text == "False"} == {3.0}
    assert {c.weight for c in scored if c.rating_text == "True"} == {1.0}
    all_scored, all_stats, all_asked, all_chosen, all_report = released(
        stub, tmp_path / "all", claims, ReleaseSettings(release_size=20), DemandSettings(score="all"))
    assert len(all_scored) == 65 and all_stats.extra["score/mode"] == "all"
    assert asked * 2 < all_asked  # 25 claims' ratings against 65's
    # the same release: its full size, balanced, and the very same Compromised claims (the first in its order)
    assert report["feasible_size"] == all_report["feasible_size"] == 20
    assert report["selected"] == all_report["selected"] == {"intact": 10, "compromised": 10, "unknown": 0}
    assert {c.claim_id for c in chosen if c.integrity.label == "compromised"} == \
        {c.claim_id for c in all_chosen if c.integrity.label == "compromised"}


def test_a_small_quarter_is_scored_whole(stub, tmp_path):  # noqa: F811 - the fixture
    """With fewer claims than the release needs, demand scores every one: no round leaves a claim out."""
    claims = quarter(n_true=2, n_false=8)
    scored, stats = score_all(claims, articles(claims), resource(stub, tmp_path), **settings(STAGE6), media_store=None,
                              key=ORDER_KEY)
    assert len(scored) == 10 and stats.extra["score/rated_false_scored"] == 8
    assert "not_needed_for_release" not in stats.drops


def scored_claim(i: int, label: str, weight: float = 1.0) -> ScoredClaim:
    c = claim(text(i))
    return ScoredClaim(**c.model_dump() | {"claim_id": f"s{i:03d}", "review_id": f"r{i:03d}"}, weight=weight,
                       integrity=Integrity(score={"intact": 1.0, "unknown": 0.0, "compromised": -1.0}[label],
                                           decisive_property="veracity", label=label))


def test_the_unknown_share_is_the_quarters_not_the_samples():
    """10 Unknown of a quarter of 130 claims where 90 rated false were scored as 30 (weight 3): the release's Unknown
    share is 10/130, as if all 130 had been scored, not 10/70."""
    claims = ([scored_claim(i, "unknown") for i in range(10)] + [scored_claim(i, "intact") for i in range(10, 40)]
              + [scored_claim(i, "compromised", 3.0) for i in range(40, 70)])
    _, weighted = select_release(claims, 100, 0.8, 0.0, dedupe=False, key=ORDER_KEY)
    assert weighted["unknown_share_of_originals"] == round(10 / 130, 4)
    unweighted = [c.model_copy(update={"weight": 1.0}) for c in claims]
    _, plain = select_release(unweighted, 100, 0.8, 0.0, dedupe=False, key=ORDER_KEY)
    assert plain["unknown_share_of_originals"] == round(10 / 70, 4)
    assert weighted["selected"]["unknown"] < plain["selected"]["unknown"]


def test_held_share_spreads_the_successes_and_the_rate_is_checked():
    assert len(held_share(list(range(20)), 0.5)) == 10 and held_share([1, 2, 3], 1.0) == [1, 2, 3]
    assert held_share(list(range(4)), 0.85)[0] == 0  # the first rewrite holds
    with pytest.raises(ValueError, match="expected_rewrite_success"):
        ScoringDemand([], ReleaseSettings(), ClaimRules(), DemandSettings(expected_rewrite_success=0.0), key=ORDER_KEY)


def test_stage_7_says_when_rewrites_held_less_often_than_stage_6_counted_on(tmp_path):
    """Every rewrite fails its check: the release falls short, and stage 7 names the setting to rerun stage 6 with."""
    from tests.test_rectify_demand import pool, serving, shaky
    from tests.test_rectify_demand import resource as rectify_resource

    with serving(shaky) as s:
        claims, arts = pool(s, tmp_path, intact=5, compromised=30, unknown=4, shaky_every=1)
        log = Log()
        _, stats = rectify_all(claims, arts, rectify_resource(s, tmp_path), **TWENTY, media_store=None, log=log,
                               key=ORDER_KEY)
    assert stats.extra["rectify/success_rate"] == 0.0 and stats.extra["rectify/size_reached"] < 20
    assert any("less than the 50% scored_claims counted on" in w and "stages.expected_rewrite_success: 0.05" in w
               for w in log.warnings)


def test_rewrite_candidates_carry_media_at_the_releases_share():
    """The variants on demand must not make the Intact half more media-heavy than the Compromised half (the shortcut
    audit blocks a release where the number of media tells the label): candidates come at the media share."""
    from assets.selection.demand import DemandPlan, at_share

    assert at_share(list("MMMMMMMM"), list("tt"), 0.8) == list("MMMMtMMMMt")
    assert at_share(list("MM"), list("tttt"), 0.8) == list("MMtttt")
    assert at_share(list("MMMMM"), list("tt"), 0.5, before=(0, 3)) == list("MMMMtMt")  # after 3 text claims
    from tests.test_rating_flow import PHOTO

    claims = [scored_claim(i, "compromised") for i in range(50)]  # half with a photo of its own, half without
    claims = [c.model_copy(update={"media": [] if i % 2 else [PHOTO.model_copy(update={"medium_id": f"{i:064x}"})]})
              for i, c in enumerate(claims)]
    plan = DemandPlan(claims, ReleaseSettings(release_size=40), ClaimRules(), key=ORDER_KEY)
    first = plan.candidates[:10]
    assert sum(bool(c.media) for c in first) == 8  # not 10: text claims come at the share
