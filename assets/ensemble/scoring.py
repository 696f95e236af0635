"""Scoring a claim from the members' ratings, shared by stage 6 (the natural claims), stage 7 (the re-score of a
rewrite), the verifier and ``veritas agreement``: the questions in the spec's order, each property's verdict (the
members' mean with its spread), the disagreement filter, and the claim's integrity with its decisive property."""

import re
import statistics
from collections import Counter
from types import SimpleNamespace

from rapidfuzz import fuzz

from assets.ensemble.asking import ask, ask_each
from assets.ensemble.injection import drops_flagged, injection_flags
from assets.rules.bins import (  # noqa: F401 - re-exported: the stage's bins
    EPS,
    PUBLISHED_DECIMALS,
    PUBLISHED_TOLERANCE,
    _num,
    bin3,
    bin3_published,
    bin7,
    bin7_published,
)
from assets.rules.failed_answers import FailedAnswer, failure_kind
from assets.stage.record_errors import RecordError
from dagster_project.stage_settings import ClaimRules, ScoreSettings
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from prompts import label_scheme
from schemas.answers import MediaRatingAnswer, PropertyAnswer
from schemas.records import (
    CLAIM_PROPERTIES,
    MEDIA_PROPERTIES,
    EvidenceCut,
    Integrity,
    NormalizedClaim,
    PropertyVerdict,
    Rating,
    ScoredClaim,
)

SCORED_STAGE = "scored_claims"  # the stage whose ledger a score's calls go to unless the caller names its own


def certainty_score(category: str, certainty: str) -> float:
    """certain 1, rather certain 2/3, rather uncertain 1/3; the sign is the category; unknown is 0."""
    if category == "unknown":
        return 0.0
    value = _num(label_scheme()["certainty"][certainty])
    return value if category == "positive" else -value


def to_rating(member: str, prop: str, answer: dict, medium_index: int = -1, raw: str = "") -> Rating:
    tags = [t for t in answer.get("tags", []) if t in label_scheme()["properties"][prop]["tags"]]
    return Rating(
        member=member, property=prop, medium_index=medium_index, category=answer["category"],
        certainty=answer["certainty"] if answer["category"] != "unknown" else "unknown",
        score=certainty_score(answer["category"], answer["certainty"]), justification=answer["justification"],
        tags=tags, raw=raw,
    )


# A sentence ends at . ! ? before a space, or at their CJK forms; a regex is enough to cut explanations of at
# most 600 characters into points (nltk's punkt would need a data download).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[\u3002\uff01\uff1f])\s*")


MERGE_AGREEMENT = 0.5  # raters this close to the ensemble mean agree with it and contribute to the justification


MERGE_DUPLICATE = 85  # rapidfuzz token_sort_ratio at or above which a sentence repeats one already kept


MERGE_MAX_CHARS = 900


def merge_justifications(ratings: list[Rating], mean: float) -> str:
    """One justification from the members': the explanations of the raters that agree with the ensemble score,
    nearest the mean first, cut into sentences, with sentences that repeat an earlier one (reworded or
    reordered) left out. A rater whose score is far from the mean argued for another verdict and is left out."""
    agreeing = sorted((r for r in ratings if r.justification.strip()), key=lambda r: abs(r.score - mean))
    agreeing = [r for i, r in enumerate(agreeing) if i == 0 or abs(r.score - mean) <= MERGE_AGREEMENT]
    kept: list[str] = []
    for rating in agreeing:
        for sentence in _SENTENCE_END.split(" ".join(rating.justification.split())):
            if not sentence or any(fuzz.token_sort_ratio(sentence.lower(), k.lower()) >= MERGE_DUPLICATE for k in kept):
                continue
            if kept and sum(len(k) + 1 for k in kept) + len(sentence) > MERGE_MAX_CHARS:
                return " ".join(kept)
            kept.append(sentence)
    return " ".join(kept)


def aggregate(ratings: list[Rating], prop: str, medium_index: int = -1) -> PropertyVerdict | None:
    """Mean score; tags given by at least half the raters; one justification merged from the agreeing raters'."""
    mine = [r for r in ratings if r.property == prop and r.medium_index == medium_index]
    if not mine:
        return None
    scores = [r.score for r in mine]
    mean = statistics.fmean(scores)
    tag_votes = Counter(t for r in mine for t in set(r.tags))
    return PropertyVerdict(
        property=prop, medium_index=medium_index, score=max(-1.0, min(1.0, mean)), n_ratings=len(mine),
        spread=max(scores) - min(scores), justification=merge_justifications(mine, mean),
        tags=sorted(t for t, n in tag_votes.items() if n * 2 >= len(mine)),
    )


