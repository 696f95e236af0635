"""What a system under test can read besides the claim's words (issue 49): the media's own text, the pictures
themselves, and how fluent the claim reads. The shortcut audit measures each channel (can it tell a rewrite from a
natural claim, or give the label?), and the adversarial filter reads them beside the text.

- **media text**: what stage 5's OCR read on each image and video frame (``assets/rules/media_text.py`` keeps it in
  ``ocr_cache.sqlite`` beside the LLM cache, by the file's sha256: ``MediaTexts`` reads it back) and how well it
  matches the claim text (``media_fit``): rapidfuzz's ``partial_ratio`` of the two texts casefolded with every space
  and punctuation mark taken out (the OCR often drops the spaces of a line: "TheimageshowsRailaOdinga"), the same
  ``ratio`` against the claim's opening characters, and ``token_set_ratio`` of the texts as written.
- **image**: the first medium's pixel size (log area, aspect) and the perceptual-hash (pHash, 64 bits) Hamming
  distance to the nearest medium of another claim in the same set (another review of the same claim apart).
- **fluency**: the claim's mean log2-probability per character, and the summed log2-probability of its least
  probable word and of its least probable word in lower case (a garbled common word; a claim's own names are
  improbable in every claim), under a character 5-gram language model (``CharLM``) trained on the natural claims of
  the quarter's pool, each claim scored by the model without its own review group (its original, its rewrites,
  other reviews of the same claim): an n-gram it shares with its own original would make a rewrite look fluent. The
  embedded model (SmolLM2-135M, Q4_1, llama-cpp-python) gives per-token log-probabilities too, but at 0.105 s per
  claim on one core (measured 2026-12-06) against about 0.5 ms here (2,458 claims of the default rehearsal, the
  model's training included, in 1.2 s): about 100 s for a 1,000-claim release and as much again for the pool, so the
  audit uses the n-gram model and names it (``FLUENCY_MODEL``).

Plain functions, no Dagster; rapidfuzz and scipy are imported where they are used.
"""

import hashlib
import math
import re
from collections import Counter

import numpy as np

from assets.rules.length import MEDIA_REF

MIN_MEDIA_CHARS = 8  # a medium's text shorter than this (a frame counter, a lone word) says nothing of the claim
# The media carry the claim's wording when their text matches it this well (partial ratio, 0-100). Measured on the
# default rehearsal (2026-12-06, 4,000 reviews, its OCR cache): of the natural claims whose images have text, 915 of
# 954 match at 90 or more (a caption drawn from the claim's first 40 characters) and the other 39 at 60 or less
# (another claim's picture, Arabic rendered as boxes); video frames 65 of 69 at 85-95 (a frame counter beside the
# words) and 4 below 50. Nothing fell between 60 and 85.
MEDIA_CARRY = 80.0
# A rewrite stays consistent with such media when it matches their text as well as its claim did, within this (a
# rewrite that keeps the shown words verbatim matches exactly as well; one changed digit of a 32-character line
# costs 3 points)
MEDIA_TOLERANCE = 1.0
FLUENCY_ORDER = 5  # characters per n-gram (4 of context)
FLUENCY_PRIOR = 2.0  # each order's estimate leans on the next lower one with this many pseudo-counts
FLUENCY_MODEL = (f"character {FLUENCY_ORDER}-gram language model (interpolated, {FLUENCY_PRIOR:g} pseudo-counts per "
                 "order on the next lower one, uniform at the bottom) trained on the quarter's natural claims, each "
                 "claim scored without its own review group")
# Beside the text's TF-IDF (two L2-normalised blocks, entries of about 0.1) a channel's one-hot bins weigh this much:
# at 1 their columns outweighed the text and the filter's classifier fit their noise (on tests/test_adversarial.py's
# quarter it left out 43 of 100 template rewrites, against 65 with the text alone); at 0.3, 73
CHANNEL_WEIGHT = 0.3
CHANNELS = ("media_text", "image", "fluency")
CHANNEL_FEATURES = {
    "media_text": ("overlap", "prefix", "token_ratio", "text_chars"),
    "image": ("log_area", "aspect", "phash_nearest"),
    "fluency": ("mean_logprob", "worst_word_logprob", "worst_lowercase_word_logprob"),
}


def compact(text: str) -> str:
    """Casefolded, media references, spaces, punctuation and underscores taken out: as the OCR's lines compare."""
    return re.sub(r"[\W_]+", "", MEDIA_REF.sub("", text).casefold())


