"""Rectification on demand (``stages.rectify: demand``): how many Intact variants the quarter's release will lack,
worked out from the scored claims with the release's own selection rules, and which Compromised claims to rewrite
first to cover it."""

import math

from assets.rules.ids import stable_id
from assets.selection.adversarial import SLICE, filter_detectable
from assets.selection.release_selection import (
    filter_inputs,
    filter_seed,
    filter_spare,
    remove_near_duplicates,
    select_release,
    selection_rank,
    shown,
)
from dagster_project.stage_settings import ClaimRules, DemandSettings, ReleaseSettings
from schemas.records import Integrity, ScoredClaim

MIN_SUCCESS_RATE = 0.05  # a quarter whose rewrites nearly all fail still plans rounds of bounded size


def hypothetical_variant(claim: ScoredClaim) -> ScoredClaim:
    """What a rewrite of ``claim`` that holds up would add to the pool: an Intact variant with the claim's media."""
    return claim.model_copy(update={
        "claim_id": stable_id(claim.review_id, "rectified"), "variant": "rectified", "variant_of": claim.claim_id,
        "integrity": Integrity(score=1.0, decisive_property="veracity", label="intact"),
    })


def at_share(media: list, text: list, share: float, before: tuple[int, int] = (0, 0)) -> list:
    """The two lists merged, each in its order, so that every prefix, after ``before`` (media, text) claims already
    there, holds about ``share`` of media claims (media first while it is below the share)."""
    out, m, t = [], 0, 0
    m0, t0 = before
    while m < len(media) or t < len(text):
        if t >= len(text) or (m < len(media) and m + m0 < share * (m + m0 + t + t0 + 1)):
            out.append(media[m])
            m += 1
        else:
            out.append(text[t])
            t += 1
    return out


