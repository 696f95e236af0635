"""The shortcut audit: how far a model gets on a release's labels without any evidence.

Serious fact-checking benchmarks report a claim-only baseline (FEVER's reached ~62% against 33% chance, Schuster et
al. 2019). ``shortcut_audit`` measures, by 5-fold stratified cross-validation (fewer folds when a label is tiny,
shuffled with a fixed seed), the 3-bin accuracy and macro-F1 of

- each pipeline feature alone (what our pipeline made): position, claim id, media ids (among the claims with
  media: a sentinel for "none" would copy media presence, which n_media measures against the pool), text length,
  media count, media kind, media references in the text;
- each world feature alone (what the world brings): language, claim date, publisher (the review URL's domain);
- the claim text alone (TF-IDF word 1-2 grams and char 2-4 grams + logistic regression);
- the rectified style: among Intact claims, whether the text tells a rewritten claim from a natural one;
- the channels beyond the text (issue 49, ``channels``: the media's own text and its match with the claim, the
  images' size and perceptual hash, the claim's fluency), each alone and all with the text, on rewrites against
  natural Compromised claims (gating) and against all natural claims, and on the 3-bin label;
- the transfer figure: a classifier trained on the pool's rewrites the release left out scores the released ones.

Each figure stands next to the majority-class baseline and next to chance as measured: the same cross-validation
on labels shuffled ``SHUFFLES`` times (``MARGIN_RULE``). Every gate is two-sided: off chance either way blocks
(below chance, a classifier with its sign flipped recovers the signal). ``audit_problems`` says what blocks
publication: position or ids off chance, or a feature the selection made more predictive than it is in the pool the
release was selected from, or predict below chance; ``text_problems`` what the rewrites and the selection put in the
claim and its media. A number is read in ``BINS`` quantile bins, and a binned number or a category predicts each value's
majority training label (a one-hot lookup: it reveals contiguous label blocks along ids and position). BLAS runs
on one thread. Plain functions, no Dagster. scikit-learn, scipy, threadpoolctl and tldextract are imported where
they are used: the code location imports this module, and every run of every stage would pay for them (seconds).
"""

import warnings
from datetime import date as Date

import numpy as np

from assets.rules.bins import bin3
from assets.rules.length import MEDIA_REF
from assets.selection.channels import (
    CHANNEL_FEATURES,
    CHANNEL_WEIGHT,
    CHANNELS,
    FLUENCY_MODEL,
    binned,
    channel_features,
    claim_row,
    merge_groups,
)
from schemas.records import ReleaseClaim, ScoredClaim

LABELS = ("intact", "unknown", "compromised")
FOLDS = 5
BINS = 10  # quantile bins of a numeric feature
SHUFFLES = 12  # label shuffles that measure chance and its run-to-run noise, per feature
POOL_DRAWS = 3  # seeded subsamples of the pool at the release's label counts
MIN_CLAIMS = 20  # below this (or with fewer than 2 labels) nothing measured here means anything
MIN_STYLE = 5  # rectified and natural Intact claims each needed for the rectified-style figure
MARGIN_FLOOR, MARGIN_Z = 0.02, 3.5
MARGIN_RULE = (
    f"off chance (two-sided): |accuracy - null_mean| > margin, margin = max({MARGIN_FLOOR}, {MARGIN_Z} * null_std), "
    f"null = "
    f"the same CV on {SHUFFLES} label shuffles; selection adds signal: feature above chance in the release and "
    f"lift - max(pool lift, 0) > max({MARGIN_FLOOR}, {MARGIN_Z} * sqrt(null_std^2 + pool null_std^2)), lift = "
    f"accuracy - null_mean, the pool subsampled to the release's label counts ({POOL_DRAWS} draws, averaged)"
)
ORDER_FEATURES = ("position", "claim_id", "media_ids")
# feature -> (group, how it is read): "binned" numbers (missing: a bin of its own), or "category"
FEATURES = {
    "position": ("pipeline", "binned"), "claim_id": ("pipeline", "binned"), "media_ids": ("pipeline", "binned"),
    "text_length": ("pipeline", "binned"), "n_media": ("pipeline", "binned"), "media_kind": ("pipeline", "category"),
    "media_ref": ("pipeline", "category"), "language": ("world", "category"), "date": ("world", "binned"),
    "publisher": ("world", "category"),
}
POOL_FEATURES = tuple(f for f in FEATURES if f not in ORDER_FEATURES)
_EXTRACT = None


def registered_domain(url: str) -> str:
    """The registered domain of a URL, from tldextract's bundled suffix list (never fetched)."""
    global _EXTRACT
    if _EXTRACT is None:
        import tldextract

        _EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)
    parts = _EXTRACT(url or "")
    return ".".join(p for p in (parts.domain, parts.suffix) if p)


def _kinds(kinds) -> str:
    found = sorted(set(kinds))
    return "+".join(found) if found else "none"


def _row(text: str, kinds: list[str], language: str, day, url: str, label: str) -> dict:
    return {
        "text": text, "text_length": len(MEDIA_REF.sub("", text).strip()), "n_media": len(kinds),
        "media_kind": _kinds(kinds), "media_ref": _kinds(m.group(1) for m in MEDIA_REF.finditer(text)),
        "language": language or "", "date": str(day) if day else None, "publisher": registered_domain(url),
        "review_url": url or "", "label": label,
    }


def release_rows(claims: list[ReleaseClaim], variants: list[str], sources: list[ScoredClaim] | None = None,
                 media_text=None) -> list[dict]:
    """One row per release claim in claims.json order; ``variants[i]`` ("original"/"rectified") is claim i's.
    ``sources``: the scored claims the release claims were made from, in the same order (the channels beyond the
    text read their media's sizes and hashes and their review group); ``media_text``: a ``channels.MediaTexts`` (the
    media's OCR text)."""
    rows = [
        {"position": i, "claim_id": c.id, "media_ids": [m.id for m in c.media], "variant": v,
         **_row(c.text, [m.type for m in c.media], c.language, c.date, c.review_url, bin3(c.integrity.score))}
        for i, (c, v) in enumerate(zip(claims, variants, strict=True))
    ]
    if sources is not None:
        for row, source in zip(rows, sources, strict=True):
            row.update({k: v for k, v in claim_row(source, media_text).items() if k != "text"})
    return rows


