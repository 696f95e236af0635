"""How far the ensemble's members agree with each other: Krippendorff's alpha (interval) per property.

A unit is one property of one claim (of one medium, for the media properties); the raters are the ensemble's
members; a member that gave no valid answer on a unit is a missing value. Computed over the claims that passed the
disagreement filter, so it reads as the agreement of what was kept, not of everything asked. Plain functions.
"""

import numpy as np

from schemas.records import CLAIM_PROPERTIES, MEDIA_PROPERTIES, ScoredClaim

PROPERTIES = CLAIM_PROPERTIES + MEDIA_PROPERTIES


def ensemble_alpha(claims: list[ScoredClaim]) -> dict[str, dict]:
    """Per property: ``alpha`` (None when it cannot be computed, with ``note`` saying why), the ``units`` rated by
    at least two members and the number of ``raters``."""
    import krippendorff  # imported here: the stage modules load without it

    units: dict[str, dict[tuple[str, int], dict[str, float]]] = {p: {} for p in PROPERTIES}
    for claim in claims:
        for r in claim.ratings:
            units[r.property].setdefault((claim.claim_id, r.medium_index), {})[r.member] = r.score
    out = {}
    for prop, rated in units.items():
        pairable = [u for u in rated.values() if len(u) >= 2]
        members = sorted({m for u in pairable for m in u})
        entry = {"alpha": None, "units": len(pairable), "raters": len(members)}
        if len(pairable) < 2:
            out[prop] = {**entry, "note": "fewer than 2 units rated by at least 2 members"}
            continue
        data = np.full((len(members), len(pairable)), np.nan)
        for j, unit in enumerate(pairable):
            for member, score in unit.items():
                data[members.index(member), j] = score
        if len(np.unique(data[~np.isnan(data)])) < 2:
            out[prop] = {**entry, "note": "every rating has the same score: agreement is total but alpha is undefined"}
            continue
        alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="interval")
        out[prop] = {**entry, "alpha": round(float(alpha), 4)}
    return out


def alpha_metadata(reliability: dict[str, dict]) -> dict[str, float]:
    """``alpha/<property>`` for a stage's metadata (the properties that have one)."""
    return {f"alpha/{p}": r["alpha"] for p, r in reliability.items() if r["alpha"] is not None}


def alpha_line(reliability: dict[str, dict]) -> str:
    """One line: each property's alpha and units, e.g. ``veracity 0.81 (n=950)``."""
    def fmt(alpha):
        return "n/a" if alpha is None else f"{alpha:.2f}"

    return ", ".join(f"{p} {fmt(r['alpha'])} (n={r['units']})" for p, r in reliability.items() if r["units"])
