"""When two claims are near-duplicates, within a quarter (the release's selection) and across quarters (recurring
claims): their texts (a similar wording of comparable length with the same negation and hedge words) and their media
(perceptual hashes within a distance). Dagster-free."""

import itertools
from functools import lru_cache

import numpy as np
import regex
from rapidfuzz import fuzz, process

from assets.rules.length import MEDIA_REF
from assets.rules.negation import polarity

SCORER = fuzz.token_set_ratio  # the text measure of release.remove_near_duplicates: switch the two together


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


# token_set_ratio also scores a claim and the same claim with one word swapped for another at >= 92 ("a video of a
# million-strong march during the protests" / "a video of riots breaking out during the protests"). A rewording drops
# or adds words, or changes their form; a different claim swaps them. So near-duplicates also need one of the two
# texts to hold no word of SWAP_LETTERS letters or more that the other lacks (a word "lacked" when no word of the
# other comes within SWAP_SIMILARITY by fuzz.ratio; negation and hedge words aside, the polarity guard sees those).
# Measured (issue 48): of the 24 AVeriTeC dev pairs and 5 Arabic ClaimReview pairs the measures call near-duplicates,
# the guard parts exactly one, the Arabic pair above, which tests/fixtures/rules/pairs.jsonl labels two claims.
SWAP_LETTERS = 5
SWAP_SIMILARITY = 75
_SWAP_WORD = regex.compile(r"[\p{L}\p{M}][\p{L}\p{M}'\u2019]*")


@lru_cache(maxsize=1 << 16)
def _swap_words(text: str) -> frozenset[str]:
    words = {w.casefold().strip("'\u2019") for w in _SWAP_WORD.findall(text)}
    return frozenset(w for w in words if len(w) >= SWAP_LETTERS and not polarity(w))


def _lacks(mine: frozenset[str], theirs: frozenset[str]) -> bool:
    return any(all(fuzz.ratio(w, x) < SWAP_SIMILARITY for x in theirs) for w in mine)


def swapped_words(a: str, b: str) -> bool:
    """Each of two compared texts holds a word the other lacks (SWAP_LETTERS, SWAP_SIMILARITY): one claim with a
    word swapped, not a rewording of it."""
    wa, wb = _swap_words(a), _swap_words(b)
    return _lacks(wa, wb) and _lacks(wb, wa)


def near_duplicate(a: str, b: str, similarity: float) -> bool:
    """Two compared texts are near-duplicates: SCORER reaches ``similarity``, their lengths are comparable, they
    hold the same negation and hedge words and no word of one is swapped for another (swapped_words)."""
    return (bool(comparable_lengths(compared_length(a), compared_length(b))) and polarity(a) == polarity(b)
            and SCORER(a, b, score_cutoff=similarity) >= similarity and not swapped_words(a, b))


def first_near_duplicate(text: str, others: list[str], similarity: float, sizes=None, signs=None,
                         skip=()) -> int | None:
    """The index of the best-scoring text of ``others`` (the first of equals) that ``text`` nearly duplicates
    (near_duplicate), none at the indices in ``skip``. ``sizes`` and ``signs``: the others' ``compared_length`` and
    ``polarity_id``
    (arrays), where the caller keeps them (the in-quarter removal compares each claim with every kept one: 1.6 s
    for 1,677 claims when each comparison worked them out again)."""
    if not others:
        return None
    sizes = np.fromiter(map(compared_length, others), float, len(others)) if sizes is None else sizes[:len(others)]
    signs = np.fromiter(map(polarity_id, others), int, len(others)) if signs is None else signs[:len(others)]
    candidates = comparable_lengths(compared_length(text), sizes) & (signs == polarity_id(text))
    candidates[list(skip)] = False
    keep = np.flatnonzero(candidates)
    found = process.extract(text, [others[i] for i in keep], scorer=SCORER, score_cutoff=similarity, limit=None)
    for _, _, k in sorted(found, key=lambda m: (-m[1], m[2])):  # the best score first, the first of equals
        if not swapped_words(text, others[keep[k]]):
            return int(keep[k])
    return None


def repeats_media(media: list, shown) -> bool:
    """The media rule of every near-duplicate match, within a quarter and across quarters: a claim repeats earlier
    claims by its media when it has media and every one of them was shown before (``shown(medium)``: the same file,
    or a perceptual hash within the distance, in any of those claims). A claim that adds one new medium is new."""
    return bool(media) and all(shown(m) for m in media)


def compared_text(text: str) -> str:
    """A claim's text as near-duplicate checks compare it: without <image:N>/<video:N>, casefolded."""
    return MEDIA_REF.sub("", text).casefold()


def hash_words(hexes: list[str]) -> np.ndarray:
    width = len(hexes[0])
    if width == 0 or width % 16 or any(len(h) != width for h in hexes):
        raise ValueError("phashes must be non-empty hex strings of one common length (multiple of 16)")
    words = width // 16
    return np.array([[int(h[i * 16 : (i + 1) * 16], 16) for i in range(words)] for h in hexes], dtype=np.uint64)


def near_duplicate_groups(items: list[tuple[str, str]], max_distance: int = 6) -> list[list[str]]:
    """Partition ids into single-link groups of phashes within max_distance (singletons included),
    groups and members in input order; filter len(group) > 1 for the actual duplicates."""
    if not items:
        return []
    ids = [i for i, _ in items]
    words = hash_words([h.lower() for _, h in items])
    parent = list(range(len(ids)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for i in range(len(ids) - 1):
        # Vectorised Hamming distance of item i against all later items.
        dist = np.bitwise_count(words[i + 1 :] ^ words[i]).sum(axis=1)
        for j in np.nonzero(dist <= max_distance)[0]:
            ri, rj = find(i), find(i + 1 + int(j))
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[str]] = {}
    for idx, id_ in enumerate(ids):
        groups.setdefault(find(idx), []).append(id_)
    return list(groups.values())