def pool_rows(pool: list[ScoredClaim], media_text=None) -> list[dict]:
    """One row per scored claim of the pool the release was selected from (originals and rectified variants), with
    the channels' inputs (``channels.claim_row``; the media's text with ``media_text``)."""
    return [
        {"variant": c.variant, **_row(c.text, [m.kind for m in c.media], c.language, c.claim_date, c.review_url,
                                      c.integrity.label),
         **{k: v for k, v in claim_row(c, media_text).items() if k != "text"}}
        for c in pool
    ]


def _codes(rows: list[dict], feature: str) -> np.ndarray:
    """A feature as the lookup reads it: a category's code, or a number's quantile bin (label-free, over all rows)."""
    if FEATURES[feature][1] == "category":
        return np.unique([str(r[feature]) for r in rows], return_inverse=True)[1].ravel()
    if feature == "media_ids":
        values = [min(r["media_ids"]) for r in rows]
    elif feature == "date":
        values = [Date.fromisoformat(r["date"][:10]).toordinal() if r["date"] else np.nan for r in rows]
    else:
        values = [r[feature] for r in rows]
    values = np.asarray(values, dtype=float)
    known = ~np.isnan(values)
    edges = np.unique(np.quantile(values[known], np.linspace(0, 1, BINS + 1)[1:-1])) if known.any() else np.array([])
    return np.where(known, np.searchsorted(edges, np.nan_to_num(values), side="right"), len(edges) + 1)


def _lookup(x, y, train, test):
    """Each value's most frequent training label; ties and unseen values go to the more frequent label."""
    prior = np.bincount(y[train], minlength=y.max() + 1)
    counts = np.tile(prior * 1e-6, (x.max() + 1, 1))
    np.add.at(counts, (x[train], y[train]), 1)
    return counts.argmax(1)[x[test]]


def _linear(x, y, train, test, weight=None):
    """TF-IDF rows -> logistic regression (newton-cg: the fastest here; C=10: a cue in a small release is found)."""
    from sklearn.linear_model import LogisticRegression

    seen = np.unique(y[train])
    if len(seen) == 1:  # a label of a single claim sits wholly in the test fold: this fold knows one label only
        return np.full(len(test), seen[0])
    model = LogisticRegression(C=10.0, solver="newton-cg", tol=1e-3, max_iter=500, class_weight=weight)
    return model.fit(x[train], y[train]).predict(x[test])


def _linear_balanced(x, y, train, test):
    """As ``_linear``, the classes weighted alike: a cue on a part of the larger class is not lost to its prior."""
    return _linear(x, y, train, test, "balanced")


def _scores(y: np.ndarray, pred: np.ndarray, balanced: bool = False) -> tuple[float, float]:
    """Accuracy (``balanced``: the mean recall of the labels present) and macro-F1 over the labels present in ``y``."""
    k = max(y.max(), pred.max()) + 1
    cm = np.bincount(y * k + pred, minlength=k * k).reshape(k, k)
    truth, said = cm.sum(1), cm.sum(0)
    f1 = 2 * np.diag(cm)[truth > 0] / (truth + said)[truth > 0]
    accuracy = float(np.mean(np.diag(cm)[truth > 0] / truth[truth > 0])) if balanced else float(np.trace(cm) / len(y))
    return accuracy, float(f1.mean())


