"""Adversarial filtering of rewritten claims (AFLite, Le Bras et al. 2020), aimed at chance (issue 49): which
rectified variants the release keeps, and in which order it takes them, so that a classifier's scores of the
released ones match those of the natural claims they hide among (the natural Compromised claims the release shows:
the rewrites come from the same false-rated population).

Most of a real release's Intact half is rewrites, so a reader who can tell a rewrite from a natural claim has the
label. The classifier is linear (TF-IDF as the shortcut audit reads the text, beside the channels it reads, each
in bins: the fluency, the media's size and hash, and the media's text where a ``MediaTexts`` is given; balanced
classes), trained many times over on a random half of the natural claims and the variants; a claim's detectability
is the share of the reference natural claims it scores above, where it is held out (a per-claim AUC: 0.5 looks
natural, 1 stands out). The reference is the natural claims the release will show beside the rewrites, and they
never train the classifier: rewrites kept for resembling the very claims beside them turn a classifier trained on
some of those round on the others.

``filter_detectable`` leaves out the most detectable variants above ``THRESHOLD``, a slice at a time, retraining
after each, until the held-out AUC is within noise of 0.5 (AFLite). Before issue 49 the selection then took the
rest least detectable first, and the released ones looked more natural than natural claims (AUC 0.45 on the default
rehearsal's released rewrites, the gate's figure below chance: a classifier with its sign flipped told them). Now
it takes them in ``matched_order``: each next variant from the score bin (the reference claims' quantiles) furthest
below its share of those taken so far, at random within a bin, so that every prefix matches the reference where
the variants allow; the ones left out come back nearest first. Plain functions, no Dagster."""

import warnings

import numpy as np

from assets.selection.channels import CHANNEL_WEIGHT, binned, channel_features, claim_row, merge_groups
from assets.selection.shortcut_audit import TextVectors
from schemas.records import ScoredClaim

PARTITIONS = 24  # random halves the scores are averaged over (AFLite's m)
BINS = 10  # quantile bins of the natural claims' scores the kept variants match (fewer with fewer natural claims)
PER_BIN = 6  # natural claims per bin at least
THRESHOLD = 0.75  # a variant scored above more than this share of held-out natural claims is detectable
SLICE = 0.05  # the share of the variants left out per round, at most (AFLite's k), then the classifier is retrained
STYLE_MARGIN = 0.03  # held-out AUC within 0.5 + max(this, 2 standard errors over the halves): nothing to filter
MAX_ROUNDS = 1 + int(1 / SLICE)  # with a slice a round, every variant can go
MIN_NATURAL = 5  # natural claims needed to train on; with fewer nothing is filtered (and the audit says so)


