"""Stage 7: rewrite Compromised claims into true, shareable assertions; keep them only if they score Intact."""


from assets.common import (
    ErrorBudget,
    RecordError,
    StageYield,
    count,
    map_records,
    stable_id,
)
from assets.ensemble import ask, evidence_budgets, llm_claim_asset, member_evidence, prefetch
from dagster_project.resources.media import MediaStore
from assets.claims.normalized_claims import LeakVocabulary, check_claim_text, with_media_refs
from assets.claims.scored_claims import score_claim
from assets.release.demand import DemandPlan
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMResource
from schemas.answers import ClaimTextAnswer, RectifiedCheckAnswer
from schemas.records import Article, EvidenceCut, NormalizedClaim, PropertyVerdict, ScoredClaim

STAGE = "rectified_claims"


def decisive_verdict(claim: ScoredClaim) -> PropertyVerdict | None:
    if claim.integrity.decisive_property == "contextualization":
        media = [v for v in claim.media_verdicts if v.property == "contextualization"]
        return min(media, key=lambda v: v.score) if media else None
    return getattr(claim, claim.integrity.decisive_property)


def checker_for(llm: LLMResource, writer: str) -> str:
    """Who judges a rewrite: a member on another model than the writer's, else another member, else the writer."""
    names = llm.member_names()
    model = llm.member(writer).model
    return next((n for n in names if llm.member(n).model != model), next((n for n in names if n != writer), writer))


def rectify(
    claim: ScoredClaim, evidence: dict[str, str], llm: LLMResource, pipeline: PipelineResource,
    media_store: MediaStore, evidence_cuts: list[EvidenceCut] = (), leaks: LeakVocabulary | None = None,
) -> tuple[ScoredClaim | None, str]:
    """Rewrite, have another member check consistency and shareability, re-score; only an Intact result is kept."""
    member = llm.member_names()[0]
    checker = checker_for(llm, member)
    verdict = decisive_verdict(claim)
    common = {
        "stage": STAGE, "media": claim.media, "media_store": media_store, "language": claim.language,
        "claim_date": str(claim.claim_date or ""),
    }
    answer = ask(
        llm, member, "rectify_claim", ClaimTextAnswer, claim=claim.text, evidence=evidence.get(member, ""),
        decisive_property=claim.integrity.decisive_property, justification=verdict.justification if verdict else "",
        max_words=pipeline.max_words, max_sentences=pipeline.max_sentences, **common,
    )
    if answer.parsed is None:
        return None, "rewrite_failed"
    text = with_media_refs(answer.parsed["claim"], claim.media)
    problem = check_claim_text(text, claim.media, claim.language, pipeline, leaks, claim.rating_text, original=claim.text)
    if problem:
        return None, "rewrite_language_changed" if problem == "language_changed" else "rewrite_invalid"
    check = ask(llm, checker, "check_rectified", RectifiedCheckAnswer, original=claim.text, claim=text,
                evidence=evidence.get(checker, ""), **common)
    if check.parsed is None or check.parsed["consistent"] != "yes":
        return None, "inconsistent"
    if check.parsed["shareable"] != "yes":
        return None, "not_shareable"
    rectified_id = stable_id(claim.review_id, "rectified")
    candidate = NormalizedClaim(**{**claim.model_dump(), "claim_id": rectified_id, "text": text, "normalization": "llm"})
    scored, reason = score_claim(candidate, evidence, llm, pipeline, media_store, "rectified", claim.claim_id, STAGE,
                                 evidence_cuts)
    if scored is None:
        return None, f"rescore_{reason}"
    if scored.integrity.label != "intact":
        return None, f"rescored_{scored.integrity.label}"
    return scored, ""


