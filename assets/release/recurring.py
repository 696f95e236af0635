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
import json
import re
from pathlib import Path

import numpy as np
from rapidfuzz import fuzz, process

from assets.rules.near_duplicates import (
    SCORER,
    comparable_lengths,
    compared_length,
    compared_text,
    hash_words,
    polarity_id,
    repeats_media,
    swapped_words,
)
from dagster_project.core.quarters import to_label
from dagster_project.resources.media import image_phash
from schemas.records import ScoredClaim

CHUNK = 1024  # current phashes compared at once (a chunk x earlier phashes x words array of uint64)
LATIN1_SPLIT = re.compile(r"[^\S\x85\xa0]+")  # whitespace but NEL and NBSP
BINS = 64  # character count bins of the bound (code point mod BINS): fewer bins, a cheaper and looser bound


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
        for k, j in np.argwhere(scores >= similarity):  # a word swapped is another claim (near_duplicate's guard)
            if swapped_words(texts[k], theirs.texts[j]):
                scores[k, j] = 0
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
        if score >= similarity and score > found.get(k, (-1.0, 0))[0] and not swapped_words(texts[k], theirs.texts[j]):
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
