"""Adversarial filtering of rewritten claims (AFLite, Le Bras et al. 2020): which rectified variants a text
classifier tells from the quarter's natural claims (the release passes the natural Compromised claims: the rewrites come
from the same false-rated population and must hide among them), so that the release can leave those out.

Most of a real release's Intact half is rewrites, so a reader who can tell a rewrite from a natural claim has the
label. ``filter_detectable`` trains, many times over, a linear classifier (TF-IDF as the shortcut audit reads the
text, balanced classes) on a random half of the natural Intact claims and the variants and predicts the other half;
a variant's detectability is the share of held-out natural claims the classifier scores below it (a per-claim AUC:
0.5 looks natural, 1 stands out). The most detectable
variants above ``THRESHOLD`` are left out, a slice at a time, retraining after each, until the held-out balanced
AUC is within noise of 0.5 (the kept rewrites read like natural claims), or fewer than a slice is above the
threshold (AFLite's stop), or too few are left. The release then takes the variants it keeps, least detectable first. Plain functions, no Dagster.
"""

import warnings

import numpy as np

from assets.selection.shortcut_audit import TextVectors
from schemas.records import ScoredClaim

PARTITIONS = 24  # random halves per filtering round (AFLite's m)
THRESHOLD = 0.75  # a variant scored above more than this share of held-out natural claims is detectable
SLICE = 0.05  # the share of the variants left out per round, at most (AFLite's k), then the classifier is retrained
STYLE_MARGIN = 0.03  # held-out AUC within 0.5 + max(this, 2 standard errors over the halves): nothing to filter
MIN_NATURAL = 5  # natural Intact claims needed to train on; with fewer nothing is filtered (and the audit says so)


def _detectability(x, y: np.ndarray, seed: int) -> tuple[np.ndarray, float, float]:
    """Per class-1 row of ``x`` (the texts' ``text_vectors``), the mean over PARTITIONS random halves (where it is
    held out) of the share of held-out class-0 rows the classifier scores below it (0.5: it looks like them; 1: it
    stands out); and the held-out AUC's mean and standard deviation over the halves (0.5: the classes look alike)."""
    from sklearn.linear_model import (
        LogisticRegression,  # here, not with the code location (seconds per process)
    )
    from threadpoolctl import threadpool_limits

    x.sort_indices()  # once: the halves' rows then need no sorting (0.8 s of the rehearsal's 7 s filter)
    rng = np.random.default_rng(seed)
    above, seen = np.zeros(len(y)), np.zeros(len(y))
    aucs = []
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        for _ in range(PARTITIONS):
            train = np.zeros(len(y), dtype=bool)
            for label in (0, 1):  # stratified halves; a class of one text trains (it is never held out: 0.5)
                idx = np.flatnonzero(y == label)
                train[rng.choice(idx, max(1, len(idx) // 2), replace=False)] = True
            model = LogisticRegression(C=10.0, class_weight="balanced", solver="liblinear", max_iter=500)
            model.fit(x[train], y[train])
            test = np.flatnonzero(~train)
            score = model.decision_function(x[test])
            natural = np.sort(score[y[test] == 0])
            ones = test[y[test] == 1]
            share = (np.searchsorted(natural, score[y[test] == 1], side="left")
                     + np.searchsorted(natural, score[y[test] == 1], side="right")) / (2 * max(len(natural), 1))
            above[ones] += share
            seen[ones] += 1
            aucs.append(float(share.mean()) if len(share) else 0.5)
    return np.divide(above, seen, out=np.full(len(y), 0.5), where=seen > 0), float(np.mean(aucs)), float(np.std(aucs))


def filter_detectable(natural: list[ScoredClaim], variants: list[ScoredClaim], keep_at_least: int = 0,
                      seed: int = 0) -> tuple[dict[str, float], set[str], dict]:
    """(rectified claim id -> detectability, the ids left out, a report). ``natural``: the quarter's natural Intact
    claims; ``variants``: its rectified ones. At least ``keep_at_least`` variants stay (the Intact half's need)."""
    report = {"method": f"AFLite: TF-IDF + balanced logistic regression, {PARTITIONS} random halves per round, "
                        f"variants above {THRESHOLD} left out {SLICE:.0%} at a time until the held-out AUC is "
                        f"within max({STYLE_MARGIN}, 2 standard errors) of 0.5", "variants": len(variants),
              "natural": len(natural), "threshold": THRESHOLD}
    if len(natural) < MIN_NATURAL or not variants:
        return {}, set(), {**report, "skipped": f"fewer than {MIN_NATURAL} natural claims to train on, or no variant",
                           "left_out": 0, "rounds": 0}
    # in one order whatever the caller's: stage 7 measures on the same claims as the release and must find the same
    natural = sorted(natural, key=lambda c: c.claim_id)
    kept = sorted(variants, key=lambda c: c.claim_id)
    vectors = TextVectors([c.text for c in natural] + [c.text for c in kept])  # each round fits on its own rows
    row = {c.claim_id: len(natural) + i for i, c in enumerate(kept)}
    scores: dict[str, float] = {}
    left_out: set[str] = set()
    rounds = 0
    while True:
        x = vectors.of([*range(len(natural)), *(row[c.claim_id] for c in kept)])
        y = np.array([0] * len(natural) + [1] * len(kept))
        p, accuracy, spread = _detectability(x, y, seed + rounds)
        p = p[len(natural):]
        scores.update({c.claim_id: round(float(v), 4) for c, v in zip(kept, p)})
        rounds += 1
        if accuracy <= 0.5 + max(STYLE_MARGIN, 2 * spread / np.sqrt(PARTITIONS)):  # they read like natural claims
            break
        order = np.argsort(-p, kind="stable")
        room = len(kept) - keep_at_least
        k = max(1, int(SLICE * len(variants)))
        drop = [i for i in order[:k] if p[i] > THRESHOLD][: max(room, 0)]
        if len(drop) < k:  # AFLite's stop: fewer than a slice above the threshold is what chance leaves there
            break
        left_out |= {kept[i].claim_id for i in drop}
        kept = [c for i, c in enumerate(kept) if i not in set(drop)]
        if not kept:  # with nothing to keep (stage 7's measure of the share), every variant can go
            break
    p_kept = [scores[c.claim_id] for c in kept]
    report.update({"rounds": rounds, "left_out": len(left_out), "kept": len(kept),
                   "auc": round(accuracy, 4), "auc_sd": round(spread, 4),
                   "kept_detectability": {"mean": round(float(np.mean(p_kept)), 4) if p_kept else None,
                                          "max": round(float(np.max(p_kept)), 4) if p_kept else None}})
    return scores, left_out, report