def media_fit(texts: list[str], claim: str) -> tuple[float, float] | None:
    """(overlap, prefix) of the media's texts (one per image or video frame) with ``claim``: the best partial ratio
    of a text within the claim, and the best ratio of a text against the claim's opening characters (0-100); None
    when no text has MIN_MEDIA_CHARS characters."""
    from rapidfuzz import fuzz

    items = [t for t in (compact(x) for x in texts or []) if len(t) >= MIN_MEDIA_CHARS]
    if not items:
        return None
    c = compact(claim)
    return (max(fuzz.partial_ratio(t, c) for t in items), max(fuzz.ratio(t, c[: len(t)]) for t in items))


def carries_wording(texts: list[str], claim: str) -> bool:
    """Do the media carry the claim's own wording (a screenshot of the post, a caption burned into the picture)?"""
    fit = media_fit(texts, claim)
    return fit is not None and fit[0] >= MEDIA_CARRY


def consistent_with_media(texts: list[str], original: str, rewrite: str) -> bool:
    """A rewrite of a claim whose media carry its wording must match the media's text as well as the claim did, both
    anywhere in it and at its start (within MEDIA_TOLERANCE): the words the picture shows stay, where they were.
    Media without the claim's wording ask nothing."""
    before = media_fit(texts, original)
    if before is None or before[0] < MEDIA_CARRY:
        return True
    after = media_fit(texts, rewrite) or (0.0, 0.0)
    return after[0] >= before[0] - MEDIA_TOLERANCE and after[1] >= before[1] - MEDIA_TOLERANCE


def shown_words(texts: list[str], claim: str, limit: int = 60) -> str:
    """The media's text that carries the claim's wording (for a critique or a prompt), at most ``limit`` characters."""
    from rapidfuzz import fuzz

    c = compact(claim)
    best = max((t for t in texts or [] if len(compact(t)) >= MIN_MEDIA_CHARS),
               key=lambda t: fuzz.partial_ratio(compact(t), c), default="")
    return " ".join(best.split())[:limit]


def media_files(media) -> list[str]:
    """The stored files whose text a claim's media show: each image, each video's key frames."""
    return [p for m in media for p in ([m.path] if m.kind == "image" else m.frame_paths)]


class CachedMediaTexts:
    """``MediaTexts``' answer from stage 5's OCR cache alone, read only (``media_text.CachedText``; a stored file is
    named by its sha256): the texts, or None where any of the claim's files was not read there. No OCR runs."""

    def __init__(self, cache_path):
        from assets.rules.media_text import CachedText

        self._text = CachedText(cache_path)

    def __call__(self, media) -> list[str] | None:
        from pathlib import Path

        texts = [self._text(Path(p).stem) for p in media_files(media)]
        return None if any(t is None for t in texts) else texts

    def close(self) -> None:
        self._text.close()


class MediaTexts:
    """The text in a claim's media as stage 5's OCR read it: one text per image, one per video frame, read through
    ``read_text`` (a ``TextCache``'s: what stage 5 read comes from its cache, anything else is read now) from the files
    ``read_file`` gives. ``None`` for media that cannot be read (counted in ``unread``)."""

    def __init__(self, read_text, read_file, close=None):
        self._read_text, self._read_file, self._close = read_text, read_file, close
        self._seen: dict[str, str] = {}
        self.unread = 0

    def _one(self, path: str) -> str:
        data = self._read_file(path)
        key = hashlib.sha256(data).hexdigest()
        if key not in self._seen:
            self._seen[key] = self._read_text(data)
        return self._seen[key]

    def __call__(self, media) -> list[str] | None:
        try:
            return [self._one(p) for p in media_files(media)]
        except (OSError, ValueError, KeyError):
            self.unread += 1
            return None

    def close(self) -> None:
        if self._close is not None:
            self._close()


def media_texts(llm_cache_path: str, media_store) -> MediaTexts:
    """The ``MediaTexts`` of a quarter: stage 5's OCR cache (``ocr_cache.sqlite`` beside the LLM cache, opened at the
    first medium) over the media store's files (without a store, nothing is read: every medium counts as unread)."""
    from pathlib import Path

    opened = []

    def read_text(data: bytes) -> str:
        if not opened:
            from assets.rules.media_text import TextCache

            opened.append(TextCache(Path(llm_cache_path).with_name("ocr_cache.sqlite")))
        return opened[0].read_text(data)

    def read_file(path: str) -> bytes:
        if media_store is None:
            raise KeyError("no media store")
        return media_store.read(path)

    return MediaTexts(read_text, read_file, lambda: [c.close() for c in opened])


