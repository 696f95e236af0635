"""Stage 7: rewrite Compromised claims into true, shareable assertions; keep them only if they score Intact."""

import math
from collections import Counter

import dagster as dg
from rapidfuzz.distance import Levenshtein

from assets.ensemble.asking import ask
from assets.ensemble.evidence import evidence_budgets, member_evidence
from assets.ensemble.llm_stage import claim_stage_asset, run_claim_stage
from assets.ensemble.rounds import overlapped_rounds, prefetch
from assets.ensemble.scoring import failed_answer_error, failure_counts, lost_to_failures, score_claim
from assets.rules.claim_text import LeakVocabulary, check_claim_text, with_media_refs
from assets.rules.ids import stable_id
from assets.rules.length import MEDIA_REF
from assets.rules.negation import hedges, negations
from assets.selection.channels import carries_wording, consistent_with_media, media_texts, shown_words
from assets.selection.demand import DemandPlan, variants_wanted
from assets.stage.record_errors import ErrorBudget, RecordError, map_records
from assets.stage.tables import StageYield, count, quantiles
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import (
    ClaimRules,
    DemandSettings,
    ErrorBudgetSettings,
    EvidenceSettings,
    RectifySettings,
    ReleaseSettings,
    ScoreSettings,
)
from schemas.answers import ClaimTextAnswer, RectifiedCheckAnswer
from schemas.records import (
    Article,
    EvidenceCut,
    NormalizedClaim,
    PropertyVerdict,
    ScoredClaim,
)

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


def added_cues(original: str, rewrite: str, language: str) -> str:
    """The negation or hedge words a rewrite adds to its claim, as a refusal reason ("" when none): such a rewrite
    reads as a correction ("There is no evidence that ...") and tells itself from the claims people post (NLI's
    annotation artifacts: negation predicts the label)."""
    for kind, find in (("negation", negations), ("hedge", hedges)):
        added = sorted(find(rewrite, language) - find(original, language))
        if added:
            return f"adds_{kind}:{','.join(added)}"
    return ""


def edit_ratio(original: str, rewrite: str) -> float:
    """The word-level edit distance from the claim to its rewrite over the longer one's words (0: the same words,
    1: nothing kept); media references left out."""
    a, b = MEDIA_REF.sub(" ", original).casefold().split(), MEDIA_REF.sub(" ", rewrite).casefold().split()
    return round(Levenshtein.normalized_distance(a, b), 4) if a or b else 0.0


CRITIQUES = {  # what a rule's refusal tells the writer on the next round
    "adds_negation": "it adds negation words ({words}) that the claim lacks: it reads as a denial, not as a post. "
                     "Replace the false detail with the true one instead",
    "adds_hedge": "it adds hedge words ({words}) that the claim lacks. State the true detail as plainly as the claim "
                  "states the false one",
    "verdict_leak": "it uses a verdict word or the fact-checker's rating. Say what is true without judging the claim",
    "too_many_words": "it is too long: at most {max_words} words",
    "too_many_sentences": "it has too many sentences: at most {max_sentences}",
    "language_changed": "it is not in the claim's language ({language}). Write it in that language",
    "missing_referenced_medium": "it refers to a medium the claim does not have. Keep only the claim's references",
    "reports_a_claim": "it reports that someone claims something. State the true assertion itself",
    "media_inconsistent": "it changes words that the claim's own media show ({words}): the picture keeps the claim's "
                          "words, so keep them as they are and change only what the media do not show",
}


def critique_of(problem: str, claim: ScoredClaim, claim_rules: ClaimRules) -> str:
    kind, _, words = problem.partition(":")
    template = CRITIQUES.get(kind, "it failed a check ({kind})")
    return template.format(words=words, kind=kind, max_words=claim_rules.max_words,
                           max_sentences=claim_rules.max_sentences, language=claim.language)


def refinements(rectifying: RectifySettings) -> int:
    """The rounds a refused rewrite may go back to its writer for after its first draft (``stages.refine_rounds``):
    what rectify allows, and what ``veritas plan`` counts on."""
    return rectifying.refine_rounds