def integrity_of(media_verdicts: list[PropertyVerdict], veracity, coverage) -> tuple[Integrity, PropertyVerdict] | None:
    """The lowest of context coverage, veracity and the worst media contextualization; scores within the bins'
    EPS of the lowest tie, and ties go in decisive order. The score is the lowest itself, unrounded: predictions are
    scored on it, and only the release rounds (2 decimals)."""
    contextualization = [v for v in media_verdicts if v.property == "contextualization"]
    candidates = {
        "context_coverage": coverage,
        "veracity": veracity,
        "contextualization": min(contextualization, key=lambda v: v.score) if contextualization else None,
    }
    order = label_scheme()["decisive_order"]
    present = [(order.index(name), name, v) for name, v in candidates.items() if v is not None]
    if not present:
        return None
    lowest = min(v.score for _, _, v in present)
    _, name, verdict = min(p for p in present if p[2].score <= lowest + EPS)
    return Integrity(score=lowest, decisive_property=name, label=bin3(lowest)), verdict


def stops_at_media(worst_contextualization: PropertyVerdict | None) -> bool:
    """A medium out of context (Compromised bin) decides the claim: veracity and coverage are not asked."""
    return worst_contextualization is not None and bin3(worst_contextualization.score) == "compromised"


def asks_coverage(veracity: PropertyVerdict | None) -> bool:
    """Context coverage is only a question for a claim whose assertions lean true; a mean within EPS of 0 (the
    float mean of 1, -1/3 and -2/3 is +1.85e-17) is 0, and does not lean either way."""
    return veracity is not None and veracity.score > EPS


def required_ratings(min_ratings: int, refused: int, refusal_min_ratings: int) -> int:
    """The valid ratings a property needs: ``min_ratings``, less one per member that refused it, down to
    ``refusal_min_ratings`` (stages.refusal_min_ratings). A refusal is systematic (a provider refuses violent or
    sexual imagery every time), so requiring every member would drop exactly the claims about such media; two
    ratings still give the disagreement filter a spread. Timeouts and invalid answers lower nothing."""
    return min(min_ratings, max(refusal_min_ratings, min_ratings - refused))


def refusals_of(failed: list[FailedAnswer]) -> Counter:
    """(property, medium index) -> how many members refused it."""
    return Counter((p, f.medium_index) for f in failed if f.kind == "refusal" for p in f.properties)


def lost_to_failures(scored: ScoredClaim | None, reason: str, failed: list[FailedAnswer]) -> bool:
    """A claim (or a rewrite's re-score) dropped because members' answers failed: no_ratings, or too few ratings of a
    required property."""
    return scored is None and bool(failed) and (reason == "no_ratings" or reason.startswith("incomplete_ratings:"))


def losing_failure(reason: str, failed: list[FailedAnswer], members: int, min_ratings: int,
                   refusal_min_ratings: int) -> FailedAnswer:
    """The failed answer that lost a claim dropped as ``reason``: on the property that lacks ratings (the first one
    asked, for no_ratings), taking the members' failures in their order, the one after which the valid ratings fell
    below what the property needs (required_ratings). A refusal lowers that need, so it is often a later timeout or
    invalid answer that lost the claim, not the first failure seen."""
    prop = reason.partition(":")[2] or failed[0].properties[0]
    groups: dict[int, list[FailedAnswer]] = {}
    for f in failed:
        if prop in f.properties:
            groups.setdefault(f.medium_index, []).append(f)
    for group in groups.values():
        refused = 0
        for asked, f in enumerate(group, 1):
            refused += f.kind == "refusal"
            if members - asked < required_ratings(min_ratings, refused, refusal_min_ratings):
                return f
    return next(iter(groups.values()), failed)[-1]