def group_key(original_text: str) -> str:
    """A review group: the claim as its fact-checker worded it (an original, its rewrite and other reviews of it)."""
    return " ".join(original_text.casefold().split())


def merge_groups(rows: list[dict]) -> None:
    """One review group for the rows that share a review (``review``: an original and its rewrite) or a claim as its
    fact-checker worded it (``group``: other reviews of the same claim), in place: ``group`` becomes the group's."""
    parent: dict[str, str] = {}

    def root(k: str) -> str:
        while parent.setdefault(k, k) != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for r in rows:
        keys = [f"g:{r['group']}" if r.get("group") else "", f"r:{r['review']}" if r.get("review") else ""]
        keys = [k for k in keys if k]
        for k in keys[1:]:
            parent[root(k)] = root(keys[0])
    for r in rows:
        key = f"g:{r['group']}" if r.get("group") else f"r:{r['review']}" if r.get("review") else ""
        if key:
            r["group"] = root(key)


def claim_row(claim, media_text=None) -> dict:
    """The channel inputs of one scored claim: text, review and review group, media sizes and hashes, and (with
    ``media_text``, a ``MediaTexts``) the media's texts."""
    row = {"text": claim.text, "group": group_key(claim.original_text or claim.text), "review": claim.review_id,
           "media_info": [{"kind": m.kind, "width": m.width, "height": m.height, "phash": m.phash}
                          for m in claim.media]}
    if media_text is not None:
        row["media_texts"] = media_text(claim.media) if claim.media else []
    return row


class CharLM:
    """A character n-gram language model of ``texts`` whose counts can leave out a group: ``logprobs(text, group)``
    scores a text with every text of ``group`` taken out of the counts (a claim's own review group). Each order's
    estimate is (count + FLUENCY_PRIOR x the next lower order's) / (context count + FLUENCY_PRIOR), from the uniform
    distribution over the characters seen (plus one for the unseen) up to FLUENCY_ORDER characters."""

    def __init__(self, texts: list[str], groups: list[str], order: int = FLUENCY_ORDER, prior: float = FLUENCY_PRIOR):
        self.order, self.prior = order, prior
        self.grams: Counter = Counter()
        self.contexts: Counter = Counter()
        self.by_group: dict[str, tuple[Counter, Counter]] = {}
        for text, group in zip(texts, groups, strict=True):
            grams = self._grams(self._padded(text))
            contexts = Counter(g[:-1] for g in grams)
            self.grams.update(grams)
            self.contexts.update(contexts)
            own = self.by_group.setdefault(group, (Counter(), Counter()))
            own[0].update(grams)
            own[1].update(contexts)
        self.alphabet = len([g for g in self.grams if len(g) == 1]) + 1

    def _padded(self, text: str) -> str:
        return "\x02" * (self.order - 1) + " ".join(MEDIA_REF.sub(" ", text).split()) + "\x03"

    def _grams(self, padded: str) -> list[str]:
        return [padded[i - n + 1: i + 1] for i in range(self.order - 1, len(padded)) for n in range(1, self.order + 1)]

    def logprobs(self, text: str, group: str | None = None) -> tuple[str, np.ndarray]:
        """(the text as scored, log2 p of each of its characters and of its end)."""
        padded = self._padded(text)
        own_grams, own_contexts = self.by_group.get(group, (Counter(), Counter()))
        out = np.empty(len(padded) - self.order + 1)
        for j, i in enumerate(range(self.order - 1, len(padded))):
            p = 1.0 / self.alphabet
            for n in range(1, self.order + 1):
                gram = padded[i - n + 1: i + 1]
                seen = self.contexts.get(gram[:-1], 0) - own_contexts.get(gram[:-1], 0)
                if seen <= 0:
                    break  # a context never seen without the group: longer ones were not either
                p = (self.grams.get(gram, 0) - own_grams.get(gram, 0) + self.prior * p) / (seen + self.prior)
            out[j] = math.log2(p)
        return padded[self.order - 1: -1], out

    def fluency(self, text: str, group: str | None = None) -> tuple[float, float, float]:
        """(mean log2 p per character; the log2 p of its least probable word of two letters or more, summed over its
        characters; the same over its words written in lower case, where a garbled common word stands out from the
        names a claim of its own brings)."""
        scored, lp = self.logprobs(text, group)
        words = [(m.group(), lp[m.start(): m.end()].sum()) for m in re.finditer(r"\w{2,}", scored)]
        worst = min((p for _, p in words), default=float(lp.sum()))
        lower = min((p for w, p in words if w == w.lower()), default=worst)
        return float(lp.mean()), float(worst), float(lower)