def _held_out_scores(x, y: np.ndarray, seed: int, reference: np.ndarray | None = None,
                     trains: np.ndarray | None = None) -> tuple[np.ndarray, float, float]:
    """Per row of ``x``, the mean over PARTITIONS random halves (where it is held out) of the share of the held-out
    ``reference`` rows (class-0 rows, by default the held-out class-0 rows; never itself) the classifier scores below
    it (ties count half; 0.5: it looks like them, 1: it stands out); and the held-out AUC of the class-1 rows that
    train (``trains``, all by default) against the reference, its mean and standard deviation over the halves (0.5:
    the classes look alike). Rows outside ``trains`` and reference rows are scored in every half and never train the
    classifier: a variant kept for resembling the very natural claims the release shows beside it turns a classifier
    trained on some of them round on the others."""
    from sklearn.linear_model import (
        LogisticRegression,  # here, not with the code location (seconds per process)
    )
    from threadpoolctl import threadpool_limits

    x.sort_indices()  # once: the halves' rows then need no sorting
    if reference is None:
        reference = np.zeros(len(y), dtype=bool)
    if trains is None:
        trains = np.ones(len(y), dtype=bool)
    fixed = reference.any()  # else the held-out natural claims are the reference
    rng = np.random.default_rng(seed)
    above, seen = np.zeros(len(y)), np.zeros(len(y))
    aucs = []
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        for _ in range(PARTITIONS):
            train = np.zeros(len(y), dtype=bool)
            for label in (0, 1):  # stratified halves; a class of one text trains (it is never held out: 0.5)
                idx = np.flatnonzero((y == label) & ~reference & trains)
                train[rng.choice(idx, max(1, len(idx) // 2), replace=False)] = True
            model = LogisticRegression(C=10.0, class_weight="balanced", solver="liblinear", max_iter=500)
            model.fit(x[train], y[train])
            test = np.flatnonzero(~train)
            score = model.decision_function(x[test])
            against = reference[test] if fixed else y[test] == 0
            natural = np.sort(score[against])
            below = np.searchsorted(natural, score, side="left") + np.searchsorted(natural, score, side="right")
            own = against.astype(int)  # a reference claim is not compared with itself
            share = (below - own) / (2 * np.maximum(len(natural) - own, 1))
            above[test] += share
            seen[test] += 1
            ones = share[(y[test] == 1) & trains[test]]
            aucs.append(float(ones.mean()) if len(ones) else 0.5)
    return np.divide(above, seen, out=np.full(len(y), 0.5), where=seen > 0), float(np.mean(aucs)), float(np.std(aucs))


def filter_rows(natural: list[ScoredClaim], variants: list[ScoredClaim], corpus: list[ScoredClaim] | None = None,
                media_text=None):
    """What the filter's classifier reads of ``natural`` then ``variants``: (a ``TextVectors`` of their texts, each
    round's TF-IDF fit on the rows it trains on, as the shortcut audit reads the text; each channel's bins
    (``channels.binned``) side by side, or None; the channels read). The fluency model learns from ``corpus`` (the
    quarter's natural claims; ``natural`` by default)."""
    from scipy.sparse import hstack

    rows = [claim_row(c, media_text) for c in (*natural, *variants)]
    corpus_rows = rows[: len(natural)] if corpus is None else [claim_row(c) for c in corpus]
    merge_groups(rows + corpus_rows if corpus is not None else rows)
    features = {n: f for n, f in channel_features(rows, corpus_rows).items()
                if f is not None and not np.isnan(f).all()}
    blocks = CHANNEL_WEIGHT * hstack([binned(f) for f in features.values()]).tocsr() if features else None
    return TextVectors([r["text"] for r in rows]), blocks, sorted(features)


def _matrix(vectors, blocks, rows: np.ndarray):
    from scipy.sparse import hstack

    return vectors.of(rows) if blocks is None else hstack([vectors.of(rows), blocks[rows]]).tocsr()


def _reference_mask(natural: list[ScoredClaim], n_variants: int, reference: set[str] | None) -> np.ndarray | None:
    """The rows of ``reference``'s natural claims, or None (every natural claim trains and is matched) with none of
    them or fewer than MIN_NATURAL natural claims beside them."""
    fixed = np.array([c.claim_id in (reference or ()) for c in natural] + [False] * n_variants)
    return None if not fixed.any() or len(natural) - fixed.sum() < MIN_NATURAL else fixed


def detectability(natural: list[ScoredClaim], variants: list[ScoredClaim], seed: int = 0,
                  corpus: list[ScoredClaim] | None = None, media_text=None,
                  reference: set[str] | None = None) -> tuple[dict[str, float], dict]:
    """claim id -> detectability of every natural claim and variant (``_held_out_scores``, one round, every variant
    training) against the natural claims of ``reference`` (ids; they never train it), or against the held-out natural
    claims (``_reference_mask``); and what was measured."""
    vectors, blocks, channels = filter_rows(natural, variants, corpus, media_text)
    x = _matrix(vectors, blocks, np.arange(len(natural) + len(variants)))
    y = np.array([0] * len(natural) + [1] * len(variants))
    fixed = _reference_mask(natural, len(variants), reference)
    scores, auc, spread = _held_out_scores(x, y, seed, fixed)
    ids = [c.claim_id for c in (*natural, *variants)]
    return ({i: round(float(v), 4) for i, v in zip(ids, scores)},
            {"auc": round(auc, 4), "auc_sd": round(spread, 4), "channels": channels,
             "reference": len(natural) if fixed is None else int(fixed.sum()), "reference_trains": fixed is None})


def matched_order(natural: np.ndarray, variants: np.ndarray, seed: int) -> tuple[list[int], int, int]:
    """(the variants' indices in the order the release takes them, how many of the first of them match the natural
    claims' scores, the bins). The scores are binned at the natural claims' quantiles, from the lowest natural score to
    the highest (a variant beyond either end is in a bin no natural claim shares: it comes last); each next variant
    comes from the bin furthest below its natural share of the prefix, at random within a bin. The matched prefix is
    the longest whose every bin has its share: past it, the bins natural claims seldom reach go on alone."""
    bins = max(1, min(BINS, len(natural) // PER_BIN))
    inner = np.quantile(natural, np.linspace(0, 1, bins + 1)[1:-1])
    edges = np.unique(np.concatenate([[natural.min()], inner, [np.nextafter(natural.max(), np.inf)]]))
    share = np.bincount(np.searchsorted(edges, natural, side="right"), minlength=len(edges) + 1) / len(natural)
    where = np.searchsorted(edges, variants, side="right")
    rng = np.random.default_rng(seed)
    queues = [list(rng.permutation(np.flatnonzero(where == b))) for b in range(len(share))]
    have = np.array([len(q) for q in queues])
    matched = int(min(np.floor(have[b] / share[b] + 1e-9) for b in range(len(share)) if share[b] > 0))
    taken = np.zeros(len(share))
    order = []
    while len(order) < len(variants):
        deficit = np.where([bool(q) for q in queues], share * (len(order) + 1) - taken, -np.inf)
        b = int(np.argmax(deficit))  # ties: the lower bin
        order.append(int(queues[b].pop()))
        taken[b] += 1
    return order, min(matched, len(variants)), int((share > 0).sum())


def filter_detectable(natural: list[ScoredClaim], variants: list[ScoredClaim], keep_at_least: int = 0,
                      seed: int = 0, corpus: list[ScoredClaim] | None = None, media_text=None,
                      reference: set[str] | None = None) -> tuple[dict[str, float], set[str], dict]:
    """(rectified claim id -> its place in the order the release takes the variants (0 first: the kept ones in their
    matched order, then the left-out ones nearest first), the ids left out, a report). ``natural``: the natural
    claims the rewrites hide among; ``variants``: the rectified ones; at least ``keep_at_least`` variants stay (the
    Intact half's need). ``corpus``: the natural claims the fluency channel learns from; ``media_text``: a
    ``channels.MediaTexts``;
    ``reference``: the ids of the natural claims the release will show beside the variants: the scores are measured
    against them and the order matches theirs, and the classifier learns from the others (``_held_out_scores``), not
    from them, nor is it matched to the claims whose rewrites failed (more of the kinds of claim a writer cannot
    edit). Without a reference, or with fewer than MIN_NATURAL natural claims beside it, every natural claim trains
    and is the reference."""
    report = {"method": f"AFLite aimed at chance: TF-IDF and the channels beyond the text (binned) + balanced "
                        f"logistic regression, {PARTITIONS} random halves per round, scored against the natural "
                        f"claims the release shows (they never train it); variants above {THRESHOLD} left out "
                        f"{SLICE:.0%} at a time until the held-out AUC is within max({STYLE_MARGIN}, 2 standard "
                        f"errors) of 0.5; the rest taken in an order matched to the shown natural claims' scores in "
                        f"up to {BINS} quantile bins",
              "variants": len(variants), "natural": len(natural)}
    if len(natural) < MIN_NATURAL or not variants:
        return {}, set(), {**report, "skipped": f"fewer than {MIN_NATURAL} natural claims to train on, or no variant",
                           "left_out": 0, "rounds": 0}
    # in one order whatever the caller's: stage 7 measures on the same claims as the release and must find the same
    natural = sorted(natural, key=lambda c: c.claim_id)
    variants = sorted(variants, key=lambda c: c.claim_id)
    vectors, blocks, channels = filter_rows(natural, variants, corpus, media_text)
    fixed = _reference_mask(natural, len(variants), reference)
    shown = fixed[: len(natural)] if fixed is not None else np.ones(len(natural), dtype=bool)
    kept = np.ones(len(variants), dtype=bool)
    var = np.full(len(variants), 0.5)  # each variant's score in the last round it took part in
    rounds = []
    for r in range(MAX_ROUNDS):
        inside = np.flatnonzero(kept)
        x = _matrix(vectors, blocks, np.concatenate([np.arange(len(natural)), len(natural) + inside]))
        y = np.array([0] * len(natural) + [1] * len(inside))
        scores, auc, spread = _held_out_scores(x, y, seed + r, None if fixed is None else np.concatenate(
            [fixed[: len(natural)], np.zeros(len(inside), dtype=bool)]))
        nat, var[inside] = scores[: len(natural)][shown], scores[len(natural):]
        rounds.append({"auc": round(auc, 4), "auc_sd": round(spread, 4), "trained_on": int(kept.sum())})
        if auc <= 0.5 + max(STYLE_MARGIN, 2 * spread / np.sqrt(PARTITIONS)):  # they read like natural claims
            break
        k = max(1, int(SLICE * len(variants)))
        top = [i for i in np.argsort(-var, kind="stable") if kept[i] and var[i] > THRESHOLD][:k]
        drop = top[: max(int(kept.sum()) - keep_at_least, 0)]
        if len(drop) < k:  # AFLite's stop: fewer than a slice above the threshold is what chance leaves there
            break
        kept[drop] = False
        if not kept.any():  # with nothing to keep (stage 7's measure of the share), every variant can go
            break
    inside = np.flatnonzero(kept)
    order, matched, bins = matched_order(nat, var[inside], seed) if len(inside) else ([], 0, 0)
    outside = sorted(np.flatnonzero(~kept), key=lambda i: (var[i], i))  # those that come back: nearest first
    place = {variants[i].claim_id: k for k, i in enumerate([*inside[order], *outside])}
    report.update({
        "channels": channels, "reference": int(shown.sum()), "reference_trains": fixed is None,
        "rounds": len(rounds), "auc": rounds[-1]["auc"], "auc_sd": rounds[-1]["auc_sd"],
        "kept": int(kept.sum()), "left_out": int((~kept).sum()), "bins": bins, "matched": matched,
        # the kept variants' scores against the natural claims' (the last round's), and where they stand: the
        # selection takes them in a matched order, neither the least nor the most detectable first
        "kept_auc": _auc_of(var[kept], nat), "left_out_auc": _auc_of(var[~kept], nat),
        "kept_detectability": {"mean": round(float(var[kept].mean()), 4) if kept.any() else None,
                               "max": round(float(var[kept].max()), 4) if kept.any() else None},
        "natural_detectability": {"mean": round(float(nat.mean()), 4)},
        # Spearman's rho of the kept variants' place in the order against their scores: about 0 (least detectable
        # first, as before issue 49, was 1)
        "order_vs_score": _rho(np.arange(len(order)), var[inside[order]]) if len(order) > 2 else None,
    })
    return place, {variants[i].claim_id for i in np.flatnonzero(~kept)}, report


def _rho(a: np.ndarray, b: np.ndarray) -> float | None:
    """Spearman's rho; None where either side is constant."""
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None
    return round(float(spearmanr(a, b).statistic), 4)


def _shares(ones: np.ndarray, zeros: np.ndarray) -> np.ndarray:
    """Per score of ``ones``, the share of ``zeros`` below it (ties half)."""
    zeros = np.sort(zeros)
    return (np.searchsorted(zeros, ones, side="left") + np.searchsorted(zeros, ones, side="right")) / (2 * len(zeros))


def _auc_of(ones: np.ndarray, zeros: np.ndarray) -> float | None:
    """P(a score of ``ones`` > one of ``zeros``), ties half: 0.5 when the two distributions match."""
    if not len(ones) or not len(zeros):
        return None
    return round(float(_shares(ones, zeros).mean()), 4)