class DemandPlan:
    """The release's pool as the release will see it (originals, near-duplicates removed once, the way the release
    removes them), the size its selection can reach with every Compromised claim rectified (``target``), and the
    Compromised claims in the order their variants serve the release best (``candidates``): from the end of the
    release's own order, so that the claims it would pick as Compromised are the last to be turned into Intact
    ones, with media and text claims so that the Intact half (its natural claims and the variants) comes to the
    media share, and the Compromised claims left carry media alike (media first made the Intact half's media share
    0.91 against 0.61 in the Compromised half, and the shortcut audit blocked that release: the number of media told
    the label)."""

    def __init__(self, scored: list[ScoredClaim], release_rules: ReleaseSettings, claim_rules: ClaimRules, key: bytes,
                 media_text=None):
        self.size, self.media_share, self.key = release_rules.release_size, release_rules.media_share, key
        self.media_text = media_text  # the media's OCR text for the filter's channels (a channels.MediaTexts)
        rank = selection_rank(key)
        originals = sorted((c for c in scored if c.variant == "original"), key=rank)
        self.originals = originals  # near-duplicates too: the release's adversarial filter reads them all
        self.pool, self.near_duplicates = remove_near_duplicates(
            originals, release_rules.text_duplicate_similarity, claim_rules.near_duplicate_distance)
        compromised = [c for c in self.pool if c.integrity.label == "compromised"]
        natural = [c for c in self.pool if c.integrity.label == "intact"]  # the Intact half's claims before any variant
        every = [hypothetical_variant(c) for c in compromised]
        self.without = self.feasible([])
        self.target = min(self.size, self.feasible(every))
        # the Compromised half the selection takes does not depend on the variants: its claims are no candidates
        halves = {c.claim_id for c in self.selection(every)[0] if c.integrity.label == "compromised"}
        rest = sorted((c for c in compromised if c.claim_id not in halves), key=rank, reverse=True)
        self.candidates = at_share([c for c in rest if c.media], [c for c in rest if not c.media], self.media_share,
                                   (sum(bool(c.media) for c in natural), sum(not c.media for c in natural)))

    def with_variants(self, variants: list[ScoredClaim], pool: list[ScoredClaim] | None = None) -> list[ScoredClaim]:
        """The pool (or ``pool``) plus ``variants``, each original linked to its own, as stage 7 links them."""
        linked = {v.variant_of: v.claim_id for v in variants}
        pool = [c.model_copy(update={"variant_of": linked[c.claim_id]}) if c.claim_id in linked else c
                for c in (self.pool if pool is None else pool)]
        return pool + variants

    def selection(self, variants: list[ScoredClaim]) -> tuple[list[ScoredClaim], dict]:
        """The release's selection on the pool plus ``variants``, and its report."""
        return select_release(self.with_variants(variants), self.size, self.media_share, similarity=0.0, dedupe=False,
                              key=self.key)

    def detectable_share(self, variants: list[ScoredClaim], chosen: list[ScoredClaim]) -> float:
        """The share of ``variants`` the release's adversarial filter tells from natural claims, measured as the
        release measures it (its inputs, its seed) but with nothing it must keep: a writer whose rewrites stand out
        needs more of them (a fixed surplus of 30% left the filter no room on the simulated writer, whose templates
        are 40% of its rewrites, and the shortcut audit blocked the release). ``chosen``: the selection on the pool
        plus ``variants`` (``selection``)."""
        # the natural claims as the release passes them: every original, its near-duplicates too (without them the
        # filter saw 842 natural claims of the rehearsal's 1,035, left out 19% of the rewrites where the release's
        # own run would leave out 34%, and had no room)
        natural, usable, _ = filter_inputs(self.with_variants(variants, self.originals), chosen)
        if not usable:
            return 0.0
        _, left_out, _ = filter_detectable(natural, usable, keep_at_least=0, seed=filter_seed(self.key),
                                           corpus=self.originals, media_text=self.media_text, reference=shown(chosen))
        return len(left_out) / len(usable)

    def feasible(self, variants: list[ScoredClaim]) -> int:
        """The release size the selection reaches on the pool plus ``variants``."""
        return self.selection(variants)[1]["feasible_size"]

    def needed(self, variants: list[ScoredClaim], remaining: list[ScoredClaim]) -> int:
        """The fewest of ``remaining`` (in order) whose variants, with ``variants`` (the ones made so far), let the
        selection reach ``target``, or as far towards it as all of them would: 0 when no rewrite can help."""
        have = self.feasible(variants)
        goal = min(self.target, self.feasible(variants + [hypothetical_variant(c) for c in remaining]))
        if have >= goal:
            return 0
        low, high = 1, len(remaining)
        while low < high:  # the feasible size grows with the variants added: the first k that reaches the goal
            mid = (low + high) // 2
            if self.feasible(variants + [hypothetical_variant(c) for c in remaining[:mid]]) >= goal:
                high = mid
            else:
                low = mid + 1
        return high

    @staticmethod
    def batch(needed: int, attempts: int, successes: int) -> int:
        """Rewrites to start for ``needed`` more variants: as many as needed in the first round, then as many as the
        quarter's own success rate so far says it takes (the margin for rewrites that fail)."""
        rate = successes / attempts if attempts else 1.0
        return math.ceil(needed / max(rate, MIN_SUCCESS_RATE))


def variants_wanted(goal: int, surplus: float, share: float | None = None) -> int:
    """The variants stage 7 makes for a selection that uses ``goal``: ``surplus`` more, and where the release's
    adversarial filter leaves out ``share`` of them (None: not measured), enough that the ones it keeps still cover
    the selection, with a slice more (the next round's rewrites move the bins a little, so the share can grow with
    them: the rehearsal's third round once made 9 rewrites for the 7 that a grown share asked for)."""
    want = math.ceil(goal * (1 + surplus))
    if not surplus or share is None:  # no spare asked for: the release has none to leave out
        return want
    keeps = 1.0 - share - SLICE if share else 1.0
    return max(want, math.ceil(filter_spare(goal) / max(keeps, MIN_SUCCESS_RATE)))


def expected_label(claim) -> str:
    """The label a claim's fact-checker's rating predicts (intact, unknown or compromised); it decides no label."""
    from assets.rules.ratings import rating_category

    category = rating_category(claim.rating_text, False)
    return "compromised" if category.startswith("compromised") else category


def held_share(claims: list, share: float) -> list:
    """Every claim of ``claims`` that a success rate of ``share`` lets through, spread evenly, the first one first."""
    return [c for i, c in enumerate(claims) if math.ceil((i + 1) * share) > math.ceil(i * share)]


