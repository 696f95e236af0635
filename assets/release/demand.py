"""Rectification on demand (``stages.rectify: demand``): how many Intact variants the quarter's release will lack,
worked out from the scored claims with the release's own selection rules, and which Compromised claims to rewrite
first to cover it."""

import math

from assets.common import stable_id
from assets.release.release import _order, remove_near_duplicates, select_release
from dagster_project.config import PipelineResource
from schemas.records import Integrity, ScoredClaim

MIN_SUCCESS_RATE = 0.05  # a quarter whose rewrites nearly all fail still plans rounds of bounded size


def hypothetical_variant(claim: ScoredClaim) -> ScoredClaim:
    """What a rewrite of ``claim`` that holds up would add to the pool: an Intact variant with the claim's media."""
    return claim.model_copy(update={
        "claim_id": stable_id(claim.review_id, "rectified"), "variant": "rectified", "variant_of": claim.claim_id,
        "integrity": Integrity(score=1.0, decisive_property="veracity", label="intact"),
    })


class DemandPlan:
    """The release's pool as the release will see it (originals, near-duplicates removed once, the way the release
    removes them), the size its selection can reach with every Compromised claim rectified (``target``), and the
    Compromised claims in the order their variants serve the release best (``candidates``): with media first, as
    the media share prefers them, then from the end of the release's own order, so that the claims it would pick
    as Compromised are the last to be turned into Intact ones."""

    def __init__(self, scored: list[ScoredClaim], pipeline: PipelineResource):
        self.size, self.media_share = pipeline.release_size, pipeline.media_share
        originals = sorted((c for c in scored if c.variant == "original"), key=_order)
        self.pool, self.near_duplicates = remove_near_duplicates(
            originals, pipeline.text_duplicate_similarity, pipeline.near_duplicate_distance)
        compromised = [c for c in self.pool if c.integrity.label == "compromised"]
        compromised.sort(key=_order, reverse=True)
        self.candidates = sorted(compromised, key=lambda c: not c.media)
        self.without = self.feasible([])
        self.target = min(self.size, self.feasible([hypothetical_variant(c) for c in compromised]))

    def selection(self, variants: list[ScoredClaim]) -> tuple[list[ScoredClaim], dict]:
        """The release's selection on the pool plus ``variants`` (each original linked to its own, as stage 7 links
        them), and its report."""
        linked = {v.variant_of: v.claim_id for v in variants}
        pool = [c.model_copy(update={"variant_of": linked[c.claim_id]}) if c.claim_id in linked else c for c in self.pool]
        return select_release(pool + variants, self.size, self.media_share, similarity=0.0, dedupe=False)

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