def _cv(model, x, y: np.ndarray, seed: int) -> np.ndarray:
    from sklearn.model_selection import StratifiedKFold

    folds = min(FOLDS, max(2, int(np.bincount(y)[np.bincount(y) > 0].min())))
    pred = np.empty_like(y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a label smaller than the folds: sklearn warns, the figure stands
        for train, test in StratifiedKFold(folds, shuffle=True, random_state=seed).split(np.zeros(len(y)), y):
            pred[test] = model(x, y, train, test)
    return pred


def _measure(model, x, y: np.ndarray, seed: int, balanced: bool = False) -> dict:
    """Cross-validated accuracy (``balanced``: balanced accuracy) and macro-F1 of ``model`` on (x, y), the majority
    baseline, and the null distribution of the accuracy over ``SHUFFLES`` seeded label shuffles (unrounded)."""
    acc, f1 = _scores(y, _cv(model, x, y, seed), balanced)
    majority = np.full_like(y, np.bincount(y).argmax())
    rng = np.random.default_rng(seed)
    null = [_scores(perm, _cv(model, x, perm, seed), balanced)[0] for perm in (rng.permutation(y) for _ in range(SHUFFLES))]
    maj_acc, maj_f1 = _scores(y, majority, balanced)
    return {"accuracy": acc, "macro_f1": f1, "majority_accuracy": maj_acc, "majority_macro_f1": maj_f1,
            "null_mean": float(np.mean(null)), "null_std": float(np.std(null, ddof=1))}


def _margin(*stds: float) -> float:
    return max(MARGIN_FLOOR, MARGIN_Z * float(np.sqrt(sum(s * s for s in stds))))


def _labels(rows: list[dict]) -> np.ndarray:
    return np.array([LABELS.index(r["label"]) for r in rows], dtype=int)


def _too_few(y: np.ndarray) -> str:
    """Why nothing can be measured on labels ``y``, or ""."""
    few = len(y) < MIN_CLAIMS or len(set(y.tolist())) < 2
    return f"fewer than {MIN_CLAIMS} claims or fewer than 2 labels" if few else ""


def _pool_draws(pool: list[dict], counts: np.ndarray, seed: int) -> list[list[dict]]:
    """Seeded subsamples of the pool with the release's label counts (scaled down alike when the pool lacks some)."""
    y = _labels(pool)
    have = np.bincount(y, minlength=len(LABELS))
    scale = min([1.0] + [have[i] / counts[i] for i in range(len(LABELS)) if counts[i] and have[i]])
    take = [int(scale * counts[i]) if have[i] else 0 for i in range(len(LABELS))]
    rng = np.random.default_rng([seed, 1])
    return [[pool[j] for j in sorted(np.concatenate([rng.choice(np.flatnonzero(y == i), n, replace=False)
                                                    for i, n in enumerate(take)]).tolist())]
            for _ in range(POOL_DRAWS)]


def _feature(rows: list[dict], name: str, seed: int) -> dict:
    """One feature's unrounded figures on ``rows`` (media ids: on the claims with media), or why it was skipped."""
    rows = [r for r in rows if r["media_ids"]] if name == "media_ids" else rows
    y = _labels(rows)
    if reason := _too_few(y):
        return {"claims": len(rows), "skipped": reason}
    return {"claims": len(rows), **_measure(_lookup, _codes(rows, name), y, seed)}


def _judged(m: dict, **extra) -> dict:
    """A measurement rounded to 4 digits, with its margin and verdict decided on the rounded figures: above chance,
    below chance (a classifier with its sign flipped recovers signal), and off chance (either: what gates)."""
    if "skipped" in m:
        return {**extra, **m, "above_chance": False, "below_chance": False, "off_chance": False}
    out = {k: v if isinstance(v, int) else round(v, 4) for k, v in m.items()}
    out["margin"] = round(_margin(out["null_std"]), 4)
    out["lift"] = round(out["accuracy"] - out["null_mean"], 4)
    above, below = out["lift"] > out["margin"], out["lift"] < -out["margin"]
    return {**extra, **out, "above_chance": above, "below_chance": below, "off_chance": above or below}


def _pool_figures(draws: list[list[dict]], name: str, seed: int) -> dict:
    """A feature's figures on the pool: the mean over the draws (null_std: root mean square)."""
    ms = [_feature(d, name, seed) for d in draws]
    mean = {k: float(np.mean([m[k] for m in ms])) for k in ms[0] if k != "claims"}
    mean["null_std"] = float(np.sqrt(np.mean([m["null_std"] ** 2 for m in ms])))
    return _judged(mean, claims=ms[0]["claims"], draws=len(draws))


def _selection(entry: dict, pool: dict) -> dict:
    """Whether the selection added to a feature's signal: its release lift over the pool's (at least 0)."""
    excess = round(entry["lift"] - max(pool["lift"], 0.0), 4)
    margin = round(_margin(entry["null_std"], pool["null_std"]), 4)
    return {"excess_lift": excess, "margin": margin, "added": entry["above_chance"] and excess > margin}


TEXT_FEATURES = ({"ngram_range": (1, 2)}, {"analyzer": "char_wb", "ngram_range": (2, 4)})  # word and char n-grams
MIN_DF, MAX_FEATURES = 2, 20000  # per kind of n-gram


def text_vectors(texts: list[str]):
    """TF-IDF of word 1-2 grams and char 2-4 grams, fit on the texts alone (no labels); media refs lose their ids:
    scikit-learn's ``TfidfVectorizer(min_df=2, sublinear_tf=True, max_features=20000)`` of each kind, side by side."""
    return TextVectors(texts).of(range(len(texts)))


class TextVectors:
    """``text_vectors`` of many subsets of one list of texts, each text read into n-grams once (the adversarial filter
    fits it again after each slice it leaves out: 7 fits took 2.3 s of the rehearsal's 5.6 s filter). A subset's
    matrix is the one ``TfidfVectorizer`` fits on the subset alone: the n-gram counts of its rows, the n-grams in at
    least MIN_DF of them in alphabetical order, the MAX_FEATURES most frequent of those chosen as scikit-learn chooses
    them, then TF-IDF. Its values differ from scikit-learn's in the last bit at most (1e-16): each row's norm is summed
    in the n-grams' order, not in the order they were first seen (tests/test_shortcut_audit.py)."""

    def __init__(self, texts: list[str]):
        from sklearn.feature_extraction.text import CountVectorizer

        texts = [MEDIA_REF.sub(lambda m: f" {m.group(1)}ref ", t) for t in texts]
        # every n-gram of the texts, alphabetical (a vectorizer's own order): a subset's are a sub-sequence of them
        self.counts = [CountVectorizer(**kind, dtype=np.float64).fit_transform(texts).tocsr() for kind in TEXT_FEATURES]

    def of(self, rows) -> "object":
        """The TF-IDF matrix of the texts at ``rows`` (in that order), as ``text_vectors`` of those texts."""
        from scipy.sparse import hstack
        from sklearn.feature_extraction.text import TfidfTransformer

        rows = np.asarray(list(rows), dtype=np.intp)
        return hstack([TfidfTransformer(sublinear_tf=True).fit_transform(_limited(counts[rows]))
                       for counts in self.counts]).tocsr()


def _limited(counts):
    """The columns ``CountVectorizer(min_df=MIN_DF, max_features=MAX_FEATURES)`` keeps of these rows' counts: in at
    least MIN_DF rows, and of those the MAX_FEATURES largest totals, ties broken by the same (unstable) argsort over
    the same array as scikit-learn's ``_limit_features``."""
    frequency = np.bincount(counts.indices, minlength=counts.shape[1])
    mask = frequency >= MIN_DF
    if not mask.any():
        raise ValueError("After pruning, no terms remain. Try a lower min_df or a higher max_df.")
    if mask.sum() > MAX_FEATURES:
        totals = np.asarray(counts.sum(axis=0)).ravel()
        chosen = np.zeros(len(mask), dtype=bool)
        chosen[np.flatnonzero(mask)[(-totals[mask]).argsort()[:MAX_FEATURES]]] = True
        mask = chosen
    return counts[:, np.flatnonzero(mask)]


RECTIFIED_FIELDS = ("date", "language", "publisher", "n_media", "media_kind", "media_ref", "text_length")


def _lookup_balanced(x, y, train, test):
    """``_lookup`` with each label's counts weighted by its inverse frequency (a value says rewritten when the
    rewrites are over-represented among its claims)."""
    prior = np.bincount(y[train], minlength=y.max() + 1).astype(float)
    counts = np.tile(prior * 1e-6, (x.max() + 1, 1))
    np.add.at(counts, (x[train], y[train]), 1.0 / prior[y[train]])
    return counts.argmax(1)[x[test]]


def _rectified_fields(rows: list[dict], seed: int) -> dict:
    """Does any other published field than the text (date, language, publisher, media, text length) tell a rewritten
    claim from the natural Compromised claims it hides among (as ``_style``)? Balanced accuracy of each field."""
    group = [r for r in rows if r.get("variant") == "rectified" or r["label"] == "compromised"]
    y = np.array([r.get("variant") == "rectified" for r in group], dtype=int)
    if min(int(y.sum()), int(len(y) - y.sum())) < MIN_STYLE:
        return {}
    return {name: _judged({"claims": len(group), **_measure(_lookup_balanced, _codes(group, name), y, seed,
                                                            balanced=True)}, metric="balanced accuracy")
            for name in RECTIFIED_FIELDS}


def _text(rows: list[dict], y: np.ndarray, seed: int, **extra) -> dict:
    return _judged({"claims": len(rows), **_measure(_linear, text_vectors([r["text"] for r in rows]), y, seed)},
                   model="tfidf+lr", **extra)


STYLE_AGAINST = {"compromised": "natural Compromised claims (the false-rated claims the rewrites come from)",
                 "intact": "natural Intact claims"}


def _style(rows: list[dict], seed: int, against: str = "compromised") -> dict:
    """Can the text tell a rectified (rewritten) claim from the natural claims of label ``against``? Balanced accuracy
    (chance 0.5 whatever the mix). Against natural Compromised claims, the population the rewrites are drawn from,
    it measures the rewriting itself: the attack "rewritten means Intact" must tell a rewrite from them. Against
    natural Intact claims it measures that and what the world puts apart (the claims rated true are about other
    things, from other publishers), which natural claims alone show in ``natural_text``."""
    group = [r for r in rows if r.get("variant") == "rectified" or r["label"] == against]
    y = np.array([r.get("variant") == "rectified" for r in group], dtype=int)
    counts = {"rectified": int(y.sum()), "original": int(len(y) - y.sum()), "against": STYLE_AGAINST[against]}
    if min(counts["rectified"], counts["original"]) < MIN_STYLE:
        return {**counts, "skipped": f"fewer than {MIN_STYLE} rectified claims or {STYLE_AGAINST[against]}"}
    x = text_vectors([r["text"] for r in group])
    return _judged({"claims": len(group), **_measure(_linear_balanced, x, y, seed, balanced=True)},
                   model="tfidf+lr (balanced)", metric="balanced accuracy", **counts)


def _natural_text(pool: list[dict], counts: np.ndarray, seed: int) -> dict:
    """The claim-only figure on natural claims alone (the pool's originals) at the release's label counts, scaled
    down alike where the pool lacks some (the mean over the draws): what the wording of claims people post gives
    away, against which the release's own claim-only figure is held."""
    natural = [r for r in pool if r.get("variant") != "rectified"]
    draws = _pool_draws(natural, counts, seed) if natural else []
    if not draws or _too_few(_labels(draws[0])):
        return {"skipped": "too few natural claims at the release's label counts", "claims": len(natural)}
    ms = [_measure(_linear, text_vectors([r["text"] for r in d]), _labels(d), seed) for d in draws]
    mean = {k: float(np.mean([m[k] for m in ms])) for k in ms[0]}
    mean["null_std"] = float(np.sqrt(np.mean([m["null_std"] ** 2 for m in ms])))
    return _judged(mean, claims=len(draws[0]), draws=len(draws), model="tfidf+lr",
                   labels=dict(zip(LABELS, np.bincount(_labels(draws[0]), minlength=len(LABELS)).tolist())))


TEXT_MARGIN = 0.05  # the claim-only figure may exceed the majority label by this much, or natural claims' figure


def _resolve_groups(release: list[dict], pool: list[dict]) -> None:
    """Every row its review group (``channels.group_key``): rows built without their scored claims take the group
    of the pool's claim with the same review URL (a rewrite keeps its original's), else their own URL."""
    merge_groups([*release, *pool])
    by_url = {r["review_url"]: r["group"] for r in pool if r.get("group") and r.get("review_url")}
    for r in (*release, *pool):
        if not r.get("group"):
            r["group"] = by_url.get(r.get("review_url", ""), r.get("review_url") or r["text"])


def _channel_blocks(rows: list[dict], corpus: list[dict]) -> tuple[dict, dict]:
    """(channel -> binned matrix over ``rows``, channel -> why it was not measured)."""
    blocks, skipped = {}, {}
    for name, features in channel_features(rows, corpus).items():
        if features is None:
            skipped[name] = ("no media text given (the release's media were not read)" if name == "media_text" else
                             "no media sizes or hashes given (release rows built without their scored claims)")
        elif np.isnan(features).all():
            skipped[name] = "no claim has anything to read there"
        else:
            blocks[name] = binned(features, BINS)
    return blocks, skipped


def _with_text(rows: list[dict], blocks: dict, idx: np.ndarray):
    """The claims ``idx`` of the rows as the combined figure reads them: their text (TF-IDF fit on them) beside every
    channel's bins."""
    from scipy.sparse import hstack

    return hstack([text_vectors([rows[i]["text"] for i in idx]), *(CHANNEL_WEIGHT * b[idx] for b in blocks.values())]
                  ).tocsr()


CHANNEL_MODEL = (f"each channel's numbers in {BINS} quantile bins (one-hot, a missing value a bin of its own) + "
                 f"logistic regression; combined: the text's TF-IDF beside every channel's bins (weighted "
                 f"{CHANNEL_WEIGHT})")


def _channels(release: list[dict], corpus: list[dict], natural_pool: list[dict], seed: int) -> dict:
    """Each channel beyond the text (``channels.CHANNELS``) and all of them with the text (``combined``), measured as
    the rectified style is (balanced accuracy, the same CV, chance from label shuffles) on rewrites against natural
    Compromised claims (``gating``, the pair a rewrite hides among) and against all natural claims (``vs_natural``,
    reported), and as the claim-only figure is on the 3-bin label (``label``); the natural claims alone at the
    release's label counts where a label figure needs comparing (``natural_label``, as ``natural_text``)."""
    blocks, skipped = _channel_blocks(release, corpus)
    out = {"method": CHANNEL_MODEL, "fluency_model": FLUENCY_MODEL,
           "features": {n: list(CHANNEL_FEATURES[n]) for n in CHANNELS}, "skipped": skipped,
           "gating": {}, "vs_natural": {}, "label": {}, "natural_label": {}}
    names = [*blocks, "combined"]
    rectified = np.array([r.get("variant") == "rectified" for r in release])
    for key, others in (("gating", np.array([r["label"] == "compromised" for r in release]) & ~rectified),
                        ("vs_natural", ~rectified)):
        idx = np.flatnonzero(rectified | others)
        y = rectified[idx].astype(int)
        if min(int(y.sum()), int(len(y) - y.sum())) < MIN_STYLE:
            out[key] = {n: {"skipped": f"fewer than {MIN_STYLE} rewrites or natural claims"} for n in names}
            continue
        for name in names:
            x = _with_text(release, blocks, idx) if name == "combined" else blocks[name][idx]
            out[key][name] = _judged({"claims": len(idx), **_measure(_linear_balanced, x, y, seed, balanced=True)},
                                     metric="balanced accuracy", rectified=int(y.sum()), natural=int(len(y) - y.sum()))
    y = _labels(release)
    every = np.arange(len(release))
    for name in names:
        x = _with_text(release, blocks, every) if name == "combined" else blocks[name]
        out["label"][name] = _judged({"claims": len(release), **_measure(_linear, x, y, seed)}, metric="accuracy")
    counts = np.bincount(y, minlength=len(LABELS))
    for name, figure in out["label"].items():  # natural claims' own figure, only where it decides
        if "accuracy" in figure and figure["lift"] > figure["margin"]:
            out["natural_label"][name] = _natural_channel(natural_pool, corpus, counts, name, seed)
    return out


def _natural_channel(natural: list[dict], corpus: list[dict], counts: np.ndarray, name: str, seed: int) -> dict:
    """A channel's 3-bin figure on natural claims alone at the release's label counts (the mean over the draws):
    what the world gives that channel, against which the release's figure is held."""
    draws = _pool_draws(natural, counts, seed) if natural else []
    if not draws or _too_few(_labels(draws[0])):
        return {"skipped": "too few natural claims at the release's label counts"}
    ms = []
    for d in draws:
        blocks, _ = _channel_blocks(d, corpus)
        if name != "combined" and name not in blocks:
            return {"skipped": "the pool's claims do not carry this channel"}
        x = _with_text(d, blocks, np.arange(len(d))) if name == "combined" else blocks[name]
        ms.append(_measure(_linear, x, _labels(d), seed))
    mean = {k: float(np.mean([m[k] for m in ms])) for k in ms[0]}
    mean["null_std"] = float(np.sqrt(np.mean([m["null_std"] ** 2 for m in ms])))
    return _judged(mean, claims=len(draws[0]), draws=len(draws))


def _auc(score: np.ndarray, y: np.ndarray) -> float:
    """The probability that a class-1 score exceeds a class-0 one (ties count half): Mann-Whitney's U over n1 n0."""
    from scipy.stats import rankdata

    ranks = rankdata(score)
    n1, n0 = int(y.sum()), int(len(y) - y.sum())
    return float((ranks[y == 1].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def _transfer(release: list[dict], pool: list[dict], corpus: list[dict]) -> dict:
    """Does a classifier that learned rewrites elsewhere tell the released ones, either way? Trained as the
    adversarial filter trains, on the pool's claims the release does not hold (its rewrites against its natural
    Compromised claims that have none; no claim of a released claim's review group: a rewrite's own original would
    teach it that rewrite's words as natural), it
    scores the released rewrites and natural Compromised claims: AUC, 0.5 at chance, under 0.5 when the released
    rewrites look more natural than natural claims do (a filter that kept the least detectable: the classifier with
    its sign flipped recovers signal). Chance and its noise: the AUC's exact null distribution (no ties) has mean
    0.5 and variance (n0 + n1 + 1) / (12 n0 n1)."""
    from sklearn.linear_model import LogisticRegression

    test = [r for r in release if r.get("variant") == "rectified" or r["label"] == "compromised"]
    y_test = np.array([r.get("variant") == "rectified" for r in test], dtype=int)
    held = {r["group"] for r in test}
    rewritten = {r["group"] for r in pool if r.get("variant") == "rectified"}
    # as the filter trains: no natural claim beside its own rewrite (the pair would teach the rewrite's edit alone)
    train = [r for r in pool if r["group"] not in held and (r.get("variant") == "rectified" or (
             r["label"] == "compromised" and r["group"] not in rewritten))]
    y_train = np.array([r.get("variant") == "rectified" for r in train], dtype=int)
    counts = {"rectified": int(y_test.sum()), "natural": int(len(y_test) - y_test.sum()),
              "trained_on": {"rectified": int(y_train.sum()), "natural": int(len(y_train) - y_train.sum())}}
    if not any(r.get("variant") == "rectified" for r in pool):
        return {**counts, "skipped": "the pool holds no rewrite (built from the originals alone)"}
    if min(*counts["trained_on"].values(), counts["rectified"], counts["natural"]) < MIN_STYLE:
        return {**counts, "skipped": f"fewer than {MIN_STYLE} rewrites or natural Compromised claims to train or test"}
    rows = test + train
    blocks, _ = _channel_blocks(rows, corpus)
    x = _with_text(rows, blocks, np.arange(len(rows)))
    model = LogisticRegression(C=10.0, class_weight="balanced", solver="liblinear", max_iter=500)
    score = model.fit(x[len(test):], y_train).decision_function(x[: len(test)])
    n1, n0 = counts["rectified"], counts["natural"]
    auc = _auc(score, y_test)
    std = float(np.sqrt((n0 + n1 + 1) / (12 * n0 * n1)))
    figure = _judged({"accuracy": auc, "null_mean": 0.5, "null_std": std}, metric="AUC",
                     model="tfidf+lr (balanced)" + (" + " + ", ".join(blocks) if blocks else ""), **counts)
    figure["auc"] = figure.pop("accuracy")
    return figure


def _off(f: dict) -> str:
    side = "above" if f["lift"] > 0 else "below"
    return (f"{f['accuracy']:.2f} against chance {f['null_mean']:.2f} ({side} it by more than the margin "
            f"{f['margin']:.2f})")


def channel_problems(report: dict) -> list[str]:
    """What the channels beyond the text give away, either way: a channel (or all of them with the text) telling
    rewrites from natural Compromised claims off chance, or giving the 3-bin label above what chance, the majority
    label + TEXT_MARGIN and natural claims alone allow or below chance; and the transfer figure off chance."""
    problems = []
    channels = report.get("channels") or {}
    for name, f in (channels.get("gating") or {}).items():
        if f.get("off_chance"):
            problems.append(f"the {name} channel tells rewritten claims from natural Compromised ones: balanced "
                            f"accuracy {_off(f)}. See the shortcut audit's channels and the rewrites' media and "
                            "wording (stage 7's media consistency rule, the adversarial filter)")
    for name, f in (channels.get("label") or {}).items():
        if "accuracy" not in f:
            continue
        natural = (channels.get("natural_label") or {}).get(name) or {}
        ceiling = max(f["majority_accuracy"] + TEXT_MARGIN, f["null_mean"] + f["margin"])
        if "accuracy" in natural:
            ceiling = max(ceiling, natural["accuracy"] + _margin(f["null_std"], natural["null_std"]))
        text = report.get("text") or {}
        if name == "combined" and "accuracy" in text:  # what the text alone gives, its own gate judges
            ceiling = max(ceiling, text["accuracy"] + _margin(f["null_std"], text["null_std"]))
        if f["accuracy"] > ceiling or f["below_chance"]:
            problems.append(f"the {name} channel predicts the 3-bin label: accuracy {_off(f)}, majority "
                            f"{f['majority_accuracy']:.2f}, natural claims alone "
                            + (f"{natural['accuracy']:.2f}" if "accuracy" in natural else "not measured"))
    transfer = report.get("filter_transfer") or {}
    if transfer.get("off_chance"):
        side = "more" if transfer["lift"] > 0 else "less"
        problems.append(
            f"a classifier trained on the rewrites the release left out finds the released ones {side} like rewrites "
            f"than natural Compromised claims: AUC {transfer['auc']:.2f} against 0.5 +- {transfer['margin']:.2f}. "
            "The adversarial filter must keep rewrites whose scores match natural claims', neither the most nor the "
            "least detectable")
    return problems


def text_problems(report: dict) -> list[str]:
    """What the pipeline made the claim and its media give away (rewriting, selection), which blocks publication
    unless ``stages.allow_text_shortcut``: the rectified style off chance either way, the claim text predicting the
    label beyond the majority + TEXT_MARGIN, chance + the shuffles' margin (_margin) and what natural claims alone
    reach at the release's label counts, or below chance; and the channels beyond the text (``channel_problems``)."""
    problems = []
    style = report.get("rectified_style") or {}
    if style.get("off_chance"):
        problems.append(
            f"the text tells rewritten claims from natural ones: rectified-style accuracy {style['accuracy']:.2f}"
            f" against chance {style['null_mean']:.2f} + margin {style['margin']:.2f}"
            + (" (below it: a classifier with its sign flipped tells them)" if style.get("below_chance") else "")
            + ". Rewrites need to read like the "
            "claims people post: look at the rejected and kept rewrites (rectified_claims), the rewrite prompt and "
            "the writer model. Stage 7 on demand makes as many as the adversarial filter needs to spare while "
            "candidates last (rectify/detectable_share; it warns when they run out): stages.score: all gives it "
            "more, and stages.rectify_surplus raises its floor")
    text, natural = report.get("text") or {}, report.get("natural_text") or {}
    if "accuracy" in text:
        # and beyond chance by the margin the label shuffles give: on a release of 80 the shuffles' accuracies spread
        # by about 0.05, so a fixed 0.05 over the majority blocked the claim-only figure's noise (0.61 against 0.55)
        ceiling = max(text["majority_accuracy"] + TEXT_MARGIN, text["null_mean"] + _margin(text["null_std"]))
        if "accuracy" in natural:
            ceiling = max(ceiling, natural["accuracy"] + _margin(text["null_std"], natural["null_std"]))
        if text["accuracy"] > ceiling:
            problems.append(
                f"the claim text alone predicts the label: claim-only 3-bin accuracy {text['accuracy']:.2f} against "
                f"majority {text['majority_accuracy']:.2f} + {TEXT_MARGIN}, chance {text['null_mean']:.2f} + margin "
                f"{_margin(text['null_std']):.2f}, and natural claims alone "
                + (f"{natural['accuracy']:.2f} at the same label counts" if "accuracy" in natural else "(not measured)")
                + ": the rewrites or the selection put the label in the wording. Look at the rectified style above, "
                "or publish on purpose with stages.allow_text_shortcut: true (the card then says so first)")
        elif text["accuracy"] < text["null_mean"] - _margin(text["null_std"]):
            problems.append(
                f"the claim text predicts the label below chance: claim-only 3-bin accuracy {text['accuracy']:.2f} "
                f"against chance {text['null_mean']:.2f} - margin {_margin(text['null_std']):.2f}: the selection "
                "put the labels against the wording's own signal, which a reader can turn round")
    return problems + channel_problems(report)


POOL_NAME = ("every original claim stage 6 scored this quarter (its whole scored pool; rewrites left out of the "
             "feature and natural-claims figures, as demand and the selection chose them)")


def shortcut_audit(release: list[dict], pool: list[dict], seed: int = 0) -> dict:
    """The audit report of one release (``release_rows``) against the quarter's whole scored pool (``pool_rows`` of
    every claim stage 6 scored, and of the rewrites stage 7 made: those only train the transfer figure; the other
    figures compare the originals): JSON-serialisable, floats rounded to 4 digits, ``problems`` from
    ``audit_problems``, ``text_problems`` from ``text_problems`` (the channels' among them)."""
    from threadpoolctl import threadpool_limits

    y = _labels(release)
    counts = np.bincount(y, minlength=len(LABELS))
    report = {"claims": len(release), "labels": dict(zip(LABELS, counts.tolist()))}
    if reason := _too_few(y):
        return {**report, "skipped": reason, "problems": [], "text_problems": []}
    release, every = [dict(r) for r in release], [dict(r) for r in pool]
    _resolve_groups(release, every)
    pool = [r for r in every if r.get("variant") != "rectified"]  # the natural claims: the figures below compare them
    corpus = pool or [r for r in release if r.get("variant") != "rectified"]  # the fluency model's training claims
    draws = _pool_draws(pool, counts, seed) if pool else []
    pool_skipped = "no pool" if not draws else _too_few(_labels(draws[0]))
    with threadpool_limits(1):  # BLAS threads only fight over the few cores for these small problems
        features = {}
        for name, (group, kind) in FEATURES.items():
            entry = _judged(_feature(release, name, seed), group=group, model=kind)
            if name in POOL_FEATURES:
                entry["pool"] = None if pool_skipped else _pool_figures(draws, name, seed)
                entry["selection"] = None if pool_skipped or "skipped" in entry else _selection(entry, entry["pool"])
            features[name] = entry
        text, style = _text(release, y, seed, group="text"), _style(release, seed)
        style_intact = _style(release, seed, "intact")
        natural = _natural_text(pool, counts, seed) if pool else {"skipped": "no pool"}
        fields = _rectified_fields(release, seed)
        channels = _channels(release, corpus, pool, seed)
        transfer = _transfer(release, every, corpus)
    top = int(counts.argmax())
    report.update({
        "majority": {"label": LABELS[top], "accuracy": round(counts[top] / len(y), 4)},
        "method": f"{FOLDS}-fold stratified CV (shuffled, seed {seed}); chance: the same on {SHUFFLES} label shuffles; "
                  f"numbers in {BINS} quantile bins, each value's majority label; text: TF-IDF + logistic regression",
        "margin_rule": MARGIN_RULE, "seed": seed,
        "pool": {"name": POOL_NAME, "claims": len(pool), "subsample": len(draws[0]) if draws else 0,
                 "draws": len(draws), "skipped": pool_skipped or None},
        "features": features, "text": text, "natural_text": natural, "rectified_style": style,
        "rectified_vs_natural_intact": style_intact,
        "rectified_fields": fields, "channels": channels, "filter_transfer": transfer,
    })
    report["problems"] = audit_problems(report)
    report["text_problems"] = text_problems(report)
    return report


def audit_problems(report: dict) -> list[str]:
    """What blocks publication: position or ids off chance either way (below chance, a reader who turns the lookup
    round recovers the label), or a feature the selection made more predictive than it is in the pool, or made
    predict below chance. World, text and rectified-style figures alone never block here (``text_problems``)."""
    problems = []
    for name, f in report.get("features", {}).items():
        if name in ORDER_FEATURES and "accuracy" in f and abs(f["accuracy"] - f["null_mean"]) > f["margin"]:
            side = ">" if f["accuracy"] > f["null_mean"] else "<"
            bound = "+" if side == ">" else "-"
            problems.append(f"{name} predicts the label: accuracy {f['accuracy']:.2f} {side} chance "
                            f"{f['null_mean']:.2f} {bound} {f['margin']:.2f}")
        if (s := f.get("selection")) and s["added"]:
            problems.append(f"the selection made {name} more predictive than in the pool: lift {f['lift']:.2f} in the"
                            f" release vs {f['pool']['lift']:.2f} in the pool (margin {s['margin']:.2f})")
        elif name in POOL_FEATURES and f.get("selection") and f.get("below_chance"):
            problems.append(f"the selection made {name} predict the label below chance: accuracy {f['accuracy']:.2f}"
                            f" < chance {f['null_mean']:.2f} - {f['margin']:.2f}")
    return problems


def _acc(f: dict) -> str:
    return f"{f['accuracy']:.2f}" if "accuracy" in f else "-"


def audit_line(report: dict) -> str:
    """One line for the CLI."""
    if "skipped" in report:
        return f"shortcut audit ({report['claims']} claims): skipped, {report['skipped']}"
    figures = [f"{n} {_acc(f)}" for n, f in {**report["features"], "text": report["text"]}.items()]
    figures += [f"{n} channel {_acc(f)}" for n, f in ((report.get("channels") or {}).get("gating") or {}).items()]
    if "auc" in (report.get("filter_transfer") or {}):
        figures.append(f"transfer AUC {report['filter_transfer']['auc']:.2f}")
    style = report["rectified_style"]
    text = [] if report.get("allow_text_shortcut") else report.get("text_problems", [])
    blocking = report["problems"] + text
    verdict = "BLOCKED: " + "; ".join(blocking) if blocking else (
        "ok, with a text shortcut allowed" if report.get("text_problems") else "ok")
    return (f"shortcut audit ({report['claims']} claims, majority {report['majority']['accuracy']:.2f}): "
            f"{', '.join(figures)}; rectified style {_acc(style)} (n={style['rectified'] + style['original']}); "
            f"publication: {verdict}")


def _row_md(name: str, f: dict) -> str:
    """A table row: feature | group | accuracy | macro-F1 | majority | chance (shuffled) | verdict."""
    if "accuracy" not in f:
        return f"| {name} | {f['group']} | - | - | - | - | not measured: {f['skipped']} |"
    blocks = ((name in ORDER_FEATURES and f.get("off_chance")) or (f.get("selection") or {}).get("added")
              or (name in POOL_FEATURES and f.get("selection") and f.get("below_chance")))
    verdict = ("**blocks**" if blocks else "above chance" if f["above_chance"] else "below chance"
               if f.get("below_chance") else "within noise")
    return (f"| {name} | {f['group']} | {f['accuracy']:.3f} | {f['macro_f1']:.3f} | {f['majority_accuracy']:.3f} | "
            f"{f['null_mean']:.3f} ± {f['null_std']:.3f} | {verdict} |")


def audit_markdown(report: dict) -> str:
    """The dataset card's "Shortcut audit" section: the table, and in words what predicts the label without evidence."""
    lines = ["## Shortcut audit", ""]
    if "skipped" in report:
        return "\n".join(lines + [f"Not measured: {report['skipped']} ({report['claims']} claims).", ""])
    lines += [
        f"How far a model gets without evidence. Every figure is the 3-bin accuracy (and macro-F1) of {FOLDS}-fold "
        f"stratified cross-validation (seed {report['seed']}) over the {report['claims']} claims. A single feature "
        f"predicts each of its values' majority label (numbers in {BINS} quantile bins; media ids over the claims "
        "with media); the text is read by TF-IDF (word 1-2 and char 2-4 grams) + logistic regression. Chance is the "
        f"mean accuracy of the same procedure on {SHUFFLES} label shuffles; a figure is above (below) chance when it "
        f"exceeds it (falls short of it) by more than max({MARGIN_FLOOR}, {MARGIN_Z} x the shuffles' standard "
        "deviation). Every gate is two-sided: below chance, a reader who turns the classifier round recovers the "
        "signal.", "",
        "| feature | group | accuracy | macro-F1 | majority | chance (shuffled) | verdict |",
        "|---|---|---|---|---|---|---|",
        *(_row_md(name, f) for name, f in {**report["features"], "text": report["text"]}.items()), "",
    ]
    text = report["text"]
    lines.append(f"Without evidence, the claim text alone reaches accuracy {text['accuracy']:.2f} (macro-F1 "
                 f"{text['macro_f1']:.2f}) against {text['majority_accuracy']:.2f} for the majority label and "
                 f"{text['null_mean']:.2f} by chance" + (", well above chance: part of the labels can be guessed from "
                                                        "the wording." if text["above_chance"] else ", within noise."))
    natural = report.get("natural_text") or {}
    if "accuracy" in natural:
        lines.append(f"Natural claims alone (no rewrite among them: {natural['claims']} of the quarter's originals at "
                     f"the release's label counts, {natural['draws']} draws) reach {natural['accuracy']:.2f} from the "
                     "text: what the wording of claims people post gives away, which the release's figure must not "
                     "exceed by more than the noise.")
    for name, f in report["features"].items():
        if f["above_chance"] and name not in ORDER_FEATURES:
            sel = f["selection"]
            where = ("no more than in the pool it was selected from: the world's signal, not the selection's" if sel
                     and not sel["added"] else "more than in the pool: the selection added to it" if sel else "no pool")
            lines.append(f"The claim's {name} alone ({f['group']}) predicts the label above chance (accuracy "
                         f"{f['accuracy']:.2f} vs {f['null_mean']:.2f}), {where}.")
    style = report["rectified_style"]
    if "accuracy" not in style:
        lines.append(f"Rectified style: not measured ({style['skipped']}).")
    else:
        lines.append(f"Rectified style: among {style['rectified']} rewritten claims and {style['original']} "
                     f"{style.get('against', 'natural claims')}, a text classifier (same cross-validation, TF-IDF + "
                     "logistic regression, balanced classes) "
                     + ("tells" if style["above_chance"] else "tells, with its sign flipped," if
                        style.get("below_chance") else "does not reliably tell")
                     + f" the rewritten ones from the natural ones: balanced accuracy {style['accuracy']:.2f} vs "
                       f"{style['null_mean']:.2f} (chance).")
        vs = report.get("rectified_vs_natural_intact") or {}
        if "accuracy" in vs:
            lines.append(f"Against the {vs['original']} natural Intact claims the same classifier reaches "
                         f"{vs['accuracy']:.2f}: that figure also holds what the world puts apart (claims rated true "
                         "are about other things, from other publishers), which natural claims alone show above.")
    told = [f"{n} ({f['accuracy']:.2f} vs {f['null_mean']:.2f})" for n, f in (report.get("rectified_fields") or {}).items()
            if f.get("above_chance")]
    if report.get("rectified_fields"):
        lines.append("Other published fields, each alone (balanced accuracy of rewritten vs natural Compromised claims): "
                     + (f"above chance: {', '.join(told)}." if told else
                        f"none of {', '.join(report['rectified_fields'])} tells them apart beyond chance."))
    lines += _channels_md(report)
    pool = report["pool"]
    lines.append(f"The selection was checked against {pool.get('name', 'its pool')} ({pool['claims']} claims, "
                 f"{pool['draws']} draws of {pool['subsample']} at the release's label counts): it must not make a "
                 "feature more predictive." if not pool["skipped"] else
                 f"The selection was not checked against its pool ({pool['skipped']}).")
    lines.append("Publication blocked: " + "; ".join(report["problems"]) + "." if report["problems"] else
                 "No claim position or id predicts the label, and the selection adds no signal the pool lacks.")
    if report.get("text_problems"):
        lines.append(("Published anyway (stages.allow_text_shortcut): " if report.get("allow_text_shortcut") else
                      "Publication blocked: ") + "; ".join(report["text_problems"]) + ".")
    else:
        lines.append("Neither the text nor the media or fluency tell rewritten claims from natural ones, either way, "
                     "nor give the label beyond what natural claims give.")
    return "\n".join(lines + [""])


def _cell(f: dict | None, natural: dict | None = None) -> str:
    """A figure vs chance ± its margin; a 3-bin figure above chance names what natural claims alone give the same
    channel at the release's label counts (``natural``), the ceiling it is held to."""
    if not f or "accuracy" not in f:
        return "-"
    flag = " (above)" if f["above_chance"] else " (below)" if f.get("below_chance") else ""
    world = f"; natural claims alone {natural['accuracy']:.3f}" if natural and "accuracy" in natural else ""
    return f"{f['accuracy']:.3f} vs {f['null_mean']:.3f} ± {f['margin']:.3f}{flag}{world}"


def _channels_md(report: dict) -> list[str]:
    """The channels beyond the text: a table of each channel's figures, and the transfer figure in words."""
    channels = report.get("channels") or {}
    lines = []
    if channels:
        names = [*channels.get("gating", {})] or [*channels.get("label", {})]
        lines += ["", "Channels beyond the text, each alone and all with the text (combined): "
                  f"{channels['method']}; fluency: {channels['fluency_model']}. Each cell: the figure vs chance ± "
                  "the margin; the first and last columns gate, both ways.", "",
                  "| channel | rewrites vs natural Compromised (balanced acc.) | rewrites vs all natural "
                  "(balanced acc.) | 3-bin label (accuracy) |", "|---|---|---|---|",
                  *(f"| {n} | {_cell(channels['gating'].get(n))} | {_cell(channels['vs_natural'].get(n))} | "
                    f"{_cell(channels['label'].get(n), (channels.get('natural_label') or {}).get(n))} |" for n in names), ""]
        if channels.get("skipped"):
            lines.append("Not measured: " + "; ".join(f"{n} ({why})" for n, why in channels["skipped"].items()) + ".")
    transfer = report.get("filter_transfer") or {}
    if "auc" in transfer:
        lines.append(f"A classifier trained on the quarter's rewrites the release left out ({transfer['model']}) "
                     f"scores the {transfer['rectified']} released rewrites against the {transfer['natural']} released "
                     f"natural Compromised claims at AUC {transfer['auc']:.2f} (chance 0.5 ± "
                     f"{transfer['margin']:.2f}): "
                     + ("within noise either way." if not transfer["off_chance"] else
                        "the released rewrites look more like rewrites." if transfer["above_chance"] else
                        "the released rewrites look more natural than natural claims: the filter over-corrected."))
    elif transfer:
        lines.append(f"The transfer figure was not measured ({transfer['skipped']}).")
    return lines
