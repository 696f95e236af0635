"""Claims that recur across quarters: a claim of this quarter whose text or media repeat a claim of an earlier release.

Plain functions. The measures and the rule are those of the in-quarter near-duplicate removal
(``release.remove_near_duplicates``): ``SCORER`` over the texts without media references, casefolded, and the Hamming
distance of perceptual hashes of the same hex width; by media, a claim repeats when every one of its media was shown
before (``repeats_media``). An earlier release is read from its published folder (claims.json, manifest.json, images/).

Scoring every pair costs ~10 us (3,000 claims against 8,000 earlier ones: minutes), so with token_set_ratio the
pairs are first bounded from above, exactly, and only those whose bound reaches the similarity are scored. With
A, B the sorted token sets joined by spaces and S the intersection joined, token_set_ratio is the largest of
2|S| / (|A| + |S|), 2|S| / (|B| + |S|) and 1 - indel(A - S, B - S) / (|A| + |B|); the indel distance is at least the
L1 distance of the character counts of A and B (the shared tokens cancel), and more so of counts folded into bins.
"""

import hashlib
import itertools
import json
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
from rapidfuzz import fuzz, process

from assets.claims.negation import polarity
from assets.claims.normalized_claims import MEDIA_REF
from dagster_project.quarters import to_label
from dagster_project.resources.media import hash_words, image_phash
from schemas.records import ScoredClaim

SCORER = fuzz.token_set_ratio  # the text measure of release.remove_near_duplicates: switch the two together
CHUNK = 1024  # current phashes compared at once (a chunk x earlier phashes x words array of uint64)
LATIN1_SPLIT = re.compile(r"[^\S\x85\xa0]+")  # whitespace but NEL and NBSP
BINS = 64  # character count bins of the bound (code point mod BINS): fewer bins, a cheaper and looser bound


# token_set_ratio scores 100 when one text's words are a subset of the other's, so a claim and a longer claim that
# says more ("The Radio Act in Canada makes it a crime to lie ..." in "Fox News is unavailable in Canada because the
# Radio Act makes it a crime to lie ...") would be one. Near-duplicates also need the shorter compared text to be at
# least this share of the longer, in characters (whitespace runs as one). In the real pairs that token_set_ratio
# scores >= 92 in AVeriTeC dev (27) and the Arabic ClaimReview sample (16), every pair with a share of 0.85 or more is
# a rewording or a repost (punctuation, diacritics, "we" for "Nigeria", "at the time of independence"), every pair
# under 0.77 adds to the claim (a cause, a date, an occasion, a clause: 0.39-0.76), and none lies between.
MIN_LENGTH_SHARE = 0.8


@lru_cache(maxsize=1 << 16)  # the in-quarter removal compares each text with every kept one
def compared_length(text: str) -> int:
    return len(" ".join(text.split()))


def comparable_lengths(a, b):
    """Whether compared texts of ``a`` and ``b`` characters (``compared_length``; numbers or arrays, pair by pair)
    can be near-duplicates: the guard of every text match (release.remove_near_duplicates and match_recurring)."""
    return np.minimum(a, b) >= MIN_LENGTH_SHARE * np.maximum(a, b)


# token_set_ratio scores "Video shows X" against "Video does not show X" at 100 (the words of one are in the other):
# a claim and its negation, or its hedged form, would be one. Near-duplicates also hold the same negation and hedge
# words (negation.polarity), as they have comparable lengths.
_POLARITY_IDS: dict[frozenset, int] = {}
_NEXT_ID = itertools.count()  # next() is atomic: two sets never share a number


def polarity_id(text: str) -> int:
    """A number per distinct set of negation and hedge words (negation.polarity): equal numbers, equal sets."""
    words = polarity(text)
    return _POLARITY_IDS[words] if words in _POLARITY_IDS else _POLARITY_IDS.setdefault(words, next(_NEXT_ID))


def near_duplicate(a: str, b: str, similarity: float) -> bool:
    """Two compared texts are near-duplicates: SCORER reaches ``similarity``, their lengths are comparable and they
    hold the same negation and hedge words."""
    return (bool(comparable_lengths(compared_length(a), compared_length(b))) and polarity(a) == polarity(b)
            and SCORER(a, b, score_cutoff=similarity) >= similarity)