def failure(answer, role: str) -> str:
    """A model call that gave no usable answer, as a drop reason with its cause (refusal, timeout, invalid...)."""
    cause = (answer.error or "no_answer").split(":")[0].strip() or "no_answer"
    return f"{role}_failed:{cause}"


def media_kind(claim) -> str:
    """The claim's kinds of media, as the stage counts them ("image", "video", "image+video", "none")."""
    return "+".join(sorted({m.kind for m in claim.media})) or "none"


def media_problem(texts: list[str] | None, original: str, rewrite: str) -> str:
    """The media consistency rule (issue 49): a claim whose media carry its own wording (``channels.carries_wording``:
    a screenshot of the post, a caption burned into the picture) keeps a rewrite only if the rewrite matches the
    media's text as well as the claim did (``channels.consistent_with_media``); else ``media_inconsistent:<the
    words shown>``. A released rewrite beside a picture of the claim's own words told it from natural claims: 3-bin
    accuracy 0.65 from that one comparison on the default rehearsal, against a majority of 0.49."""
    if not texts or consistent_with_media(texts, original, rewrite):
        return ""
    return f"media_inconsistent:{shown_words(texts, original)}"


def rectify(
    claim: ScoredClaim, evidence: dict[str, str], llm: LLMResource, rectifying: RectifySettings,
    scoring: ScoreSettings, claim_rules: ClaimRules, media_store: MediaStore, evidence_cuts: list[EvidenceCut] = (),
    leaks: LeakVocabulary | None = None, media_text: list[str] | None = None,
) -> tuple[ScoredClaim | None, str, dict]:
    """Rewrite as a minimal edit, have the rules and another member check it, and on a refusal send the reason back
    to the writer for up to ``refine_rounds`` more rounds (MMCV's critique-and-refine loop); re-score the accepted
    rewrite: only an Intact result is kept. ``media_text``: the text stage 5's OCR read in the claim's media (one
    per image or video frame; None: not read): the rewrite must stay consistent with it (``media_problem``), and the
    checker is shown it. Returns (variant or None, reason, trace): the trace says the rounds taken, the refusals on
    the way, what the rounds after the first cost, the re-score's failed answers, and whether the media carry the
    claim's wording."""
    member = llm.member_names()[0]
    checker = checker_for(llm, member)
    verdict = decisive_verdict(claim)
    common = {
        "stage": STAGE, "media": claim.media, "media_store": media_store, "language": claim.language,
        "claim_date": str(claim.claim_date or ""),
    }
    trace = {"rounds": 0, "refusals": [], "refine_calls": 0, "refine_cost_usd": 0.0, "media_kind": media_kind(claim),
             "media_carry": bool(media_text) and carries_wording(media_text, claim.text), "writer_calls": 0}
    shown = shown_words(media_text, claim.text, 200) if media_text else ""  # what the checker is shown
    told = shown if trace["media_carry"] else ""  # and the writer, where the rule asks the rewrite to keep it
    previous = critique = reason = ""
    text = ""
    for round_ in range(refinements(rectifying) + 1):
        trace["rounds"] = round_ + 1
        answer = ask(
            llm, member, "rectify_claim", ClaimTextAnswer, claim=claim.text, evidence=evidence.get(member, ""),
            decisive_property=claim.integrity.decisive_property, justification=verdict.justification if verdict else "",
            max_words=claim_rules.max_words, max_sentences=claim_rules.max_sentences, previous=previous,
            critique=critique, round=round_, media_text=told, **common,
        )
        calls = [answer]
        trace["writer_calls"] += 1
        if answer.parsed is None:
            return None, failure(answer, "rewrite"), trace
        text = with_media_refs(answer.parsed["claim"], claim.media)
        problem = check_claim_text(text, claim.media, claim.language, claim_rules, leaks, claim.rating_text,
                                   original=claim.text) or added_cues(claim.text, text, claim.language) or (
                   media_problem(media_text, claim.text, text) if trace["media_carry"] else "")
        if not problem:
            check = ask(llm, checker, "check_rectified", RectifiedCheckAnswer, original=claim.text, claim=text,
                        evidence=evidence.get(checker, ""), media_text=shown, **common)
            calls.append(check)
            if check.parsed is None:
                return None, failure(check, "check"), trace
            if check.parsed["consistent"] != "yes":
                problem = "inconsistent"
            elif check.parsed["shareable"] != "yes":
                problem = "not_shareable"
            critique = (check.parsed.get("critique") or "").strip() or (
                "it is not consistent with the evidence" if problem == "inconsistent" else
                "it does not read as a post that stands on its own")
        else:
            critique = critique_of(problem, claim, claim_rules)
        if round_:
            trace["refine_calls"] += len(calls)
            trace["refine_cost_usd"] += sum(a.cost_usd for a in calls if not a.cache_hit)
        if not problem:
            break
        trace["refusals"].append(problem.split(":")[0])
        reason, previous = problem, text
    else:
        kind = reason.split(":")[0]
        return None, "rewrite_language_changed" if kind == "language_changed" else (
            kind if kind in ("inconsistent", "not_shareable", "media_inconsistent") or kind.startswith("adds_")
            else "rewrite_invalid"), trace
    rectified_id = stable_id(claim.review_id, "rectified")
    candidate = NormalizedClaim(**{**claim.model_dump(), "claim_id": rectified_id, "text": text, "normalization": "llm"})
    trace["rescore_failed"] = []  # the re-score's failed answers, counted per member and property like stage 6's
    scored, why = score_claim(candidate, evidence, llm, scoring, claim_rules, media_store, "rectified", claim.claim_id,
                              STAGE, evidence_cuts, failed=trace["rescore_failed"])
    if scored is None:
        return None, f"rescore_{why}", trace
    if scored.integrity.label != "intact":
        return None, f"rescored_{scored.integrity.label}", trace
    return scored.model_copy(update={"rewrite_rounds": trace["rounds"], "edit_ratio": edit_ratio(claim.text, text)}), "", trace


