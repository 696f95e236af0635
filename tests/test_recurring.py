"""Claims that recur across quarters: text and media matches against earlier releases, the earliest quarter winning,
fingerprints of older releases (phash computed from images/), the manifest's recurring marks, the config option,
and the bounded text matching giving what scoring every pair gives."""

import io
import json
import random
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rapidfuzz import fuzz, process

from assets.release.recurring import (
    _text_matches,
    _Texts,
    earlier_quarters,
    match_recurring,
    recurring_ids,
    release_fingerprints,
    token_set,
)
from assets.rules.near_duplicates import (
    comparable_lengths,
    compared_length,
    compared_text,
    first_near_duplicate,
    near_duplicate,
)
from assets.rules.negation import polarity
from dagster_project.resources.media import image_phash, phash_distance
from dagster_project.stage_settings import ReleaseSettings
from schemas.records import Integrity, Medium, ScoredClaim

FIXTURES = Path(__file__).parent / "fixtures"
SIMILARITY, DISTANCE = 92.0, 6  # the release's defaults (text_duplicate_similarity, near_duplicate_distance)


def fixture_claim(start: str) -> str:
    """A real claim text of the AVeriTeC excerpt."""
    claims = json.loads((FIXTURES / "averitec_dev_excerpt.json").read_text())
    return next(c["claim"] for c in claims if c["claim"].startswith(start))


CONNERY = fixture_claim("In a letter to Steve Jobs, Sean Connery")
IVERMECTIN = fixture_claim("Ivermectin is a treatment")
MASKS = fixture_claim("Wearing face masks")
BARRETT = fixture_claim("Amy Coney Barrett")