def first_near_duplicate(text: str, others: list[str], similarity: float, sizes=None, signs=None,
                         skip=()) -> int | None:
    """The index of the best-scoring text of ``others`` (the first of equals) that ``text`` nearly duplicates, none
    at the indices in ``skip``. ``sizes`` and ``signs``: the others' ``compared_length`` and ``polarity_id``
    (arrays), where the caller keeps them (the in-quarter removal compares each claim with every kept one: 1.6 s
    for 1,677 claims when each comparison worked them out again)."""
    if not others:
        return None
    sizes = np.fromiter(map(compared_length, others), float, len(others)) if sizes is None else sizes[:len(others)]
    signs = np.fromiter(map(polarity_id, others), int, len(others)) if signs is None else signs[:len(others)]
    candidates = comparable_lengths(compared_length(text), sizes) & (signs == polarity_id(text))
    candidates[list(skip)] = False
    keep = np.flatnonzero(candidates)
    best = process.extractOne(text, [others[i] for i in keep], scorer=SCORER, score_cutoff=similarity)
    return None if best is None else int(keep[best[2]])


def repeats_media(media: list, shown) -> bool:
    """The media rule of every near-duplicate match, within a quarter and across quarters: a claim repeats earlier
    claims by its media when it has media and every one of them was shown before (``shown(medium)``: the same file,
    or a perceptual hash within the distance, in any of those claims). A claim that adds one new medium is new."""
    return bool(media) and all(shown(m) for m in media)


def compared_text(text: str) -> str:
    """A claim's text as near-duplicate checks compare it: without <image:N>/<video:N>, casefolded."""
    return MEDIA_REF.sub("", text).casefold()


def _manifest(folder: Path | None) -> dict:
    path = Path(folder) / "manifest.json" if folder is not None else None
    return json.loads(path.read_text()) if path is not None and path.is_file() else {}


def release_content_id(folder: Path) -> str:
    """What a published release holds, as one id: a hash of its files' hashes (the manifest's ``files``, every file
    but the manifest itself, which names the run). Equal content, equal id: the release's Dagster data version, and
    how a later release names the earlier ones it read."""
    files = _manifest(folder).get("files") or {}
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]


def earlier_releases(previous: tuple[str, str] | None, folder_of) -> dict[str, Path]:
    """Quarter -> folder of every earlier release a quarter's release reads: ``previous`` (the quarter before and the
    version of its release that Dagster recorded, None when it has none), and the versions that release read
    itself (its manifest's ``inputs.releases``), so that the whole chain is the one the previous release was built
    on, whatever the store holds now. ``folder_of(quarter, version)`` gives a version's folder."""
    if previous is None:
        return {}
    quarter, version = previous
    folder = folder_of(quarter, version)
    if not (Path(folder) / "claims.json").is_file():
        raise FileNotFoundError(f"the release of {quarter} that Dagster recorded ({version}) is not in the store: "
                                f"materialize release for {quarter} again")
    chain = {**((_manifest(folder).get("inputs") or {}).get("releases") or {}), quarter: version}
    return {q: Path(folder_of(q, v)) for q, v in sorted(chain.items(), key=lambda kv: to_label(kv[0]))}


def release_fingerprints(folder: Path) -> list[dict]:
    """``{"id", "text", "phashes"}`` per claim of a published release: the compared text, and each medium's phash
    from the manifest's ``media_phash`` or, for an image an older manifest lacks, computed from images/<id>.jpg
    (a video without one is skipped)."""
    folder = Path(folder)
    known = _manifest(folder).get("media_phash") or {}
    hashes: dict[int, str] = {}

    def phash(medium: dict) -> str:
        mid = int(medium["id"])
        if mid not in hashes:
            path = folder / "images" / f"{mid}.jpg"
            hashes[mid] = known.get(str(mid)) or (
                image_phash(path.read_bytes()) if medium.get("type") == "image" and path.is_file() else "")
        return hashes[mid]

    claims = json.loads((folder / "claims.json").read_text())["claims"]
    return [{"id": int(c["id"]), "text": compared_text(c["text"]),
             "phashes": [h for m in c.get("media") or [] if (h := phash(m))]} for c in claims]