def rectify_all(
    claims: list[ScoredClaim], articles: dict[str, Article], llm: LLMResource, pipeline: PipelineResource,
    media_store: MediaStore, log=None,
) -> tuple[list[ScoredClaim], StageYield]:
    """Every scored claim passes through; Compromised ones gain a linked rectified variant when one holds up."""
    stats = StageYield(len(claims))
    stats.extra["compromised"] = sum(c.integrity.label == "compromised" for c in claims)
    writer = llm.member_names()[0]
    checker = checker_for(llm, writer)
    stats.extra.update({"rectify/writer": writer, "rectify/checker": checker, "rectify/self_checked": checker == writer})
    if checker == writer and log and stats.extra["compromised"]:
        log.warning(f"{STAGE}: {writer} is the only ensemble member, so it checks its own rewrites: no second model "
                    "judges their consistency and shareability (recorded as rectify/self_checked)")
    # a rewrite that raises keeps its original claim, but counts against the stage's error budget
    budget = ErrorBudget.for_stage(pipeline, STAGE, stats.extra["compromised"], log)
    budgets = evidence_budgets(llm, pipeline)
    leaks = LeakVocabulary.from_reviews(claims)

    def attempt(claim: ScoredClaim):
        article = articles.get(claim.review_id)
        if article is None or not article.text.strip():  # a rewrite is checked against the article, or not made
            return None, "no_evidence"
        evidence, cuts = member_evidence(article, claim.text, budgets)
        try:
            return rectify(claim, evidence, llm, pipeline, media_store, cuts, leaks)
        except Exception as err:  # noqa: BLE001 - the original claim stays even when its rewrite crashes
            if getattr(err, "stops_stage", False):  # the LLM budget stops the stage instead
                raise
            return None, RecordError.of(err)

    compromised = [c for c in claims if c.integrity.label == "compromised"]
    if pipeline.rectify not in ("demand", "all"):
        raise ValueError(f"stages.rectify must be demand or all, not {pipeline.rectify!r}")
    # recurring: drop leaves claims of earlier releases out at the release, which demand cannot foresee: no release
    # can be this stage's input (the release reads this stage: Dagster refuses the cycle), so it rewrites every one
    every = pipeline.rectify == "all" or pipeline.recurring == "drop"
    if every:
        work = prefetch(compromised, attempt, llm.parallel_claims)
        outcomes = {c.claim_id: work(c) for c in compromised}
    else:
        outcomes = rectify_on_demand(claims, attempt, llm.parallel_claims, pipeline, stats, log)
    stats.extra["rectify/mode"] = "all (recurring: drop)" if every and pipeline.rectify == "demand" else pipeline.rectify
    stats.extra["rectify/attempted"] = len(outcomes)

    def one(claim: ScoredClaim):
        if claim.integrity.label != "compromised":
            return claim, ""
        if claim.claim_id not in outcomes:
            count(stats, "not_rectified/not_needed_for_release")
            return claim, ""
        rectified, reason = outcomes[claim.claim_id]
        if isinstance(reason, RecordError):
            budget.note(claim, reason)
        if rectified is None:
            count(stats, f"not_rectified/{reason}")
            return claim, ""
        return [claim.model_copy(update={"variant_of": rectified.claim_id}), rectified], ""

    out = map_records(STAGE, claims, one, stats, log)
    stats.extra["rectified"] = sum(c.variant == "rectified" for c in out)
    return out, stats


def rectify_on_demand(claims: list[ScoredClaim], attempt, parallel: int, pipeline: PipelineResource,
                      stats: StageYield, log=None) -> dict[str, tuple]:
    """Rewrites, round by round, only the Compromised claims the release needs as Intact variants (DemandPlan): each
    round starts as many rewrites as the variants still lacking call for at the quarter's success rate so far; it
    stops once the selection reaches its target, or when no candidate is left. Returns claim id -> outcome of every
    rewrite made."""
    plan = DemandPlan(claims, pipeline)
    outcomes: dict[str, tuple] = {}
    variants: list[ScoredClaim] = []
    left = list(plan.candidates)
    planned = needed = plan.needed([], left)
    rounds = 0
    while needed and left:
        batch = left[: plan.batch(needed, len(outcomes), len(variants))]
        left = left[len(batch):]
        work = prefetch(batch, attempt, parallel)
        for claim in batch:
            outcomes[claim.claim_id] = work(claim)
            if outcomes[claim.claim_id][0] is not None:
                variants.append(outcomes[claim.claim_id][0])
        rounds += 1
        needed = plan.needed(variants, left)
        if log:
            log.info(f"{STAGE}: round {rounds}: {len(variants)} of {len(outcomes)} rewrites held; "
                     + (f"{needed} more variants needed, {len(left)} candidates left" if needed else "enough for the release"))
    reached = plan.feasible(variants)
    rate = len(variants) / len(outcomes) if outcomes else 0.0
    if reached < plan.target and log:
        log.warning(f"{STAGE}: the rewrites that held reach a release of {reached}, short of the {plan.target} that "
                    f"every rewrite holding would allow: {len(outcomes) - len(variants)} of {len(outcomes)} failed")
    if reached < pipeline.release_size and pipeline.score == "demand" and rate < pipeline.expected_rewrite_success \
            and log:
        log.warning(f"{STAGE}: {rate:.0%} of the rewrites held, less than the {pipeline.expected_rewrite_success:.0%} "
                    f"scored_claims counted on when it scored on demand: the release reaches {reached} of "
                    f"{pipeline.release_size}. Run scored_claims again with stages.expected_rewrite_success: "
                    f"{max(rate, 0.05):.2f} (or stages.score: all), then this stage")
    stats.extra.update({
        "rectify/target_size": plan.target, "rectify/size_without": plan.without, "rectify/size_reached": reached,
        "rectify/planned": planned, "rectify/rounds": rounds,
        "rectify/success_rate": round(rate, 4),
    })
    return outcomes


rectified_claims = llm_claim_asset(
    STAGE,
    "Stage 7: originals plus Intact rectified variants of Compromised claims, linked both ways.",
    upstream="scored_claims", in_model=ScoredClaim, out_model=ScoredClaim, process=rectify_all,
)