def picture(seed: int, size=(320, 240), quality: int = 90) -> bytes:
    """A JPEG of coarse random blocks (a photo-like low-frequency structure), resized and encoded as asked."""
    blocks = np.random.default_rng(seed).integers(0, 256, (6, 8, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(blocks).resize((320, 240), Image.BILINEAR).resize(size, Image.LANCZOS).save(
        out, "JPEG", quality=quality)
    return out.getvalue()


def scored(cid: str, text: str, phashes=()) -> ScoredClaim:
    media = [Medium(medium_id=f"{cid}-{i}", kind="image", path=f"{cid}-{i}.jpg", phash=h) for i, h in enumerate(phashes)]
    return ScoredClaim(claim_id=cid, review_id=cid, quarter="2025Q3", text=text, original_text=text,
                       normalization="original", review_url=f"https://example.org/{cid}", media=media,
                       integrity=Integrity(score=-1.0, decisive_property="veracity", label="compromised"))


def published(folder: Path, claims: list[tuple[int, str, list]], manifest: dict | None = None,
              images: dict[int, bytes] | None = None) -> Path:
    """A release folder as published: claims.json (media as (type, id)), manifest.json, images/<id>.jpg."""
    (folder / "images").mkdir(parents=True)
    (folder / "claims.json").write_text(json.dumps({"claims": [
        {"id": cid, "text": text, "media": [{"type": t, "id": mid, "file_path": f"images/{mid}.jpg"} for t, mid in media]}
        for cid, text, media in claims]}))
    if manifest is not None:
        (folder / "manifest.json").write_text(json.dumps(manifest))
    for mid, data in (images or {}).items():
        (folder / "images" / f"{mid}.jpg").write_bytes(data)
    return folder


def test_text_recurs_across_quarters(tmp_path):
    earlier = published(tmp_path / "2024Q4", [(1, IVERMECTIN, []), (2, f"{CONNERY} <image:5>", [("image", 5)]),
                                              (3, MASKS, [])], {"media_phash": {"5": "0123456789abcdef"}})
    prints = release_fingerprints(earlier)
    assert prints[1] == {"id": 2, "text": CONNERY.casefold() + " ", "phashes": ["0123456789abcdef"]}
    reworded = CONNERY.replace("appear in", "star in")  # the same claim, debunked again in other words
    claims = [scored("again", f"<image:0> {reworded}"), scored("new", BARRETT)]
    assert match_recurring(claims, {"2024Q4": prints}, SIMILARITY, DISTANCE) == {
        "again": {"quarter": "2024Q4", "id": 2, "by": "text"}}
    assert match_recurring(claims, {"2024Q4": prints}, 100.0, DISTANCE) == {}  # reworded: not the same string


def test_media_recur_by_phash_of_a_reencoded_image(tmp_path):
    photo, other = picture(7), picture(8)
    smaller = picture(7, size=(200, 150), quality=55)  # the photo shared again, resized and re-encoded
    assert smaller != photo and phash_distance(image_phash(smaller), image_phash(photo)) <= DISTANCE
    assert phash_distance(image_phash(other), image_phash(photo)) > DISTANCE
    # An older release: no media_phash in the manifest, so the phash comes from images/4.jpg.
    earlier = published(tmp_path / "2023Q1", [(1, IVERMECTIN, [("image", 4)])], {}, {4: photo})
    claims = [scored("same-photo", BARRETT, [image_phash(smaller)]),
              scored("other-photo", MASKS, [image_phash(other)])]
    earlier_prints = {"2023Q1": release_fingerprints(earlier)}
    assert match_recurring(claims, earlier_prints, SIMILARITY, DISTANCE) == {
        "same-photo": {"quarter": "2023Q1", "id": 1, "by": "media"}}
    assert match_recurring(claims, earlier_prints, SIMILARITY, -1) == {}  # a negative distance: no media check


def test_one_media_rule_within_a_quarter_and_across_quarters():
    """Issue 36: a claim repeats by its media when every one of its media was shown before, in a quarter
    (release.remove_near_duplicates) as across quarters (match_recurring); one shared medium is not enough."""
    from assets.selection.release_selection import remove_near_duplicates

    old, new, third = (image_phash(picture(seed)) for seed in (21, 22, 23))
    assert min(phash_distance(a, b) for a, b in ((old, new), (old, third), (new, third))) > DISTANCE
    earlier = [scored("e1", IVERMECTIN, [old]), scored("e2", MASKS, [third])]
    claims = [scored("adds-one", CONNERY, [old, new]),  # one medium shown before, one new: a new claim
              scored("all-shown", BARRETT, [third, old])]  # both shown before, by two earlier claims
    prints = [{"id": i, "text": compared_text(c.text), "phashes": [m.phash for m in c.media]}
              for i, c in enumerate(earlier, 1)]
    across = match_recurring(claims, {"2024Q4": prints}, SIMILARITY, DISTANCE)
    kept, _ = remove_near_duplicates(earlier + claims, SIMILARITY, DISTANCE)
    within = {c.claim_id for c in earlier + claims} - {c.claim_id for c in kept}
    assert set(across) == within == {"all-shown"}
    assert across["all-shown"]["by"] == "media" and across["all-shown"]["id"] in (1, 2)


def test_the_earliest_earlier_quarter_wins():
    h = image_phash(picture(3))
    earlier = {  # given newest first: the order of the mapping does not matter
        "2025Q1": [{"id": 9, "text": CONNERY.casefold(), "phashes": []}],
        "2024Q2": [{"id": 4, "text": IVERMECTIN.casefold(), "phashes": []},
                   {"id": 5, "text": CONNERY.casefold(), "phashes": []}],
        "2020Q2": [{"id": 1, "text": MASKS.casefold(), "phashes": [h]}],
    }
    claims = [scored("connery", CONNERY), scored("masks-photo", BARRETT, [h])]
    assert match_recurring(claims, earlier, SIMILARITY, DISTANCE) == {
        "connery": {"quarter": "2024Q2", "id": 5, "by": "text"},
        "masks-photo": {"quarter": "2020Q2", "id": 1, "by": "media"}}


def test_fingerprints_take_the_manifest_phash_else_compute_it(tmp_path):
    photo = picture(11)
    folder = published(tmp_path / "rel", [(1, "A <image:1> and <image:2> MATCH <video:3> <video:4>",
                                           [("image", 1), ("image", 2), ("video", 3), ("video", 4)]),
                                          (2, "Shares <image:2>", [("image", 2)])],
                       {"media_phash": {"1": "ffff0000ffff0000", "4": "00000000ffffffff"}}, {1: photo, 2: photo})
    prints = release_fingerprints(folder)
    # image 1: the manifest's (not recomputed from the file); image 2: computed; video 3: none known, skipped
    assert prints[0]["phashes"] == ["ffff0000ffff0000", image_phash(photo), "00000000ffffffff"]
    assert prints[0]["text"] == "a  and  match  " and prints[1]["phashes"] == [image_phash(photo)]


def test_recurring_ids_read_the_manifest(tmp_path):
    marks = {"mode": "flag", "count": 2, "share": 0.5, "dropped": 0, "earlier_quarters": ["2024Q4"], "claims": {
        "3": {"quarter": "2024Q4", "id": 17, "by": "text"}, "1": {"quarter": "2024Q4", "id": 2, "by": "media"}}}
    marked = published(tmp_path / "new", [], {"quarter": "2025Q1", "recurring": marks})
    assert recurring_ids(marked) == {3: {"quarter": "2024Q4", "id": 17, "by": "text"},
                                     1: {"quarter": "2024Q4", "id": 2, "by": "media"}}
    assert recurring_ids(published(tmp_path / "old", [], {"quarter": "2024Q4"})) == {}
    assert recurring_ids(published(tmp_path / "bare", [])) == {} and recurring_ids(None) == {}


def test_earlier_quarters_and_the_option():
    assert earlier_quarters("2025Q3", ["2025Q4", "2023Q1", "2025Q3", "2025Q2", "2024-10"]) == ["2023Q1", "2024Q4", "2025Q2"]
    assert earlier_quarters("2016Q1", ["2016Q1", "2016Q2"]) == []
    assert ReleaseSettings().recurring == "flag" and ReleaseSettings(recurring="drop").recurring == "drop"
    with pytest.raises(ValueError, match="recurring"):
        ReleaseSettings(recurring="skip")


def test_tokens_are_those_of_rapidfuzz():
    """The bound needs rapidfuzz's token sets: NEL and NBSP split only a text stored wider than one byte a character."""
    for code in range(0x3100):  # every whitespace character lies below U+3100
        if 0xD800 <= code <= 0xDFFF:
            continue
        for wide in ("", "\u0100 "):
            a, b = f"{wide}ab{chr(code)}cd", f"{wide}cd ab"
            assert (fuzz.token_set_ratio(a, b) == 100) == (token_set(a) == token_set(b)), (hex(code), wide)


def test_bounded_text_matching_equals_scoring_every_pair():
    rng = random.Random(3)
    real = [c["claim"].casefold() for c in json.loads((FIXTURES / "averitec_dev_excerpt.json").read_text())]
    alphabet = "ab cd\xa0\x85\u2003\tefé中.,"
    choices = real + ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 25))) for _ in range(40)]
    queries = [" ".join(w if rng.random() > 0.15 else rng.choice(alphabet) for w in c.split()) for c in choices]
    comparable = np.array([[comparable_lengths(compared_length(q), compared_length(c)) and polarity(q) == polarity(c)
                            for c in choices] for q in queries])
    for similarity in (60.0, 80.0, 92.0, 100.0):
        scores = process.cdist(queries, choices, scorer=fuzz.token_set_ratio, score_cutoff=similarity, dtype=np.float64)
        scores[~comparable] = 0  # the length and negation guards of every near-duplicate match (issues 25, 34)
        best = scores.argmax(axis=1)
        every_pair = {i: int(best[i]) for i in range(len(queries)) if scores[i, best[i]] >= similarity}
        vocab = {}
        assert _text_matches(_Texts(queries, vocab), list(range(len(queries))), _Texts(choices, vocab),
                             similarity) == every_pair