def token_set(text: str) -> set[str]:
    """The tokens rapidfuzz splits a text into: at whitespace, except that in a text of code points up to U+00FF
    (stored one byte a character) NEL (U+0085) and NBSP (U+00A0) do not split."""
    return set(text.split() if text and max(text) > "\xff" else LATIN1_SPLIT.split(text)) - {""}


class _Texts:
    """Compared texts with what the token_set_ratio bound needs: |A| (the token set joined), A's character counts
    in BINS bins, and the tokens as a sparse row of len + 1 per token (indices of ``vocab``, which grows)."""

    def __init__(self, texts: list[str], vocab: dict[str, int]):
        self.texts, self.vocab = texts, vocab
        self.lengths, self.counts = np.zeros(len(texts)), np.zeros((len(texts), BINS))
        self.sizes = np.zeros(len(texts))  # the texts' lengths as the near-duplicate guard measures them
        self.signs = np.fromiter(map(polarity_id, texts), int, len(texts))  # their negation and hedge words
        indices, weights, indptr = [], [], [0]
        for i, text in enumerate(texts):
            tokens = token_set(text)
            joined = " ".join(tokens)
            self.lengths[i] = len(joined)
            self.counts[i] = np.bincount(np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32) % BINS,
                                         minlength=BINS)
            indices += [vocab.setdefault(t, len(vocab)) for t in tokens]
            self.sizes[i] = compared_length(text)
            weights += [len(t) + 1 for t in tokens]
            indptr.append(len(indices))
        self._parts = (np.array(weights, dtype=np.float64), np.array(indices, dtype=np.int64), np.array(indptr))

    def tokens(self):
        """A ``scipy.sparse.csr_matrix`` (scipy is imported where a release matches, not with the code location)."""
        from scipy.sparse import csr_matrix

        return csr_matrix(self._parts, shape=(len(self.texts), len(self.vocab)))


def _text_matches(mine: _Texts, rows: list[int], theirs: _Texts, similarity: float) -> dict[int, int]:
    """Row of ``mine`` -> index of the best-scoring text of ``theirs`` (the first of equals) reaching ``similarity``,
    among those of comparable length (``comparable_lengths``) with the same negation and hedge words."""
    texts = [mine.texts[i] for i in rows]
    comparable = comparable_lengths(mine.sizes[rows, None], theirs.sizes[None, :]) & (
        mine.signs[rows, None] == theirs.signs[None, :])
    if SCORER is not fuzz.token_set_ratio:  # no bound known for another scorer: score every pair
        scores = process.cdist(texts, theirs.texts, scorer=SCORER, score_cutoff=similarity, dtype=np.float64, workers=-1)
        scores[~comparable] = 0
        best = scores.argmax(axis=1)
        return {rows[k]: int(best[k]) for k in np.nonzero(scores[np.arange(len(rows)), best] >= similarity)[0]}
    from scipy.spatial.distance import cdist

    t = similarity / 100 - 1e-9  # the bound reaches t: 2|S| / (min(|A|, |B|) + |S|) >= t, or L1 <= (1 - t)(|A| + |B|)
    shared = (mine.tokens()[rows] @ theirs.tokens().sign().T).toarray() - 1  # |S| where a token is shared
    la, lb, ca = mine.lengths[rows, None], theirs.lengths[None, :], mine.counts[rows]
    used = ca.any(axis=0) | theirs.counts.any(axis=0)  # bins empty on both sides add nothing to the L1 distance
    close = comparable & ((shared >= t / (2 - t) * np.minimum(la, lb)) | (
        cdist(ca[:, used], theirs.counts[:, used], "cityblock") <= (1 - t) * (la + lb)))
    found: dict[int, tuple[float, int]] = {}
    for k, j in np.argwhere(close):  # row-major: the first of equals stays
        score = SCORER(texts[k], theirs.texts[j], score_cutoff=similarity)
        if score >= similarity and score > found.get(k, (-1.0, 0))[0]:
            found[k] = (score, int(j))
    return {rows[k]: j for k, (_, j) in found.items()}


