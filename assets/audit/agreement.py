"""How far people agree with a release's labels: the annotators' mean against the release's score, per property and
for the integrity (the overall label), by media kind, language and rectified or natural; Krippendorff's alpha among
the annotators and with the ensemble as one more rater; the claims whose 3-bin label people give otherwise.

An annotator's integrity follows the ensemble's rule (assets/ensemble/scoring.py): the lowest of context coverage,
veracity and the worst media contextualization, veracity left out when a medium is out of context (Compromised bin),
coverage when the veracity does not lean true. 3-bin labels: the release's published (rounded) scores by
``bin3_published``, the annotators' exact means by ``bin3``: one rule, boundaries in the inner bin (Intact above
1/3), not the >= 0.33 of some loaders. Plain functions, no Dagster.
"""

import math
import statistics

from assets.audit.sample import AuditClaim
from assets.ensemble.scoring import asks_coverage, integrity_of, stops_at_media
from assets.rules.bins import bin3, bin3_published
from schemas.records import PropertyVerdict

PROPERTIES = ("integrity", "veracity", "context_coverage", "authenticity", "contextualization")
GROUPS = ("media_kind", "language", "variant")
PRIVATE_GROUPS = ("variant",)  # with the disputed claims' ids it would tell rewrites from natural claims
ENSEMBLE = "ensemble"
Answers = dict[tuple[str, int], float]  # (property, medium index or -1) -> score


def _verdict(prop: str, score: float, medium: int = -1) -> PropertyVerdict:
    return PropertyVerdict(property=prop, medium_index=medium, score=score, n_ratings=1, spread=0.0)


def annotator_integrity(answers: Answers) -> float | None:
    """One annotator's integrity of a claim from their answers, by the ensemble's rule; None when they answered
    neither veracity nor any contextualization."""
    media = [_verdict("contextualization", s, i) for (p, i), s in answers.items() if p == "contextualization"]
    worst = min(media, key=lambda v: v.score) if media else None
    veracity = coverage = None
    if not stops_at_media(worst):
        if ("veracity", -1) in answers:
            veracity = _verdict("veracity", answers[("veracity", -1)])
        if asks_coverage(veracity) and ("context_coverage", -1) in answers:
            coverage = _verdict("context_coverage", answers[("context_coverage", -1)])
    decided = integrity_of(media, veracity, coverage)
    return decided[0].score if decided else None


def release_scores(claim: AuditClaim) -> Answers:
    """The release's published scores of a claim, keyed as the answers are (integrity under -1)."""
    c = claim.claim
    out: Answers = {("integrity", -1): c.integrity.score}
    for prop in ("veracity", "context_coverage"):
        if (v := getattr(c, prop)) is not None:
            out[(prop, -1)] = v.score
    for i, m in enumerate(c.media):
        for prop in ("authenticity", "contextualization"):
            if (v := getattr(m, prop)) is not None:
                out[(prop, i)] = v.score
    return out


def with_integrity(answers: Answers) -> Answers:
    found = annotator_integrity(answers)
    return {**answers, ("integrity", -1): found} if found is not None else dict(answers)


def complete_annotators(by_annotator: dict[str, Answers]) -> list[str]:
    """The annotators whose answers give the claim an integrity (the ones the audit counts)."""
    return sorted(a for a, given in by_annotator.items() if annotator_integrity(given) is not None)


def wilson(hits: int, n: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval (95%) of a share ``hits``/``n``."""
    if not n:
        return None
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)]


def alpha(units: list[dict[str, float]]) -> float | None:
    """Krippendorff's alpha (interval) over units of rater -> score; None when undefined (fewer than 2 units rated
    twice, or a single value throughout)."""
    import krippendorff  # imported here: the code location loads without it
    import numpy as np

    pairable = [u for u in units if len(u) >= 2]
    raters = sorted({r for u in pairable for r in u})
    if len(pairable) < 2 or len({v for u in pairable for v in u.values()}) < 2:
        return None
    data = np.full((len(raters), len(pairable)), np.nan)
    for j, unit in enumerate(pairable):
        for rater, score in unit.items():
            data[raters.index(rater), j] = score
    return round(float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval")), 4)


def metrics(units: list[dict]) -> dict:
    """Over units {release, humans: annotator -> score}: n, MSE and MAE of the annotators' mean against the release,
    3-bin agreement (with its 95% Wilson interval), and alpha among the annotators and with the ensemble."""
    rated = [u for u in units if u["humans"] and u["release"] is not None]
    if not rated:
        return {"n": 0, "mse": None, "mae": None, "agreement3": None, "agreement3_ci": None,
                "alpha_annotators": None, "alpha_with_ensemble": None}
    means = [statistics.fmean(u["humans"].values()) for u in rated]
    hits = sum(bin3(m) == bin3_published(u["release"]) for m, u in zip(means, rated))
    return {
        "n": len(rated),
        "mse": round(statistics.fmean((m - u["release"]) ** 2 for m, u in zip(means, rated)), 4),
        "mae": round(statistics.fmean(abs(m - u["release"]) for m, u in zip(means, rated)), 4),
        "agreement3": round(hits / len(rated), 4), "agreement3_ci": wilson(hits, len(rated)),
        "alpha_annotators": alpha([u["humans"] for u in rated]),
        "alpha_with_ensemble": alpha([{**u["humans"], ENSEMBLE: u["release"]} for u in rated]),
    }


def units_of(claims: list[AuditClaim], answers: dict[int, dict[str, Answers]]) -> list[dict]:
    """One unit per (claim, property, medium) the release scores: its published score, each counted annotator's
    score and the claim's strata."""
    out = []
    for c in claims:
        given = {a: with_integrity(s) for a, s in (answers.get(c.id) or {}).items()}
        counted = {a: s for a, s in given.items() if ("integrity", -1) in s}
        for (prop, medium), score in release_scores(c).items():
            out.append({"claim_id": c.id, "property": prop, "medium": medium, "release": score,
                        "humans": {a: s[(prop, medium)] for a, s in counted.items() if (prop, medium) in s},
                        "media_kind": c.media_kind, "language": c.language, "variant": c.variant})
    return out


