"""Stage 6: an ensemble of models rates the four integrity properties; disagreement drops the claim."""

import json
from collections import Counter

import dagster as dg

from assets.ensemble.evidence import evidence_budgets, member_evidence
from assets.ensemble.llm_stage import claim_stage_asset, run_claim_stage
from assets.ensemble.rounds import prefetch
from assets.ensemble.scoring import failed_answer_error, failure_counts, lost_to_failures, score_claim
from assets.rules.failed_answers import FailedAnswer, failed_answers_report
from assets.rules.reliability import alpha_metadata, ensemble_alpha
from assets.stage.record_errors import ErrorBudget, map_records
from assets.stage.tables import StageYield, count
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import (
    ClaimRules,
    DemandSettings,
    ErrorBudgetSettings,
    EvidenceSettings,
    ReleaseSettings,
    ScoreSettings,
)
from schemas.records import (
    Article,
    NormalizedClaim,
    ScoredClaim,
)

STAGE = "scored_claims"


def media_kind(claim: NormalizedClaim) -> str:
    """video when the claim has a video, image when it has images only, else text."""
    kinds = {m.kind for m in claim.media}
    return "video" if "video" in kinds else "image" if kinds else "text"


def failure_metadata(claims: list[NormalizedClaim], outcomes: dict) -> dict:
    """The stage's counts of failed answers: per kind, per kind and member, per kind, member and property
    (``failed_answers/<kind>/<member>/<property>``), the claims lost to them, and the share of the claims attempted
    that refusals cost, by media kind (text, image, video) and by the category the fact-checker's rating predicts
    (``refusals/lost_share/<media kind>/<category>``): what the benchmark under-represents."""
    from assets.selection.demand import (
        expected_label,  # the release's rules; the release reads this stage's bins
    )

    meta: Counter = Counter()
    attempted: Counter = Counter()
    lost: Counter = Counter()
    for claim in claims:
        outcome = outcomes.get(claim.claim_id)
        if not isinstance(outcome, tuple):
            continue
        scored, reason, failed = outcome
        group = (media_kind(claim), expected_label(claim))
        attempted[group] += 1
        meta.update(failure_counts(failed))
        if lost_to_failures(scored, reason, failed):
            meta["failed_answers/claims_lost"] += 1
            if any(f.kind == "refusal" for f in failed):
                meta["refusals/claims_lost"] += 1
                lost[group] += 1
        elif scored is not None and failed:
            meta["failed_answers/claims_kept"] += 1  # rated by the other members (stages.refusal_min_ratings)
    out: dict = dict(meta)
    for kind, category in sorted(attempted):
        n = lost[(kind, category)]
        out[f"refusals/lost/{kind}/{category}"] = n
        out[f"refusals/lost_share/{kind}/{category}"] = round(n / attempted[(kind, category)], 4)
    return out


