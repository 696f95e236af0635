"""The shortcut audit: how far a model gets on a release's labels without any evidence.

Serious fact-checking benchmarks report a claim-only baseline (FEVER's reached ~62% against 33% chance, Schuster et
al. 2019). ``shortcut_audit`` measures, by 5-fold stratified cross-validation (fewer folds when a label is tiny,
shuffled with a fixed seed), the 3-bin accuracy and macro-F1 of

- each pipeline feature alone (what our pipeline made): position, claim id, media ids (among the claims with
  media: a sentinel for "none" would copy media presence, which n_media measures against the pool), text length,
  media count, media kind, media references in the text;
- each world feature alone (what the world brings): language, claim date, publisher (the review URL's domain);
- the claim text alone (TF-IDF word 1-2 grams and char 2-4 grams + logistic regression);
- the rectified style: among Intact claims, whether the text tells a rewritten claim from a natural one.

Each figure stands next to the majority-class baseline and next to chance as measured: the same cross-validation
on labels shuffled ``SHUFFLES`` times (``MARGIN_RULE``). ``audit_problems`` says what blocks publication: position
or ids above chance, or a feature the selection made more predictive than it is in the pool the release was
selected from. A number is read in ``BINS`` quantile bins, and a binned number or a category predicts each value's
majority training label (a one-hot lookup: it reveals contiguous label blocks along ids and position). BLAS runs
on one thread. Plain functions, no Dagster. scikit-learn, scipy, threadpoolctl and tldextract are imported where
they are used: the code location imports this module, and every run of every stage would pay for them (seconds).
"""

import warnings
from datetime import date as Date

import numpy as np

from assets.rules.bins import bin3
from assets.rules.length import MEDIA_REF
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
    f"above chance: accuracy - null_mean > margin, margin = max({MARGIN_FLOOR}, {MARGIN_Z} * null_std), null = "
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
        "label": label,
    }


def release_rows(claims: list[ReleaseClaim], variants: list[str]) -> list[dict]:
    """One row per release claim in claims.json order; ``variants[i]`` ("original"/"rectified") is claim i's."""
    return [
        {"position": i, "claim_id": c.id, "media_ids": [m.id for m in c.media], "variant": v,
         **_row(c.text, [m.type for m in c.media], c.language, c.date, c.review_url, bin3(c.integrity.score))}
        for i, (c, v) in enumerate(zip(claims, variants, strict=True))
    ]


def pool_rows(pool: list[ScoredClaim]) -> list[dict]:
    """One row per scored claim of the pool the release was selected from (originals and rectified variants)."""
    return [
        {"variant": c.variant, **_row(c.text, [m.kind for m in c.media], c.language, c.claim_date, c.review_url,
                                      c.integrity.label)}
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
    """A measurement rounded to 4 digits, with its margin and verdict decided on the rounded figures."""
    if "skipped" in m:
        return {**extra, **m, "above_chance": False}
    out = {k: v if isinstance(v, int) else round(v, 4) for k, v in m.items()}
    out["margin"] = round(_margin(out["null_std"]), 4)
    out["lift"] = round(out["accuracy"] - out["null_mean"], 4)
    return {**extra, **out, "above_chance": out["lift"] > out["margin"]}


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


def text_problems(report: dict) -> list[str]:
    """What the pipeline made the text give away (rewriting, selection), which blocks publication unless
    ``stages.allow_text_shortcut``: the rectified style above chance, or the claim text predicting the label beyond
    the majority + TEXT_MARGIN, chance + the shuffles' margin (_margin) and what natural claims alone reach at the
    release's label counts."""
    problems = []
    style = report.get("rectified_style") or {}
    if style.get("above_chance"):
        problems.append(
            f"the text tells rewritten claims from natural ones: rectified-style accuracy {style['accuracy']:.2f}"
            f" against chance {style['null_mean']:.2f} + margin {style['margin']:.2f}. Rewrites need to read like the "
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
    return problems


POOL_NAME = ("every original claim stage 6 scored this quarter (its whole scored pool; rewrites left out, as demand "
             "and the selection chose them)")


def shortcut_audit(release: list[dict], pool: list[dict], seed: int = 0) -> dict:
    """The audit report of one release (``release_rows``) against the quarter's whole scored pool (``pool_rows`` of
    every original claim stage 6 scored): JSON-serialisable, floats rounded to 4 digits, ``problems`` from
    ``audit_problems``, ``text_problems`` from ``text_problems``."""
    from threadpoolctl import threadpool_limits

    y = _labels(release)
    counts = np.bincount(y, minlength=len(LABELS))
    report = {"claims": len(release), "labels": dict(zip(LABELS, counts.tolist()))}
    if reason := _too_few(y):
        return {**report, "skipped": reason, "problems": [], "text_problems": []}
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
        "rectified_fields": fields,
    })
    report["problems"] = audit_problems(report)
    report["text_problems"] = text_problems(report)
    return report


def audit_problems(report: dict) -> list[str]:
    """What blocks publication: position or ids above chance, or a feature the selection made more predictive
    than it is in the pool. World, text and rectified-style figures alone never block."""
    problems = []
    for name, f in report.get("features", {}).items():
        if name in ORDER_FEATURES and "accuracy" in f and f["accuracy"] - f["null_mean"] > f["margin"]:
            problems.append(f"{name} predicts the label: accuracy {f['accuracy']:.2f} > chance {f['null_mean']:.2f}"
                            f" + {f['margin']:.2f}")
        if (s := f.get("selection")) and s["added"]:
            problems.append(f"the selection made {name} more predictive than in the pool: lift {f['lift']:.2f} in the"
                            f" release vs {f['pool']['lift']:.2f} in the pool (margin {s['margin']:.2f})")
    return problems


def _acc(f: dict) -> str:
    return f"{f['accuracy']:.2f}" if "accuracy" in f else "-"


def audit_line(report: dict) -> str:
    """One line for the CLI."""
    if "skipped" in report:
        return f"shortcut audit ({report['claims']} claims): skipped, {report['skipped']}"
    figures = [f"{n} {_acc(f)}" for n, f in {**report["features"], "text": report["text"]}.items()]
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
    blocks = (name in ORDER_FEATURES and f["above_chance"]) or (f.get("selection") or {}).get("added")
    verdict = "**blocks**" if blocks else "above chance" if f["above_chance"] else "within noise"
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
        f"mean accuracy of the same procedure on {SHUFFLES} label shuffles; a figure is above chance when it exceeds "
        f"it by more than max({MARGIN_FLOOR}, {MARGIN_Z} x the shuffles' standard deviation).", "",
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
                     + ("tells" if style["above_chance"] else "does not reliably tell")
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
        lines.append("The text does not tell rewritten claims from natural ones, nor the label beyond what natural "
                     "claims give.")
    return "\n".join(lines + [""])