def by_property(units: list[dict]) -> dict[str, dict]:
    return {p: metrics([u for u in units if u["property"] == p]) for p in PROPERTIES}


def disputed_claims(units: list[dict], min_annotators: int) -> list[dict]:
    """The claims whose annotators' mean integrity falls in another 3-bin label than the release's; ``unanimous``
    when every annotator's own label is that other label (and they are at least ``min_annotators``): an erratum."""
    out = []
    for u in units:
        if u["property"] != "integrity" or not u["humans"]:
            continue
        mean = statistics.fmean(u["humans"].values())
        human, published = bin3(mean), bin3_published(u["release"])
        if human == published:
            continue
        own = sorted(bin3(s) for s in u["humans"].values())
        out.append({"claim_id": u["claim_id"], "release_label": published, "annotators_label": human,
                    "release_score": u["release"], "annotators_mean": round(mean, 4), "annotators": len(own),
                    "annotators_labels": own,
                    "unanimous": len(own) >= min_annotators and all(label == human for label in own)})
    return sorted(out, key=lambda d: d["claim_id"])


def audit(claims: list[AuditClaim], answers: dict[int, dict[str, Answers]], min_annotators: int,
          min_agreement: float) -> dict:
    """The audit of the sampled ``claims`` from the annotators' ``answers`` (claim id -> annotator -> answers): the
    overall (integrity) and per-property figures, the same per media kind, language and variant, the disputed claims,
    the errata (disputed with unanimous annotators) and whether the 3-bin agreement reaches ``min_agreement``."""
    units = units_of(claims, answers)
    counted = {c.id: complete_annotators(answers.get(c.id) or {}) for c in claims}
    properties = by_property(units)
    groups = {}
    for group in GROUPS:
        values = sorted({u[group] for u in units})
        groups[f"by_{group}"] = {v: by_property([u for u in units if u[group] == v]) for v in values}
    disputed = disputed_claims(units, min_annotators)
    overall = properties["integrity"]
    return {
        "claims": len(claims),
        "annotators": len({a for names in counted.values() for a in names}),
        "annotations": sum(len(names) for names in counted.values()),
        "short": sorted(cid for cid, names in counted.items() if len(names) < min_annotators),
        "min_annotators": min_annotators, "min_agreement": min_agreement,
        "overall": overall, "properties": properties, **groups,
        "disputed": disputed, "errata": [d["claim_id"] for d in disputed if d["unanimous"]],
        "passed": overall["agreement3"] is not None and overall["agreement3"] >= min_agreement,
    }


def public(report: dict) -> dict:
    """What the addendum publishes: everything but the breakdowns that, with the disputed claims' ids, would tell a
    rewritten claim from a natural one (the maintainer keeps them: the asset's metadata and the store's table)."""
    return {k: v for k, v in report.items() if k not in {f"by_{g}" for g in PRIVATE_GROUPS}}


def summary_line(report: dict) -> str:
    """One line for the card, the leaderboard and ``veritas yields``."""
    o = report["overall"]
    if not o["n"]:
        return "people agree with the labels: no claim judged yet"
    return (f"people agree with the labels: 3-bin {o['agreement3']:.0%}, MSE {o['mse']:.3f}, n {o['n']} claims, "
            f"{report['annotators']} annotators" + ("" if report["passed"] else
                                                     f" (below the gate {report['min_agreement']:.0%})"))