def failed_answer_error(reason: str, failed: list[FailedAnswer], members: int, min_ratings: int,
                        refusal_min_ratings: int, what: str = "the claim") -> RecordError:
    """The error budget's entry for a claim (or rewrite) lost to failed answers: ``failed_answer:<kind>:<member>`` of
    the failure that lost it (losing_failure), with its error and the property's other failures."""
    lost = losing_failure(reason, failed, members, min_ratings, refusal_min_ratings)
    others = [f"{f.member} {f.kind}" for f in failed if f is not lost and f.medium_index == lost.medium_index
              and set(f.properties) & set(lost.properties)]
    err = RecordError(f"failed_answer:{lost.kind}:{lost.member}")
    err.message = (f"member {lost.member!r} gave no valid answer on {'/'.join(lost.properties)} ({lost.kind}: "
                   f"{lost.error[:200]}), so {what} is dropped as {reason}"
                   + (f" (the other failures there: {', '.join(others)})" if others else "")
                   + ". A refusal drops a claim only below stages.refusal_min_ratings ratings; for timeouts and "
                   "invalid answers see the member's endpoint, its timeout_s and `veritas costs`")
    err.where = "assets/ensemble/scoring.py in score_claim"
    return err


def failure_counts(failed: list[FailedAnswer]) -> Counter:
    """``failed_answers/<kind>``, ``.../<kind>/<member>`` and ``.../<kind>/<member>/<property>``: how many answers
    failed, per kind, member and property (the stage metadata of stages 6 and 7)."""
    out: Counter = Counter()
    for f in failed:
        out[f"failed_answers/{f.kind}"] += 1
        out[f"failed_answers/{f.kind}/{f.member}"] += 1
        for prop in f.properties:
            out[f"failed_answers/{f.kind}/{f.member}/{prop}"] += 1
    return out


def incomplete_property(n_media: int, verdicts: dict, min_ratings: int, refused: Counter | None = None,
                        refusal_min_ratings: int = 2) -> str:
    """The first property the order of assessment required that has fewer valid ratings than it needs
    (required_ratings: ``min_ratings``, or fewer where members refused it) (every medium's two, then veracity
    unless a medium is out of context, then coverage if veracity leans true)."""
    refused = refused or Counter()

    def short(v, prop: str, i: int = -1) -> bool:
        return v is None or v.n_ratings < required_ratings(min_ratings, refused[(prop, i)], refusal_min_ratings)

    media = {(v.property, v.medium_index): v for v in verdicts["media_verdicts"]}
    for i in range(n_media):
        for prop in ("contextualization", "authenticity"):
            if short(media.get((prop, i)), prop, i):
                return prop
    worst = min((v for v in verdicts["media_verdicts"] if v.property == "contextualization"),
                key=lambda v: v.score, default=None)
    if stops_at_media(worst):
        return ""
    for prop in CLAIM_PROPERTIES:
        if prop == "context_coverage" and not asks_coverage(verdicts["veracity"]):
            return ""
        if short(verdicts[prop], prop):
            return prop
    return ""


def agreement_failure(verdict: PropertyVerdict, max_spread: float) -> str:
    """Raters of the decisive property that disagree by more than ``max_spread`` drop the claim."""
    return "rater_disagreement" if verdict.spread > max_spread + EPS else ""