class ScoringDemand:
    """Scoring on demand (``stages.score: demand``). Claims whose rating predicts Intact or Unknown are scarce: all
    are scored. Those whose rating predicts Compromised (most of a real quarter) are a stratum scored in the
    release's own order (``selection_rank``), round by round, until the scored pool lets the selection reach
    ``release_size`` with the Intact variants stage 7 can make when ``expected_rewrite_success`` of its rewrites
    hold. Each claim of that stratum then stands for ``weight`` = stratum size / claims of it scored in the
    release's Unknown share, so that the share is the quarter's, not the sample's."""

    def __init__(self, claims: list, release_rules: ReleaseSettings, claim_rules: ClaimRules, demand: DemandSettings,
                 key: bytes):
        if not 0 < demand.expected_rewrite_success <= 1:
            raise ValueError(f"stages.expected_rewrite_success must be in (0, 1], not {demand.expected_rewrite_success}")
        self.release_rules, self.claim_rules = release_rules, claim_rules
        self.success, self.key = demand.expected_rewrite_success, key
        self.sure = [c for c in claims if expected_label(c) != "compromised"]
        self.stratum = sorted((c for c in claims if expected_label(c) == "compromised"), key=selection_rank(key))
        self.stratum_ids = {c.claim_id for c in self.stratum}

    def first_round(self) -> int:
        """Claims of the stratum to score with the sure ones: a Compromised half, plus the rewrites its Intact half
        will need beyond the claims rated true, over the expected success."""
        half = self.release_rules.release_size / 2
        intact = sum(expected_label(c) == "intact" for c in self.sure)
        return min(len(self.stratum), math.ceil(half + max(0.0, half - intact) / self.success))

    def weight(self, attempted: int) -> float:
        """What each scored claim of the stratum stands for: the stratum's size over its claims scored."""
        return len(self.stratum) / attempted if attempted else 1.0

    def weighted(self, scored: list[ScoredClaim], attempted: int) -> list[ScoredClaim]:
        weight = self.weight(attempted)
        return [c.model_copy(update={"weight": weight}) if c.claim_id in self.stratum_ids else c for c in scored]

    def reach(self, scored: list[ScoredClaim]) -> int:
        """The release size the scored pool reaches with the variants stage 7 is expected to make (its candidates,
        in its order, at the expected success)."""
        plan = DemandPlan(scored, self.release_rules, self.claim_rules, self.key)
        return plan.feasible([hypothetical_variant(c) for c in held_share(plan.candidates, self.success)])

    def next_round(self, reached: int, found: int, attempted: int) -> int:
        """Claims of the stratum for the release size still lacking: each pair takes a Compromised claim and
        1 / expected success rewrites, over the share of the stratum scored Compromised so far."""
        per_claim = max(found / attempted, 0.05) if attempted else 1.0
        lacking = max(1, self.release_rules.release_size - reached)
        return math.ceil(lacking / 2 * (1 + 1 / self.success) / per_claim)

    def run(self, score_batch, log=None, stage: str = "scored_claims") -> tuple[dict, dict]:
        """``score_batch(claims)`` scores a round (a dict claim id -> outcome, the scored claim or None first);
        returns every outcome and the stage's ``score/*`` metadata. Rounds stop once the release is reached or the
        stratum is spent."""
        outcomes = score_batch(self.sure + self.stratum[: self.first_round()])
        left = self.stratum[self.first_round():]
        rounds = 1
        while True:
            attempted = len(self.stratum) - len(left)
            scored = self.weighted([o[0] for o in outcomes.values() if isinstance(o, tuple) and o[0] is not None],
                                   attempted)
            reached = self.reach(scored)
            found = sum(c.claim_id in self.stratum_ids and c.integrity.label == "compromised" for c in scored)
            if log:
                log.info(f"{stage}: round {rounds}: {attempted} of {len(self.stratum)} claims rated false scored; "
                         f"the release reaches {reached} of {self.release_rules.release_size}")
            if reached >= self.release_rules.release_size or not left:
                break
            batch = left[: self.next_round(reached, found, attempted)]
            left = left[len(batch):]
            outcomes.update(score_batch(batch))
            rounds += 1
        weight = self.weight(attempted)
        for claim_id, outcome in outcomes.items():
            if claim_id in self.stratum_ids and isinstance(outcome, tuple) and outcome[0] is not None:
                outcomes[claim_id] = (outcome[0].model_copy(update={"weight": weight}), *outcome[1:])
        return outcomes, {
            "score/mode": "demand", "score/rounds": rounds, "score/rated_false": len(self.stratum),
            "score/rated_false_scored": attempted, "score/rated_false_weight": round(weight, 4),
            "score/expected_rewrite_success": self.success, "score/release_reached": reached,
        }
