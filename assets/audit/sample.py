"""Which claims of a release people judge: a stratified sample drawn from the secret order key.

The strata are the 3-bin label, the media kind, the language and whether the claim is rectified or natural; each
stratum gets its share of the sample (largest remainders), and within it the claims come in an order only the key's
holder can compute, so nobody can tell from the release which claims were audited. Plain functions, no Dagster.
"""

from collections import defaultdict
from dataclasses import dataclass

from assets.rules.bins import bin3_published
from assets.rules.release_order import keyed
from schemas.records import ReleaseClaim

NATURAL, RECTIFIED = "natural", "rectified"


@dataclass(frozen=True)
class AuditClaim:
    """A released claim as the audit sees it: the published claim and what only the maintainer knows of it."""

    claim: ReleaseClaim
    variant: str  # natural | rectified (never published)
    review_id: str = ""  # the fact-check whose article is the evidence (the original's, for a rectified claim)
    claim_id: str = ""  # the pipeline's id of the claim (rectified_claims), never published
    variant_of: str = ""  # the pipeline's id of its other variant (the rewrite of an original, the original of one)

    @property
    def id(self) -> int:
        return self.claim.id

    @property
    def label(self) -> str:
        return bin3_published(self.claim.integrity.score)

    @property
    def media_kind(self) -> str:
        """text, image or video (a claim with a video counts as video), as the evaluation groups claims."""
        kinds = {m.type for m in self.claim.media}
        return "video" if "video" in kinds else "image" if "image" in kinds else "text"

    @property
    def language(self) -> str:
        return self.claim.language or "unknown"

    @property
    def stratum(self) -> tuple[str, str, str, str]:
        return self.label, self.media_kind, self.language, self.variant


def allocate(sizes: dict[tuple, int], total: int, order) -> dict[tuple, int]:
    """``total`` split over the strata in proportion to their ``sizes`` (Hamilton's largest remainders; ties by
    ``order``, a key function on the stratum), never more than a stratum holds."""
    population = sum(sizes.values())
    if total >= population:
        return dict(sizes)
    quotas = {s: total * n / population for s, n in sizes.items()}
    out = {s: int(q) for s, q in quotas.items()}
    left = total - sum(out.values())
    for s in sorted(quotas, key=lambda s: (-(quotas[s] - out[s]), order(s)))[:left]:
        out[s] += 1
    return out


def draw_sample(claims: list[AuditClaim], key: bytes, quarter: str, size: int) -> list[int]:
    """The release claim ids to audit, in the order the tasks are shown: ``size`` claims (all when the release holds
    fewer), each stratum in proportion to its share of the release, drawn by keyed hashes of the quarter and the
    claim's text, so that the same key and release give the same sample and nobody without the key can redo it."""
    def rank(text: str) -> str:
        return keyed(key, f"veritas audit sample\x1f{quarter}\x1f{text}")

    by_stratum: dict[tuple, list[AuditClaim]] = defaultdict(list)
    for c in claims:
        by_stratum[c.stratum].append(c)
    for members in by_stratum.values():
        members.sort(key=lambda c: rank(f"{c.id}\x1f{c.claim.text}"))
    quota = allocate({s: len(m) for s, m in by_stratum.items()}, size, lambda s: rank("\x1f".join(s)))
    chosen = [c for s, members in by_stratum.items() for c in members[:quota[s]]]
    return [c.id for c in sorted(chosen, key=lambda c: rank(f"task\x1f{c.id}"))]


def strata_counts(claims: list[AuditClaim], ids: list[int] | None = None) -> dict[str, dict[str, int]]:
    """How many claims (of ``ids``, default all) fall in each value of each stratum dimension."""
    chosen = set(ids) if ids is not None else None
    out: dict[str, dict[str, int]] = {"label": {}, "media_kind": {}, "language": {}, "variant": {}}
    for c in claims:
        if chosen is not None and c.id not in chosen:
            continue
        for dim, value in zip(out, c.stratum):
            out[dim][value] = out[dim].get(value, 0) + 1
    return {dim: dict(sorted(v.items())) for dim, v in out.items()}