def _closest_media(mine: list[tuple[int, str]], prints: list[dict], max_distance: int) -> dict[int, tuple[int, int]]:
    """Key -> (distance, fingerprint index) of the closest earlier medium within ``max_distance``; ``mine`` holds
    (key, phash) pairs, the key a claim's medium. Only hashes of one hex width are compared."""
    theirs = [(j, h) for j, p in enumerate(prints) for h in p["phashes"]]
    best: dict[int, tuple[int, int]] = {}
    for width in {len(h) for _, h in mine}:
        a_rows = [(i, h) for i, h in mine if len(h) == width]
        b_rows = [(j, h) for j, h in theirs if len(h) == width]
        if not b_rows:
            continue
        pad = 16 * -(-width // 16)  # whole 64-bit words; leading zeros change no distance
        a = hash_words([h.zfill(pad) for _, h in a_rows])
        b = hash_words([h.zfill(pad) for _, h in b_rows])
        owners = np.array([j for j, _ in b_rows])
        for start in range(0, len(a), CHUNK):
            dist = np.bitwise_count(a[start:start + CHUNK, None, :] ^ b[None, :, :]).sum(axis=2, dtype=np.uint16)
            col = dist.argmin(axis=1)
            low = dist[np.arange(len(col)), col]
            for r in np.nonzero(low <= max_distance)[0]:
                i, found = a_rows[start + r][0], (int(low[r]), int(owners[col[r]]))
                best[i] = min(best.get(i, found), found)
    return best


def match_recurring(claims: list[ScoredClaim], earlier: dict[str, list[dict]], similarity: float,
                    phash_max_distance: int) -> dict[str, dict]:
    """Claim id -> ``{"quarter", "id", "by"}`` of the earliest earlier quarter holding a match: text scoring at least
    ``similarity`` (the best-scoring one; "by": "text"), else media: every medium of this claim has a phash within
    ``phash_max_distance`` of a medium of that release (``repeats_media``; "id": the claim of the closest one;
    "by": "media"; off when negative).
    ``earlier``: quarter -> ``release_fingerprints`` of its release."""
    vocab: dict[str, int] = {}
    mine = _Texts([compared_text(c.text) for c in claims], vocab)
    found: dict[str, dict] = {}
    for quarter in sorted(earlier, key=to_label):
        prints = earlier[quarter]
        rest = [i for i, c in enumerate(claims) if c.claim_id not in found]
        if not prints or not rest:
            continue
        for i, j in _text_matches(mine, rest, _Texts([p["text"] for p in prints], vocab), similarity).items():
            found[claims[i].claim_id] = {"quarter": quarter, "id": prints[j]["id"], "by": "text"}
        if phash_max_distance < 0:
            continue
        left = [i for i in rest if claims[i].claim_id not in found]
        hashes = [((i, k), m.phash) for i in left for k, m in enumerate(claims[i].media) if m.phash]
        closest = _closest_media(hashes, prints, phash_max_distance)  # (claim, medium) -> (distance, print)
        for i in left:
            media = range(len(claims[i].media))
            if repeats_media(media, lambda k, i=i: (i, k) in closest):
                _, j = min(closest[(i, k)] for k in media)
                found[claims[i].claim_id] = {"quarter": quarter, "id": prints[j]["id"], "by": "media"}
    return found


def recurring_ids(folder: Path | None) -> dict[int, dict]:
    """Release claim id -> its earlier match, for the claims a published release marks recurring (manifest key
    ``recurring``); {} for a release without the mark (older ones) or no release."""
    claims = (_manifest(folder).get("recurring") or {}).get("claims") or {}
    return {int(cid): match for cid, match in claims.items()}


def earlier_quarters(quarter: str, available: list[str]) -> list[str]:
    """The quarters of ``available`` strictly before ``quarter``, oldest first (as labels)."""
    current = to_label(quarter)
    return sorted(q for q in map(to_label, available) if q < current)