def score_all(
    claims: list[NormalizedClaim], articles: dict[str, Article], llm: LLMResource, scoring: ScoreSettings,
    claim_rules: ClaimRules, evidence: EvidenceSettings, demand: DemandSettings, release_rules: ReleaseSettings,
    error_budget: ErrorBudgetSettings, media_store: MediaStore, log=None, key: bytes | None = None,
) -> tuple[list[ScoredClaim], StageYield]:
    stats = StageYield(len(claims))
    if not 2 <= scoring.refusal_min_ratings:
        raise ValueError(f"stages.refusal_min_ratings must be at least 2 (the disagreement filter needs two ratings), "
                         f"not {scoring.refusal_min_ratings}")
    budgets = evidence_budgets(llm, evidence)  # before any call: a member without a known context window stops here
    disagreed: list = []  # the claims the disagreement filter drops, with their ratings

    def score(claim: NormalizedClaim):
        article = articles.get(claim.review_id)
        if article is None or not article.text.strip():  # never rated "from what the model knows"
            return None, "no_evidence", []
        texts, cuts = member_evidence(article, claim.text, budgets)
        failed: list[FailedAnswer] = []
        return *score_claim(claim, texts, llm, scoring, claim_rules, media_store, evidence_cuts=cuts, failed=failed,
                            disagreed=disagreed), failed

    def score_batch(batch: list[NormalizedClaim]) -> dict:
        """claim id -> (scored claim or None, reason, failed answers), or the exception its scoring raised (raised
        again in the stage's loop below, where the error budget counts it)."""
        work, out = prefetch(batch, score, llm.parallel_claims, log, STAGE), {}
        for claim in batch:
            try:
                out[claim.claim_id] = work(claim)
            except Exception as err:  # noqa: BLE001 - kept for map_records
                if getattr(err, "stops_stage", False):  # the LLM budget or a dead endpoint: no further round
                    raise
                out[claim.claim_id] = err
        return out

    if demand.score not in ("demand", "all"):
        raise ValueError(f"stages.score must be demand or all, not {demand.score!r}")
    if demand.score == "demand" and release_rules.recurring == "drop":
        # the release then leaves out claims of earlier releases, which stage 6 cannot tell: it scores every claim
        if log:
            log.info(f"{STAGE}: recurring: drop leaves claims out at the release that demand cannot foresee: every "
                     "claim is scored")
        outcomes = score_batch(claims)
        stats.extra["score/mode"] = "all (recurring: drop)"
    elif demand.score == "all":
        outcomes = score_batch(claims)
        stats.extra["score/mode"] = "all"
    else:
        from assets.selection.demand import (
            ScoringDemand,  # the release's rules; the release reads this stage's bins
        )

        if key is None:
            raise ValueError("stages.score: demand scores in the release's secret order: pass the store's key")
        outcomes, extra = ScoringDemand(claims, release_rules, claim_rules, demand, key).run(score_batch, log, STAGE)
        stats.extra.update(extra)
    # the budget is a share of the claims attempted: on demand, the claims not needed for the release are no work
    budget = ErrorBudget.for_stage(error_budget, STAGE, len(outcomes), log)

    def one(claim: NormalizedClaim):
        if claim.claim_id not in outcomes:
            return None, "not_needed_for_release"
        if isinstance(outcomes[claim.claim_id], Exception):
            raise outcomes[claim.claim_id]
        scored, reason, failed = outcomes[claim.claim_id]
        if lost_to_failures(scored, reason, failed):  # a failed answer is an error: counted, and past the budget loud
            budget.note(claim, failed_answer_error(reason, failed, len(llm.member_names()), scoring.min_ratings,
                                                   scoring.refusal_min_ratings))
        if scored is not None:
            count(stats, f"label/{scored.integrity.label}")
            if scored.injection_flags:
                count(stats, "injection/flagged")
            if scored.evidence_cuts:
                count(stats, "evidence/cut")
        return scored, reason

    out = map_records(STAGE, claims, one, stats, log, budget)
    stats.extra.update(alpha_metadata(ensemble_alpha(out)))  # the members' agreement (Krippendorff's alpha)
    # and before the disagreement filter, over every claim rated, those it dropped too: what the raters agreed on
    before = ensemble_alpha(sorted([*out, *disagreed], key=lambda c: c.claim_id))
    stats.extra.update({k.replace("alpha/", "alpha_before_filter/"): v for k, v in alpha_metadata(before).items()})
    stats.extra["reliability_before_filter_json"] = json.dumps(before, sort_keys=True)
    failures = failure_metadata(claims, outcomes)
    stats.extra.update(failures)
    stats.extra["failed_answers_json"] = json.dumps(failed_answers_report(failures), sort_keys=True)
    if log and failures.get("failed_answers/claims_lost"):
        log.warning(f"{STAGE}: {failures['failed_answers/claims_lost']} claims lost to failed answers "
                    f"({failures.get('refusals/claims_lost', 0)} with a refusal); see failed_answers/* in the metadata")
    return out, stats


@claim_stage_asset(STAGE, "Stage 6: ensemble ratings of authenticity, contextualization, veracity, context coverage; "
                   "integrity.", upstream="normalized_claims")
def scored_claims(context: dg.AssetExecutionContext, scoring: ScoreSettings, claim_rules: ClaimRules,
                  evidence: EvidenceSettings, demand: DemandSettings, release_rules: ReleaseSettings,
                  error_budget: ErrorBudgetSettings, store: StoreResource, llm: LLMResource) -> dg.MaterializeResult:
    return run_claim_stage(context, store, llm, STAGE, "normalized_claims", NormalizedClaim, ScoredClaim,
                           lambda claims, articles, media_store, log, key: score_all(
                               claims, articles, llm, scoring, claim_rules, evidence, demand, release_rules,
                               error_budget, media_store, log, key=key), keyed=True)