def rectify_all(
    claims: list[ScoredClaim], articles: dict[str, Article], llm: LLMResource, rectifying: RectifySettings,
    scoring: ScoreSettings, claim_rules: ClaimRules, evidence: EvidenceSettings, demand: DemandSettings,
    release_rules: ReleaseSettings, error_budget: ErrorBudgetSettings, media_store: MediaStore, log=None,
    key: bytes | None = None,
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
    budgets = evidence_budgets(llm, evidence)
    leaks = LeakVocabulary.from_reviews(claims)
    reader = media_texts(llm.cache_path, media_store)  # stage 5's OCR of the media, from its cache

    def attempt(claim: ScoredClaim):
        article = articles.get(claim.review_id)
        if article is None or not article.text.strip():  # a rewrite is checked against the article, or not made
            return None, "no_evidence", {}
        texts, cuts = member_evidence(article, claim.text, budgets)
        try:
            shown = reader(claim.media) if claim.media else []
            return rectify(claim, texts, llm, rectifying, scoring, claim_rules, media_store, cuts, leaks, shown)
        except Exception as err:  # noqa: BLE001 - the original claim stays even when its rewrite crashes
            if getattr(err, "stops_stage", False):  # the LLM budget stops the stage instead
                raise
            return None, RecordError.of(err), {}

    compromised = [c for c in claims if c.integrity.label == "compromised"]
    if demand.rectify not in ("demand", "all"):
        raise ValueError(f"stages.rectify must be demand or all, not {demand.rectify!r}")
    # recurring: drop leaves claims of earlier releases out at the release, which demand cannot foresee: no release
    # can be this stage's input (the release reads this stage: Dagster refuses the cycle), so it rewrites every one
    every = demand.rectify == "all" or release_rules.recurring == "drop"
    if every:
        work = prefetch(compromised, attempt, llm.parallel_claims, log, STAGE)
        outcomes = {c.claim_id: work(c) for c in compromised}
    else:
        if key is None:
            raise ValueError("stages.rectify: demand rewrites in the release's secret order: pass the store's key")
        outcomes = rectify_on_demand(claims, attempt, llm.parallel_claims, demand, release_rules, claim_rules, stats,
                                     log, key, reader)
    stats.extra["rectify/mode"] = "all (recurring: drop)" if every and demand.rectify == "demand" else demand.rectify
    stats.extra["rectify/attempted"] = len(outcomes)
    # a rewrite that raises, or whose writer or checker gave no answer, keeps its original claim but counts against
    # the error budget of the rewrites attempted (not of every Compromised claim: on demand most are never tried)
    budget = ErrorBudget.for_stage(error_budget, STAGE, len(outcomes), log)
    stats.extra.update(refine_report(outcomes.values(), refinements(rectifying)))

    def one(claim: ScoredClaim):
        if claim.integrity.label != "compromised":
            return claim, ""
        if claim.claim_id not in outcomes:
            count(stats, "not_rectified/not_needed_for_release")
            return claim, ""
        rectified, reason, trace = outcomes[claim.claim_id]
        rescore = reason.removeprefix("rescore_") if isinstance(reason, str) else ""
        failed = (trace or {}).get("rescore_failed", [])
        if isinstance(reason, RecordError):
            budget.note(claim, reason)
        elif reason.startswith(("rewrite_failed:", "check_failed:")):  # a model's refusal, timeout or invalid answer
            role, cause = reason.split("_failed:")
            budget.note(claim, RecordError(f"{role}_failed:{cause}"))
        elif reason.startswith("rescore_") and lost_to_failures(None, rescore, failed):  # as stage 6 counts a claim
            budget.note(claim, failed_answer_error(rescore, failed, len(llm.member_names()), scoring.min_ratings,
                                                   scoring.refusal_min_ratings, what="the rewrite"))
        if rectified is None:
            count(stats, f"not_rectified/{reason}")
            return claim, ""
        return [claim.model_copy(update={"variant_of": rectified.claim_id}), rectified], ""

    stats.extra.update(rescore_failures(outcomes.values()))
    stats.extra.update(media_report(outcomes.values(), reader.unread))
    reader.close()
    out = map_records(STAGE, claims, one, stats, log)
    stats.extra["rectified"] = sum(c.variant == "rectified" for c in out)
    return out, stats


def rescore_failures(outcomes) -> dict:
    """The re-scores' failed answers (refusals, timeouts, invalid answers) as stage 6 counts its own:
    ``failed_answers/<kind>/<member>/<property>`` and the totals, with the rewrites they lost
    (``failed_answers/rewrites_lost``) and those the other members' ratings kept (``failed_answers/rewrites_kept``)."""
    meta: Counter = Counter()
    for variant, reason, trace in outcomes:
        failed = trace.get("rescore_failed", []) if isinstance(trace, dict) else []
        if not failed:
            continue
        meta.update(failure_counts(failed))
        if lost_to_failures(variant, reason.removeprefix("rescore_"), failed):
            meta["failed_answers/rewrites_lost"] += 1
        elif variant is not None or reason.startswith("rescored_"):  # scored all the same (refusal_min_ratings)
            meta["failed_answers/rewrites_kept"] += 1
    return dict(meta)


def media_report(outcomes, unread: int = 0) -> dict:
    """What the media consistency rule did over the rewrites attempted, by the claim's kind of media: the candidates
    whose media carry their wording (``rectify/media_carry/<kind>``), those it refused in some round
    (``rectify/media_refused/<kind>``), those it excluded (no rewrite held that kept the media's words:
    ``rectify/media_excluded/<kind>``; another candidate takes their place), and the writer calls those spent
    (``rectify/media_excluded_writer_calls``: the rule refuses before the checker is asked); the media whose text
    could not be read (``rectify/media_text_unread``: the rule was not applied to their claims)."""
    meta: Counter = Counter()
    for _, reason, trace in outcomes:
        if not isinstance(trace, dict) or not trace.get("media_carry"):
            continue
        kind = trace.get("media_kind", "none")
        meta[f"rectify/media_carry/{kind}"] += 1
        meta[f"rectify/media_refused/{kind}"] += "media_inconsistent" in trace.get("refusals", [])
        if reason == "media_inconsistent":
            meta[f"rectify/media_excluded/{kind}"] += 1
            meta["rectify/media_excluded_writer_calls"] += trace.get("writer_calls", 0)
    return {**dict(meta), "rectify/media_text_unread": unread}


RUNNING_Z = 1.645  # the rewrites still running count for this many standard deviations fewer than the rate says


def running_held(running: int, rate: float) -> float:
    """The variants that ``running`` rewrites are counted on for, at the success rate so far: its binomial mean less
    RUNNING_Z standard deviations, so that the check once they are done seldom finds one lacking. Counted at the mean,
    34 of 48 running rewrites held in the default rehearsal where 40 were expected, and a round of 2 rewrites for the
    one variant lacking added 10 s to the stage's end. Where the running ones hold at the rate so far, one such check
    in 20 falls short, against one in 2 at the mean."""
    return max(0.0, rate * running - RUNNING_Z * math.sqrt(running * rate * (1 - rate)))


def rectify_on_demand(claims: list[ScoredClaim], attempt, parallel: int, demand: DemandSettings,
                      release_rules: ReleaseSettings, claim_rules: ClaimRules, stats: StageYield, log=None,
                      key: bytes = b"", media_text=None) -> dict[str, tuple]:
    """Rewrites, round by round, only the Compromised claims the release needs as Intact variants (DemandPlan): each
    round starts as many rewrites as the variants still lacking call for at the quarter's success rate so far; it
    stops once the selection reaches its target with ``rectify_surplus`` more variants than it uses, and with enough
    that the release's adversarial filter, leaving out the share of them it tells from natural claims, still keeps
    as many as the selection uses; or when no candidate is left. A round is decided while the last one's slowest
    rewrites still run, counting on them as ``running_held`` does, and checked once they are done
    (``overlapped_rounds``). Returns claim id -> outcome of every rewrite made."""
    plan = DemandPlan(claims, release_rules, claim_rules, key, media_text)  # its filter reads the media's text too
    outcomes: dict[str, tuple] = {}
    variants: list[ScoredClaim] = []
    left = list(plan.candidates)
    planned = plan.needed([], left)
    needed = variants_wanted(planned, demand.rectify_surplus)  # nothing measured yet: the surplus alone
    detectable: list[float] = []  # the share of the rewrites the release's adversarial filter leaves out, per check
    uses: list[int] = []  # the variants the selection uses, per check

    def lacking(running: list[ScoredClaim]) -> float:
        """Variants still wanted, less those the ``running`` rewrites are expected to give: the selection will use
        those it has and those it lacks; the release's adversarial filter needs ``rectify_surplus`` more, and more
        again where it would leave out a larger share of them than that (measured as the release will measure it),
        so that the ones it keeps still cover them."""
        rate = len(variants) / len(outcomes) if outcomes else 1.0
        short = plan.needed(variants, running + left)  # as if every running rewrite held
        chosen = plan.selection(variants)[0]
        uses.append(sum(c.variant == "rectified" for c in chosen))
        share = None
        if demand.rectify_surplus and variants:  # no spare asked for: the release has none to leave out
            share = round(plan.detectable_share(variants, chosen), 4)
            detectable.append(share)
        wanted = max(short, variants_wanted(uses[-1] + short, demand.rectify_surplus, share) - len(variants))
        return wanted - running_held(len(running), rate)

    def decide(done: list[tuple], running: list[ScoredClaim]) -> list[ScoredClaim]:
        for claim, outcome in done[len(outcomes):]:
            outcomes[claim.claim_id] = outcome
            if outcome[0] is not None:  # (variant or None, reason, trace)
                variants.append(outcome[0])
        more = math.ceil(lacking(running)) if left or not running else 0  # the end is measured even with none left
        batch = left[: plan.batch(more, len(outcomes), len(variants))] if more > 0 else []
        del left[: len(batch)]
        if log:
            log.info(f"{STAGE}: {len(variants)} of {len(outcomes)} rewrites held, {len(running)} running; "
                     + (f"{len(batch)} more started for {more} variants lacking, {len(left)} candidates left" if batch
                        else "no more needed" if more <= 0 and (left or not running) else "no candidate left"))
        return batch

    first = left[:needed]
    del left[:needed]
    _, rounds = overlapped_rounds(first, attempt, parallel, decide, log, STAGE)
    reached = plan.feasible(variants)
    rate = len(variants) / len(outcomes) if outcomes else 0.0
    if reached < plan.target and log:
        log.warning(f"{STAGE}: the rewrites that held reach a release of {reached}, short of the {plan.target} that "
                    f"every rewrite holding would allow: {len(outcomes) - len(variants)} of {len(outcomes)} failed")
    if reached < release_rules.release_size and demand.score == "demand" \
            and rate < demand.expected_rewrite_success and log:
        log.warning(f"{STAGE}: {rate:.0%} of the rewrites held, less than the {demand.expected_rewrite_success:.0%} "
                    f"scored_claims counted on when it scored on demand: the release reaches {reached} of "
                    f"{release_rules.release_size}. Run scored_claims again with stages.expected_rewrite_success: "
                    f"{max(rate, 0.05):.2f} (or stages.score: all), then this stage")
    stats.extra.update({
        "rectify/target_size": plan.target, "rectify/size_without": plan.without, "rectify/size_reached": reached,
        "rectify/planned": planned, "rectify/rounds": rounds,
        "rectify/success_rate": round(rate, 4),
    })
    if detectable:  # the share of its rewrites the release's adversarial filter leaves out, last measured
        stats.extra["rectify/detectable_share"] = detectable[-1]
        if len(variants) * (1 - detectable[-1]) < uses[-1] and log:
            log.warning(f"{STAGE}: the release's adversarial filter tells {detectable[-1]:.0%} of the rewrites from "
                        f"natural claims, and no candidate is left for more: the release will keep some it would "
                        "leave out, and the shortcut audit may block it (see the rewrite prompt and the writer model)")
    return outcomes


def refine_report(outcomes, refine_rounds: int) -> dict:
    """What the critique-and-refine loop did over the rewrites attempted: variants by the round they held in (round
    1 is the first draft), the variants the later rounds saved, their calls and cost, the refusals on the way by
    reason, and the variants' word-level edit ratio against their claim (quantiles)."""
    held = [(v, trace) for v, _, trace in outcomes if v is not None]
    refusals = Counter(r for _, _, trace in outcomes for r in trace.get("refusals", []))
    out = {"refine/rounds_allowed": refine_rounds,
           "refine/saved": sum(trace["rounds"] > 1 for _, trace in held),
           "refine/calls": sum(trace.get("refine_calls", 0) for _, _, trace in outcomes),
           "refine/cost_usd": round(sum(trace.get("refine_cost_usd", 0.0) for _, _, trace in outcomes), 6),
           **{f"refine/held_in_round_{r}": sum(trace["rounds"] == r for _, trace in held) for r in
              range(1, refine_rounds + 2)},
           **{f"refine/refused/{k}": n for k, n in sorted(refusals.items())}}
    out.update({f"edit_ratio/{k}": v for k, v in quantiles(v.edit_ratio for v, _ in held
                                                            if v.edit_ratio is not None).items()})
    return out


@claim_stage_asset(STAGE, "Stage 7: originals plus Intact rectified variants of Compromised claims, linked both ways.",
                   upstream="scored_claims")
def rectified_claims(context: dg.AssetExecutionContext, rectifying: RectifySettings, scoring: ScoreSettings,
                     claim_rules: ClaimRules, evidence: EvidenceSettings, demand: DemandSettings,
                     release_rules: ReleaseSettings, error_budget: ErrorBudgetSettings, store: StoreResource,
                     llm: LLMResource) -> dg.MaterializeResult:
    return run_claim_stage(context, store, llm, STAGE, "scored_claims", ScoredClaim, ScoredClaim,
                           lambda claims, articles, media_store, log, key: rectify_all(
                               claims, articles, llm, rectifying, scoring, claim_rules, evidence, demand,
                               release_rules, error_budget, media_store, log, key=key), keyed=True)
