"""Release selection (balance, Unknown share, pairs, media preference) and the VeriTaS-format check."""

import io
import json
from datetime import date

import pytest
from PIL import Image

from assets.release.numbering import to_release_claims
from assets.release.validation import validate_release
from assets.release.writing import write_release
from assets.rules.bins import bin3
from assets.selection.release_selection import select_release
from dagster_project.resources.media import MediaStore
from schemas.records import Integrity, Medium, PropertyVerdict, ScoredClaim

ORDER_KEY = bytes(range(32))  # the tests' own release order key (a release reads its key from the store)


def jpeg(color) -> bytes:
    buf = io.BytesIO()
    img = Image.new("RGB", (320, 240), color)
    for x in range(0, 320, 16):  # some structure, so perceptual hashes differ between colours
        for y in range(0, 240, 16):
            if (x // 16 + y // 16 + sum(color)) % 3 == 0:
                img.putpixel((x, y), (255 - color[0], 255 - color[1], 255 - color[2]))
    img.save(buf, "JPEG", quality=90)
    return buf.getvalue()


def claim(cid, score, text, media=(), variant="original", variant_of="", language="en"):
    decisive = "veracity"
    verdicts = []
    for i, _ in enumerate(media):
        verdicts += [PropertyVerdict(property="authenticity", medium_index=i, score=0.6667, n_ratings=3, spread=0.5),
                     PropertyVerdict(property="contextualization", medium_index=i, score=max(score, 0.5), n_ratings=3, spread=0.3)]
    return ScoredClaim(
        claim_id=cid, review_id=f"r-{cid.split('-')[0]}", quarter="2020Q2", text=text, original_text=text,
        normalization="llm", language=language, claim_date=date(2020, 5, 1), review_url=f"https://fullfact.org/{cid}",
        media=list(media), media_verdicts=verdicts,
        veracity=PropertyVerdict(property="veracity", score=score, n_ratings=3, spread=0.4, justification=f"why {cid}"),
        integrity=Integrity(score=score, decisive_property=decisive, label=bin3(score)),
        variant=variant, variant_of=variant_of,
    )


TOPICS = ["5G masts spread the virus", "Bill Gates wants to chip everyone", "hot steam cures the disease",
          "a Nobel laureate said the virus is man-made", "aspirin cures the infection", "Wuhan lab leaked a weapon",
          "vitamin C megadoses stop infection", "hydroxychloroquine cured a whole village", "garlic water kills it",
          "the outbreak was planned in 2019", "masks cause oxygen deprivation"]


@pytest.fixture()
def pool(tmp_path):
    store = MediaStore(str(tmp_path / "media"))
    photos = [store.put_image(jpeg(c)) for c in [(200, 30, 30), (30, 200, 30), (30, 30, 200)]]
    media = [Medium(medium_id=p.sha256, kind="image", path=p.path, width=p.width, height=p.height, phash=p.phash) for p in photos]
    claims = [
        claim("c1-o", -1.0, f"<image:0> {TOPICS[0]}", [media[0]]),
        claim("c2-o", -0.6667, TOPICS[1]),
        claim("c3-o", -0.6667, f"<image:0> {TOPICS[2]}", [media[1]]),
        claim("c4-o", -1.0, TOPICS[3], variant_of="c4-r"),
        claim("c5-o", -0.7778, TOPICS[4], variant_of="c5-r"),
        claim("c4-r", 0.6667, TOPICS[5], variant="rectified", variant_of="c4-o"),
        claim("c5-r", 0.7778, TOPICS[6], variant="rectified", variant_of="c5-o"),
        claim("c6-o", 0.6667, f"<image:0> {TOPICS[7]}", [media[2]]),
        claim("c7-o", 1.0, TOPICS[8]),
        claim("c8-o", 0.0, TOPICS[9]),
        claim("c9-o", 0.3333, TOPICS[10]),
    ]
    return claims, store


def test_selection_is_balanced_with_unknown_share_and_no_pairs(pool):
    claims, _ = pool
    chosen, report = select_release(claims, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    labels = [c.integrity.label for c in chosen]
    # 5 compromised (2 with variants), 2 natural intact + 2 variants, 2 unknown of 9 originals
    assert report["available"] == {"intact": 2, "compromised": 5, "unknown": 2, "rectified": 2}
    assert labels.count("compromised") == labels.count("intact") == 3
    assert labels.count("unknown") == 2  # round(2/9 * 6 / (7/9)) = round(1.71)
    ids = {c.claim_id for c in chosen}
    assert not any(c.variant_of in ids and c.claim_id in ids for c in chosen if c.variant_of)
    # the Compromised half does not depend on whether a claim's rewrite held: it takes claims in the secret rank, the
    # media and text ones apart; its media (2) match the Intact half's (1: c6-o) within one claim
    assert {c.claim_id for c in chosen if c.integrity.label == "compromised"} == {"c1-o", "c2-o", "c3-o"}
    assert sum(bool(c.media) for c in chosen if c.integrity.label == "compromised") == 2


def test_selection_respects_size_and_near_duplicates(pool):
    claims, _ = pool
    twin = claims[1].model_copy(update={"claim_id": "c2b-o", "text": claims[1].text + "!"})
    chosen, report = select_release(claims + [twin], size=4, media_share=0.8, similarity=92, key=ORDER_KEY)
    assert report["near_duplicates"] == 1
    labels = [c.integrity.label for c in chosen]
    # exactly the requested size, balanced 2/2 with no room for Unknown; an empty selection fails here
    assert len(chosen) == 4 == report["release_size"] == report["feasible_size"]
    assert labels.count("intact") == labels.count("compromised") == 2 and labels.count("unknown") == 0
    assert report["selected"] == {"intact": 2, "compromised": 2, "unknown": 0}
    ids = [c.claim_id for c in chosen]
    assert len(set(ids)) == 4 and not {"c2-o", "c2b-o"} <= set(ids)


def test_no_balance_is_never_faked():
    only_false = [claim(f"x{i}-o", -1.0, TOPICS[i]) for i in range(3)]
    chosen, report = select_release(only_false, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    assert chosen == [] and report["selected"] == {"intact": 0, "compromised": 0, "unknown": 0}


def test_written_release_passes_the_format_check_and_catches_damage(pool, tmp_path):
    claims, store = pool
    chosen, _ = select_release(claims, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    manifest = write_release(folder, "2020Q2", release_claims, files, store, {"version": "test"})
    assert validate_release(folder) == []
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["year"] == 2020 and meta["quarter"] == 2
    assert meta["claim_counts"] == {"intact": 3, "nei": 2, "compromised": 3, "total": 8}
    assert meta["media_counts"] == {"images": 3, "videos": 0} and len(list((folder / "images").glob("*.jpg"))) == 3
    data = json.loads((folder / "claims.json").read_text())["claims"]
    with_media = [c for c in data if c["media"]]
    for c in with_media:  # text references use the release's numeric media ids
        m = c["media"][0]
        assert f"<image:{m['id']}>" in c["text"] and m["file_path"] == f"images/{m['id']}.jpg"
    assert set(manifest["files"]) >= {"meta.json", "claims.json"}
    # damage: a media file that is not a JPEG, and meta counts that lie
    victim = folder / with_media[0]["media"][0]["file_path"]
    victim.write_bytes(b"<html>not an image</html>")
    meta["claim_counts"]["total"] = 99
    (folder / "meta.json").write_text(json.dumps(meta))
    problems = validate_release(folder)
    assert any("is not a JPEG" in p for p in problems)
    assert any("meta claim_counts" in p for p in problems)


def test_format_check_catches_wrong_integrity(tmp_path):
    folder = tmp_path / "r"
    (folder / "images").mkdir(parents=True)
    (folder / "videos").mkdir()
    bad = {"id": 1, "text": "x", "date": None, "language": "en", "review_url": "https://x.org", "media": [],
           "veracity": {"score": -1.0, "justification": ""}, "context_coverage": None,
           "integrity": {"score": 0.5, "decisive_property": "veracity"}}
    (folder / "claims.json").write_text(json.dumps({"claims": [bad]}))
    (folder / "meta.json").write_text(json.dumps({"claim_counts": {"intact": 1, "nei": 0, "compromised": 0, "total": 1},
                                                  "media_counts": {"images": 0, "videos": 0}}))
    problems = validate_release(folder)
    assert any("is not the lowest" in p for p in problems)
    assert any("unbalanced" in p for p in problems)


def test_an_original_and_its_variant_are_not_near_duplicates(pool):
    claims, _ = pool
    photo = claims[0].media[0]
    original = claim("p1-o", -1.0, f"<image:0> {TOPICS[0]}", [photo], variant_of="p1-r")
    variant = claim("p1-r", 0.6667, f"<image:0> {TOPICS[5]}", [photo], variant="rectified", variant_of="p1-o")
    reuse = claim("p2-o", -0.6667, f"<image:0> {TOPICS[9]}", [photo])  # another claim on the same photo only
    from assets.selection.release_selection import remove_near_duplicates

    kept, dropped = remove_near_duplicates([original, variant, reuse], 92)
    assert [c.claim_id for c in kept] == ["p1-o", "p1-r"] and dropped == 1
    kept, _ = remove_near_duplicates([variant, original], 92)
    assert [c.claim_id for c in kept] == ["p1-r", "p1-o"]


def test_release_has_zip_parquet_and_hashes_in_the_manifest(pool, tmp_path):
    import hashlib
    import zipfile

    import polars as pl

    claims, store = pool
    chosen, _ = select_release(claims, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    manifest = write_release(folder, "2020Q2", release_claims, files, store, {"version": "test"})
    with zipfile.ZipFile(folder / "veritas_2020_q2.zip") as zf:
        names = set(zf.namelist())
        assert names == {"meta.json", "claims.json", *(f"images/{mid}.jpg" for mid, _, _ in files)}
        assert json.loads(zf.read("claims.json")) == json.loads((folder / "claims.json").read_text())
    table = pl.read_parquet(folder / "claims.parquet")
    data = json.loads((folder / "claims.json").read_text())["claims"]
    assert table["id"].to_list() == [c["id"] for c in data]
    assert table["integrity"].to_list() == [c["integrity"]["score"] for c in data]
    assert table["label"].to_list() == [bin3(c["integrity"]["score"]) for c in data]
    assert table["n_images"].sum() == sum(len(c["media"]) for c in data)
    for name in ("veritas_2020_q2.zip", "claims.parquet", "claims.json", "meta.json"):
        assert manifest["files"][name] == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert validate_release(folder) == []


def test_visual_near_duplicates_are_removed_by_perceptual_hash(pool, tmp_path):
    from PIL import ImageDraw

    from assets.selection.release_selection import remove_near_duplicates
    from dagster_project.resources.media import phash_distance

    claims, store = pool
    picture = Image.linear_gradient("L").resize((320, 240)).convert("RGB")
    ImageDraw.Draw(picture).rectangle((40, 60, 150, 200), fill=(220, 40, 40))
    stored = []
    for size, quality in (((320, 240), 92), ((288, 216), 55)):  # the same picture re-encoded and resized
        buf = io.BytesIO()
        picture.resize(size).save(buf, "JPEG", quality=quality)
        stored.append(store.put_image(buf.getvalue()))
    first_copy, second_copy = stored
    assert first_copy.sha256 != second_copy.sha256 and phash_distance(first_copy.phash, second_copy.phash) <= 6
    photo, copy_medium = (Medium(medium_id=s.sha256, kind="image", path=s.path, width=s.width, height=s.height,
                                 phash=s.phash) for s in stored)
    first = claim("v1-o", -1.0, f"<image:0> {TOPICS[0]}", [photo])
    repost = claim("v2-o", -0.6667, f"<image:0> {TOPICS[9]}", [copy_medium])  # other words, same picture
    other = claim("v3-o", -0.6667, f"<image:0> {TOPICS[3]}", [claims[2].media[0]])  # another picture
    kept, dropped = remove_near_duplicates([first, repost, other], 92, phash_max_distance=6)
    assert [c.claim_id for c in kept] == ["v1-o", "v3-o"] and dropped == 1
    kept, dropped = remove_near_duplicates([first, repost, other], 92)  # exact files only
    assert dropped == 0
    # the pair exemption holds for perceptual matches too
    variant = claim("v1-r", 0.6667, f"<image:0> {TOPICS[5]}", [copy_medium], variant="rectified", variant_of="v1-o")
    first = first.model_copy(update={"variant_of": "v1-r"})
    kept, dropped = remove_near_duplicates([first, variant], 92, phash_max_distance=6)
    assert dropped == 0


def _many(prefix: str, n: int, score: float, with_media: int = 0) -> list[ScoredClaim]:
    """n claims of one label with distinct texts; the first ``with_media`` carry a medium of their own."""
    out = []
    for i in range(n):
        words = " ".join(f"{prefix}{i}w{j}" for j in range(6))  # no two texts share a word: never near-duplicates
        media = [Medium(medium_id=f"{prefix}{i}", kind="image", path=f"images/{prefix}{i}.jpg", width=640,
                        height=480)] if i < with_media else []
        out.append(claim(f"{prefix}{i}-o", score, ("<image:0> " if media else "") + words, media))
    return out


def test_release_is_exactly_its_size_when_the_pool_allows_it():
    # 60 balanced pairs and 13 Unknown of 133 originals: scaling the Unknown share down to 100 claims used to give
    # int(9.77) = 9 Unknown and (100 - 9) // 2 = 45 pairs, 99 claims
    pool = _many("c", 60, -1.0) + _many("i", 60, 1.0) + _many("u", 13, 0.0)
    chosen, report = select_release(pool, size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    labels = [c.integrity.label for c in chosen]
    assert len(chosen) == 100 == report["feasible_size"]
    assert labels.count("intact") == labels.count("compromised") == 45 and labels.count("unknown") == 10
    # an odd size with Unknown claims to spare is reached too; a pool too small gives what it has
    assert len(select_release(pool, size=77, media_share=0.8, similarity=92, key=ORDER_KEY)[0]) == 77
    small, report = select_release(pool[:10] + pool[60:70], size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    assert len(small) == 20 == report["feasible_size"]


def test_media_share_is_a_hard_limit():
    # Compromised: 8 with media, 2 text; Intact: 10 with media, none text. Rounding up per bin and topping the
    # Intact bin up with media gave 18 media claims of 20 (90 %)
    pool = _many("c", 10, -1.0, with_media=8) + _many("i", 10, 1.0, with_media=10)
    chosen, report = select_release(pool, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    with_media = sum(bool(c.media) for c in chosen)
    # the largest balanced release within 80 %: 5 pairs, 3 + 5 media claims of 10
    assert (len(chosen), with_media) == (10, 8) and report["media_claims"] == 8 and report["feasible_size"] == 10
    labels = [c.integrity.label for c in chosen]
    assert labels.count("intact") == labels.count("compromised") == 5
    # with text to spare the media are preferred up to the limit, never past it
    pool = _many("c", 10, -1.0, with_media=10) + _many("t", 10, -1.0) + _many("i", 20, 1.0, with_media=20)
    chosen, _ = select_release(pool, size=20, media_share=0.8, similarity=92, key=ORDER_KEY)
    assert len(chosen) == 20 and sum(bool(c.media) for c in chosen) == 16


def test_format_check_enforces_the_media_share_and_the_exact_size(pool, tmp_path):
    claims, store = pool
    chosen, report = select_release(claims, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    # the pool allows 8 of the 1,000 asked: a short release fails the gate unless it is allowed, and then says so
    write_release(folder, "2020Q2", release_claims, files, store, {"version": "test", "selection": report})
    short = ("8 claims, short of the release size 1000: the quarter's pool allows no more under the balance, "
             f"Unknown-share and media rules (available {report['available']}, selected {report['selected']}). "
             "Publish it short only on purpose (stages.allow_short_release: true; its card then says so), or lower "
             "stages.release_size")
    assert validate_release(folder) == [short] and validate_release(folder, 1000, 0.8) == [short]
    assert validate_release(folder, 8) == []  # the size asked is the size the pool allows
    report["allow_short_release"] = True
    folder = tmp_path / "short"
    folder.mkdir()
    write_release(folder, "2020Q2", release_claims, files, store, {"version": "test", "selection": report})
    assert validate_release(folder) == [] and validate_release(folder, 1000, 0.8) == []
    assert validate_release(folder, 1000, 0.8, allow_short=False) == [short]  # the config's word counts at the gate
    card = (folder / "README.md").read_text()
    assert "## Short release\n\nThis split has 8 claims, short of the release size 1000" in card
    with_media = sum(bool(c.media) for c in release_claims)
    assert with_media == 3 and len(release_claims) == 8
    # 3 media claims of 8 break a 30 % share (at most 2)
    assert validate_release(folder, media_share=0.3) == ["3 of 8 claims have media: over the media share 0.3"]
    # a claim lost on the way: 7 where the pool allowed 8
    data = json.loads((folder / "claims.json").read_text())
    (folder / "claims.json").write_text(json.dumps({"claims": data["claims"][:-1]}))
    problems = validate_release(folder)
    assert "7 claims, not the 8 the release size 1000 and the pool allow" in problems


def test_injection_flags_go_into_the_parquet_and_the_manifest(pool, tmp_path):
    import polars as pl

    claims, store = pool
    chosen, _ = select_release(claims, size=1000, media_share=0.8, similarity=92, key=ORDER_KEY)
    chosen[1] = chosen[1].model_copy(update={"injection_flags": ["ignore your instructions"]})
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    manifest = write_release(folder, "2020Q2", release_claims, files, store, {"version": "test"},
                             [c.injection_flags for c in chosen])
    table = pl.read_parquet(folder / "claims.parquet")
    assert table["injection_flags"].to_list() == [["ignore your instructions"] if i == 1 else [] for i in range(8)]
    assert manifest["injection_flags"] == {"2": ["ignore your instructions"]}
    assert "injection_flags" not in json.loads((folder / "claims.json").read_text())["claims"][1]  # VeriTaS format


def test_a_release_that_cannot_name_its_code_fails_the_gate_outside_a_demo(pool, tmp_path, monkeypatch):
    from assets.release.provenance import code_version

    claims, store = pool
    chosen, report = select_release(claims, size=8, media_share=0.8, similarity=92, key=ORDER_KEY)
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    write_release(folder, "2020Q2", release_claims, files, store, {"version": "t", "code_version": "unknown"})
    assert validate_release(folder) == [
        "code_version is unknown: the release cannot be traced to the code that built it. Build it from a git "
        "checkout, or set VERITAS_CODE_VERSION to the commit the installed code comes from"]
    folder = tmp_path / "demo"
    folder.mkdir()
    write_release(folder, "2020Q2", release_claims, files, store, {"version": "t", "code_version": "unknown", "demo": True})
    assert validate_release(folder) == []
    # an installed copy (no git checkout) names its commit through the environment
    monkeypatch.setattr("assets.release.provenance.PROJECT_ROOT", tmp_path)
    monkeypatch.setenv("VERITAS_CODE_VERSION", "0123abc")
    assert code_version() == "0123abc"
    monkeypatch.delenv("VERITAS_CODE_VERSION")
    assert code_version() == "unknown"