def rate(
    claim: NormalizedClaim, evidence: str | dict[str, str], llm: LLMResource, members: list[str],
    media_store: MediaStore | None, stage: str = SCORED_STAGE, min_ratings: int = 0, refusal_min_ratings: int = 2,
    failed: list[FailedAnswer] | None = None,
) -> tuple[list[Rating], int]:
    """All ratings in the spec's order: media first, veracity unless a medium is out of context, then coverage.
    ``evidence`` is one text for all or each member's own; questions stop once a property the order requires has
    fewer valid ratings than it needs (required_ratings; the claim is dropped then, so later answers would be paid
    for nothing). Returns the ratings and the number of failed answers; ``failed`` receives each failed answer."""
    base = {"claim": claim.text, "language": claim.language, "claim_date": str(claim.claim_date or "")}
    ratings, failures = [], 0
    failed = failed if failed is not None else []

    def evidence_of(member: str) -> str:
        return evidence if isinstance(evidence, str) else evidence.get(member, "")

    def collect(answer, build, member: str, properties: tuple[str, ...], medium_index: int = -1):
        nonlocal failures
        if answer.parsed is None:
            failures += 1
            failed.append(FailedAnswer(member, properties, medium_index, failure_kind(answer.error),
                                       (answer.error or "no answer")[:300]))
        else:
            ratings.extend(build(answer))

    def short(prop: str, medium_index: int = -1) -> bool:
        needed = required_ratings(min_ratings, refusals_of(failed)[(prop, medium_index)], refusal_min_ratings)
        return sum(r.property == prop and r.medium_index == medium_index for r in ratings) < needed

    for i, medium in enumerate(claim.media):
        answers = ask_each(llm, members, lambda member, i=i, medium=medium: ask(
            llm, member, "rate_media", MediaRatingAnswer, stage=stage, media=claim.media, media_store=media_store,
            medium_kind=medium.kind, medium_index=i, evidence=evidence_of(member), **base,
        ))
        for member, answer in zip(members, answers):
            collect(answer, lambda a, i=i, member=member: [
                to_rating(member, p, a.parsed[p], i, a.raw) for p in MEDIA_PROPERTIES
            ], member, tuple(MEDIA_PROPERTIES), i)
        if short("contextualization", i):
            return ratings, failures
    worst = min(
        (aggregate(ratings, "contextualization", i) for i in range(len(claim.media))),
        key=lambda v: v.score if v else 2, default=None,
    )
    if stops_at_media(worst):
        return ratings, failures
    for prop in CLAIM_PROPERTIES:
        if prop == "context_coverage" and not asks_coverage(aggregate(ratings, "veracity")):
            break
        answers = ask_each(llm, members, lambda member, prop=prop: ask(
            llm, member, "rate_claim", PropertyAnswer, stage=stage, media=claim.media, media_store=media_store,
            property=prop, evidence=evidence_of(member), **base,
        ))
        for member, answer in zip(members, answers):
            collect(answer, lambda a, member=member, prop=prop: [to_rating(member, prop, a.parsed, -1, a.raw)],
                    member, (prop,))
        if short(prop):
            break
    return ratings, failures


def verdicts_from(claim: NormalizedClaim, ratings: list[Rating]) -> dict:
    media_verdicts = [
        v for i in range(len(claim.media)) for p in MEDIA_PROPERTIES
        if (v := aggregate(ratings, p, i)) is not None
    ]
    return {
        "media_verdicts": media_verdicts,
        "veracity": aggregate(ratings, "veracity"),
        "context_coverage": aggregate(ratings, "context_coverage"),
    }


def score_claim(
    claim: NormalizedClaim, evidence: str | dict[str, str], llm: LLMResource, scoring: ScoreSettings,
    claim_rules: ClaimRules, media_store: MediaStore | None, variant: str = "original", variant_of: str = "", stage: str = SCORED_STAGE,
    evidence_cuts: list[EvidenceCut] = (), failed: list[FailedAnswer] | None = None, disagreed: list | None = None,
) -> tuple[ScoredClaim | None, str]:
    """Rate the claim with ``evidence`` (one text, or each member's own) and decide its integrity, or say why not.
    ``failed`` receives the members' failed answers (refusals, timeouts, invalid answers); ``disagreed`` the claims
    the disagreement filter drops, with their ratings (the agreement before the filter counts them)."""
    texts = [evidence] if isinstance(evidence, str) else list(dict.fromkeys(evidence.values()))  # members often share one
    flags = sorted(set(claim.injection_flags) | set(injection_flags(claim.text, *texts)))
    if flags != claim.injection_flags:  # the evidence speaks to the raters: recorded on the claim, never obeyed
        claim = claim.model_copy(update={"injection_flags": flags})
    if flags and drops_flagged(claim_rules):
        return None, "injection_flagged"
    failed = failed if failed is not None else []
    ratings, failures = rate(claim, evidence, llm, llm.member_names(), media_store, stage, scoring.min_ratings,
                             scoring.refusal_min_ratings, failed)
    if not ratings:
        return None, "no_ratings" if failures else "nothing_to_rate"
    verdicts = verdicts_from(claim, ratings)
    missing = incomplete_property(len(claim.media), verdicts, scoring.min_ratings, refusals_of(failed),
                                  scoring.refusal_min_ratings)
    if missing:
        return None, f"incomplete_ratings:{missing}"
    integrity, decisive = integrity_of(verdicts["media_verdicts"], verdicts["veracity"], verdicts["context_coverage"])
    reason = agreement_failure(decisive, scoring.max_rating_spread)
    if reason:
        if disagreed is not None:
            disagreed.append(SimpleNamespace(claim_id=claim.claim_id, ratings=ratings))
        return None, reason
    return ScoredClaim(
        **claim.model_dump(), **verdicts, integrity=integrity, ratings=ratings, variant=variant, variant_of=variant_of,
        evidence_cuts=list(evidence_cuts),
    ), ""