def averitec_dev(index: int) -> str:
    """A real claim of the AVeriTeC dev set (tests/fixtures/averitec_dev.json.gz), by its index."""
    import gzip

    with gzip.open(FIXTURES / "averitec_dev.json.gz", "rt", encoding="utf-8") as f:
        return json.load(f)[index]["claim"]


@pytest.mark.parametrize("index, changed", [
    (405, ("Tweet shows", "Tweet does not show")),  # token_set_ratio 97.6
    (19, ("Video shows", "Video may show")),  # a hedge: 94.6
])
def test_a_claim_and_its_negation_are_not_near_duplicates(tmp_path, index, changed):
    """Issue 34: token_set_ratio scores a real claim and its negation (or hedged form) above the similarity, so the
    release removed one as a duplicate, and a later quarter's negation was marked recurring."""
    from assets.selection.release_selection import remove_near_duplicates

    claim = averitec_dev(index)
    negated = claim.replace(*changed)
    a, b = compared_text(claim), compared_text(negated)
    assert fuzz.token_set_ratio(a, b) >= SIMILARITY and comparable_lengths(compared_length(a), compared_length(b))
    assert not near_duplicate(a, b, SIMILARITY) and first_near_duplicate(b, [a], SIMILARITY) is None
    kept, dropped = remove_near_duplicates([scored("a", claim), scored("b", negated)], SIMILARITY)
    assert dropped == 0 and len(kept) == 2
    assert match_recurring([scored("b", negated)], {"2025Q2": [{"id": 1, "text": a, "phashes": []}]},
                           SIMILARITY, -1) == {}
    # the claim itself, reposted, still recurs
    assert match_recurring([scored("c", claim)], {"2025Q2": [{"id": 1, "text": a, "phashes": []}]},
                           SIMILARITY, -1) == {"c": {"quarter": "2025Q2", "id": 1, "by": "text"}}