def _phash_nearest(rows: list[dict]) -> np.ndarray:
    """Per row, the Hamming distance from its media's 64-bit pHash to the nearest of another group's media (NaN
    without a hash, or with no other)."""
    owner, hashes = [], []
    for i, r in enumerate(rows):
        for m in r.get("media_info") or []:
            if len(m.get("phash") or "") == 16:
                owner.append(i)
                hashes.append(int(m["phash"], 16))
    out = np.full(len(rows), np.nan)
    if len(hashes) < 2:
        return out
    h = np.array(hashes, dtype=np.uint64)
    groups = np.array([rows[i].get("group") or f"#{i}" for i in owner], dtype=object)
    table = np.array([bin(b).count("1") for b in range(256)], dtype=np.uint8)
    best = np.full(len(h), 64)
    for at in range(0, len(h), 256):  # a block of rows at a time: the full matrix of distances needs no memory
        xor = np.bitwise_xor(h[at: at + 256, None], h[None, :])
        dist = table[xor.view(np.uint8)].reshape(xor.shape + (8,)).sum(-1).astype(int)
        dist[groups[at: at + 256, None] == groups[None, :]] = 64
        best[at: at + 256] = dist.min(1)
    for j, i in enumerate(owner):
        out[i] = np.nanmin([out[i], best[j]])
    return out


def channel_features(rows: list[dict], corpus: list[dict]) -> dict[str, np.ndarray | None]:
    """Channel name -> (rows x features) array, NaN where a claim has nothing to read there (no media, no text in
    them); None for a channel the rows do not carry (``media_texts`` is read only where a ``MediaTexts`` was given,
    media sizes only from scored claims). ``corpus``: the natural claims the fluency model is trained on (rows with
    ``text`` and ``group``)."""
    from rapidfuzz import fuzz

    out: dict[str, np.ndarray | None] = {name: None for name in CHANNELS}
    if rows and all("media_texts" in r for r in rows):
        media = np.full((len(rows), 4), np.nan)
        for i, r in enumerate(rows):
            texts = r["media_texts"]
            if not texts:
                continue
            fit = media_fit(texts, r["text"])
            if fit is None:
                continue
            joined = " ".join(t for t in texts if t)
            media[i] = (*fit, fuzz.token_set_ratio(joined, MEDIA_REF.sub(" ", r["text"])),
                        math.log1p(len(compact(joined))))
        out["media_text"] = media
    if rows and all("media_info" in r for r in rows):
        image = np.full((len(rows), 3), np.nan)
        for i, r in enumerate(rows):
            sized = [m for m in r["media_info"] if m.get("width") and m.get("height")]
            if sized:
                image[i, :2] = math.log(sized[0]["width"] * sized[0]["height"]), sized[0]["width"] / sized[0]["height"]
        image[:, 2] = _phash_nearest(rows)
        out["image"] = image
    if rows:
        lm = CharLM([r["text"] for r in corpus], [r.get("group") or f"corpus#{i}" for i, r in enumerate(corpus)])
        out["fluency"] = np.array([lm.fluency(r["text"], r.get("group")) for r in rows])
    return out


def binned(features: np.ndarray, bins: int = 10):
    """A one-hot sparse matrix of each column's quantile bin (over the rows, label-free), a missing value (NaN) a
    column of its own: what a linear classifier reads of a few numbers, step by step and not only along a line."""
    from scipy.sparse import csr_matrix, hstack

    blocks = []
    for col in features.T:
        known = ~np.isnan(col)
        edges = np.unique(np.quantile(col[known], np.linspace(0, 1, bins + 1)[1:-1])) if known.any() else np.array([])
        codes = np.where(known, np.searchsorted(edges, np.nan_to_num(col), side="right"), len(edges) + 1)
        blocks.append(csr_matrix((np.ones(len(col)), (np.arange(len(col)), codes)), shape=(len(col), len(edges) + 2)))
    return hstack(blocks).tocsr() if blocks else None
