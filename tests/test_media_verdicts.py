"""Stage 5's media checks: the OCR reads verdict stamps on images and video frames, and a medium whose filter
answer failed is dropped and counted, never kept. The model sits behind a loopback stub (the HTTP boundary)."""

import io
import json
import random
import re

import pytest
from PIL import Image, ImageDraw, ImageFont

from assets.claims.normalized_claims import filter_media, media_verdict_text
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.simulation.openai_stub import serving
from schemas.records import ClaimAppearances, Medium


def photo(stamp: str = "", seed: int = 7, size: int = 90) -> bytes:
    """A real-looking JPEG (sky gradient, a noisy ground, a few shapes) with an optional stamp drawn across it."""
    rng = random.Random(seed)
    img = Image.new("RGB", (640, 480))
    draw = ImageDraw.Draw(img)
    for y in range(480):
        draw.line([(0, y), (640, y)], fill=(90 + y // 6, 130 + y // 8, 200 - y // 5) if y < 300 else (70, 90 + y % 7, 40))
    for _ in range(25):
        x, y, r = rng.randrange(640), rng.randrange(300, 480), rng.randrange(5, 30)
        draw.ellipse([x - r, y - r, x + r, y + r], fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    if stamp:
        draw.rectangle([140, 170, 500, 290], outline=(220, 20, 20), width=8)
        draw.text((165 if size >= 90 else 20, 180), stamp, font=ImageFont.load_default(size=size), fill=(220, 20, 20))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=85)
    return buf.getvalue()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return MediaStore(str(tmp_path_factory.mktemp("media")))


def as_medium(stored, **extra) -> Medium:
    return Medium(medium_id=stored.sha256, kind="image", path=stored.path, width=stored.width, height=stored.height,
                  phash=stored.phash, **extra)


def stamp(found: tuple[str, str]) -> tuple[str, str]:
    return found[0], found[1].casefold()


def test_the_ocr_reads_a_stamped_false_and_passes_a_clean_photo(store):
    stamped, clean = as_medium(store.put_image(photo("FALSE"))), as_medium(store.put_image(photo()))
    assert stamp(media_verdict_text(stamped, store, "en", "")) == ("stamp", "false")
    assert media_verdict_text(clean, store, "en", "") == ("", "")
    # a video is read frame by frame: one stamped frame is enough
    video = Medium(medium_id="v" * 64, kind="video", path="videos/v.mp4", frame_paths=[clean.path, stamped.path])
    assert stamp(media_verdict_text(video, store, "en", "")) == ("stamp", "false")
    # a stamp in another language than the claim's is a stamp all the same (issue 48: "FAUX" on the image of an
    # English claim is a French fact-checker's stamp)
    faux = as_medium(store.put_image(photo("FAUX", seed=3)))
    assert stamp(media_verdict_text(faux, store, "en", "")) == ("stamp", "faux")
    # the claim's own rating counts as a verdict word too ("INCORRECT" is in no list: a rating of the FACTors set)
    incorrect = as_medium(store.put_image(photo("INCORRECT", seed=4)))
    assert media_verdict_text(incorrect, store, "en", "") == ("", "")
    assert stamp(media_verdict_text(incorrect, store, "en", "Incorrect")) == ("stamp", "incorrect")


def test_the_ocr_cache_reads_each_image_once_across_runs(store, tmp_path):
    import sqlite3

    from assets.rules.media_text import TextCache, ocr_settings

    stamped, clean = as_medium(store.put_image(photo("FALSE"))), as_medium(store.put_image(photo()))
    video = Medium(medium_id="v" * 64, kind="video", path="videos/v.mp4", frame_paths=[clean.path, stamped.path])
    first = TextCache(tmp_path / "ocr_cache.sqlite")
    assert stamp(media_verdict_text(stamped, store, "en", "", first)) == ("stamp", "false")
    assert stamp(media_verdict_text(video, store, "en", "", first)) == ("stamp", "false")  # the stamped frame: cached
    assert (first.misses, first.hits) == (2, 1)
    first.close()
    rerun = TextCache(tmp_path / "ocr_cache.sqlite")  # a re-run: the same answers, no image read again
    assert stamp(media_verdict_text(video, store, "en", "", rerun)) == ("stamp", "false")
    assert media_verdict_text(clean, store, "en", "", rerun) == ("", "")
    assert (rerun.misses, rerun.hits) == (0, 3)
    rerun.close()
    with sqlite3.connect(tmp_path / "ocr_cache.sqlite") as db:
        rows = dict(db.execute("SELECT sha256, text FROM ocr_text WHERE settings=?", (ocr_settings(),)).fetchall())
    assert rows.keys() == {stamped.medium_id, clean.medium_id}  # keyed by the image's content hash
    assert "FALSE" in rows[stamped.medium_id].upper()


def asked_media(body: dict) -> list[str]:
    """The "Medium N: ..." lines of a media filter question."""
    content = next(m["content"] for m in body["messages"] if m["role"] == "user")
    text = content if isinstance(content, str) else " ".join(p.get("text", "") for p in content)
    return re.findall(r"^Medium \d+: .*$", text, re.MULTILINE)


def filter_answers(mode: str, body: dict):
    """A media filter that keeps every medium it is asked about (one verdict each), or answers no JSON."""
    if mode == "broken":
        return 200, "no JSON here"
    return 200, json.dumps({f"medium_{i}": {"keep": "yes", "reason": "part_of_claim"}
                            for i in range(1, len(asked_media(body)) + 1)})


@pytest.mark.parametrize("mode", ["keeps", "broken"])
def test_filter_drops_stamped_media_and_never_keeps_on_a_failed_answer(store, tmp_path, monkeypatch, mode):
    from assets.rules.media_text import TextCache

    monkeypatch.setenv("STUB_KEY", "sk-test")
    stamped = as_medium(store.put_image(photo("FAKE", seed=11)), origin="appearance", alt="the stamped one")
    clean = as_medium(store.put_image(photo(seed=12)), origin="appearance", alt="the clean one")
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", claim_text="Masts burn in Hong Kong",
                             quarter="2020Q2", language="en", media=[stamped, clean])
    with serving(filter_answers) as stub:
        llm = LLMResource(members=[EnsembleMember(name="m", model="openai/scripted", api_base=stub.base(mode),
                                                  api_key_env="STUB_KEY")],
                          cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)
        ocr = TextCache(tmp_path / f"ocr-{mode}.sqlite")
        verdicts = filter_media(claim, "en", llm, store, ocr)
        ocr.close()
        asked = [asked_media(body) for _, body in stub.requests]
    # the model is asked first, about both media in one question (twice where the first answer was no JSON)
    assert len(asked) == {"keeps": 1, "broken": 2}[mode]
    assert all(["the stamped one" in line for line in a] == [True, False] for a in asked)
    if mode == "keeps":  # it keeps both; the OCR then reads "FAKE" on one: the stamp alone drops it
        assert verdicts == {stamped.medium_id: "verdict_stamp"} and ocr.misses == 2
    else:  # the model's answer fails: neither medium is kept unchecked, and none is read
        assert verdicts == {stamped.medium_id: "filter_failed", clean.medium_id: "filter_failed"} and ocr.misses == 0


def test_the_model_is_asked_only_of_media_no_plain_rule_drops(store, tmp_path, monkeypatch):
    """Tiny images, the fact-checker's graphics by their alt text, and near-duplicates of a preferred medium go
    without a question; a near-duplicate shares its group's verdict (here: the post's copy is kept, the article's
    copy dropped as its duplicate), and select_media then agrees with the filter."""
    from assets.claims.normalized_claims import select_media
    from dagster_project.stage_settings import ClaimRules, NormalizeSettings

    monkeypatch.setenv("STUB_KEY", "sk-test")
    post = as_medium(store.put_image(photo(seed=21)), origin="appearance")
    article_copy = as_medium(store.put_image(photo(seed=21)[:-2] + b"\xff\xd9"), origin="article")
    article_copy = article_copy.model_copy(update={"medium_id": "copy", "phash": post.phash})
    logo = as_medium(store.put_image(photo(seed=22)), origin="article", alt="PolitiFact logo")
    tiny = Medium(medium_id="tiny", kind="image", path=post.path, width=60, height=60, phash="0f0f0f0f0f0f0f0f")
    other = as_medium(store.put_image(photo(seed=23)), origin="article")
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", claim_text="Masts burn in Hong Kong",
                             quarter="2020Q2", language="en", media=[article_copy, logo, tiny, post, other])
    with serving(filter_answers) as stub:
        llm = LLMResource(members=[EnsembleMember(name="m", model="openai/scripted", api_base=stub.base("keeps"),
                                                  api_key_env="STUB_KEY")],
                          cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)
        verdicts = filter_media(claim, "en", llm, store)
        asked = [json.dumps(body) for _, body in stub.requests]
    # one question, about the post's image and the other article image
    assert [len(asked_media(body)) for _, body in stub.requests] == [2] and all("URL: " in a for a in asked)
    assert verdicts == {}
    kept, dropped = select_media(claim, verdicts, NormalizeSettings(), ClaimRules())
    assert [m.medium_id for m in kept] == [post.medium_id, other.medium_id]
    assert dict(d.split(":", 1) for d in dropped) == {"copy": "near_duplicate", logo.medium_id: "fact_checker_graphic",
                                                      "tiny": "too_small"}


def test_a_screenshot_of_the_post_saying_fake_keeps_its_image(store, tmp_path, monkeypatch):
    """The circulating post's own words ("this is fake") are not a fact-checker's stamp: the medium stays, counted."""
    monkeypatch.setenv("STUB_KEY", "sk-test")
    post = as_medium(store.put_image(photo("They say it is fake", seed=5, size=44)), origin="appearance")
    found = stamp(media_verdict_text(post, store, "en", ""))
    assert found == ("in_text", "fake")
    stamped = as_medium(store.put_image(photo("FACT CHECK: FALSE", seed=6, size=44)), origin="appearance")
    assert stamp(media_verdict_text(stamped, store, "en", "")) == ("stamp", "false")
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", claim_text="Masts burn in Hong Kong",
                             quarter="2020Q2", language="en", media=[post, stamped])
    with serving(filter_answers) as stub:
        for vision, note in ((False, "kept:verdict_word_in_text"), (True, "kept:verdict_word_seen_by_vision")):
            llm = LLMResource(members=[EnsembleMember(name="m", model="openai/scripted", api_base=stub.base("keeps"),
                                                      api_key_env="STUB_KEY", vision=vision)],
                              cache_path=str(tmp_path / f"cache{vision}.sqlite"), num_retries=0)
            verdicts = filter_media(claim, "en", llm, store)
            assert verdicts == {post.medium_id: note, stamped.medium_id: "verdict_stamp"}


@pytest.mark.parametrize("line,word,stamped", [
    ("FALSE", "false", True), ("Fake!", "fake", True), ("FAKE NEWS", "fake", True),
    ("FACT CHECK: FALSE", "false", True), ("MISSING CONTEXT", "missing context", True),
    ("THIS IS FAKE", "fake", False), ("Media says the vaccine story is false", "false", False),
    ("\u5047", "\u5047", True), ("\u8fd9\u662f\u5047\u65b0\u95fb\u5417\u4f60\u4eec\u8bf4", "\u5047", False),
])
def test_a_stamp_is_the_verdict_phrase_alone(line, word, stamped):
    from assets.rules.media_rules import is_stamp

    assert is_stamp(line, word) is stamped


def test_a_failed_question_about_a_medium_is_asked_again_then_drops_the_claim(store, tmp_path, monkeypatch):
    """Issue 34: a claim whose medium could not be checked lost the medium and stayed text-only, its text still
    saying "this photo". The failed filter question goes to the next member; when every member fails, or the file
    cannot be read twice, the claim is dropped with its reason, never changed."""
    from assets.claims.normalized_claims import normalize_claim
    from dagster_project.stage_settings import ClaimRules, NormalizeSettings

    monkeypatch.setenv("STUB_KEY", "sk-test")
    clean = as_medium(store.put_image(photo(seed=31)), origin="appearance", alt="the photo")
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", quarter="2020Q2", language="en",
                             claim_text="This photo shows a 5G mast burning in Hong Kong", media=[clean])

    def panel(stub, modes):
        return LLMResource(members=[EnsembleMember(name=f"m{i}", model="openai/scripted", api_base=stub.base(mode),
                                                   api_key_env="STUB_KEY") for i, mode in enumerate(modes)],
                           cache_path=str(tmp_path / f"{'-'.join(modes)}.sqlite"), num_retries=0)

    with serving(filter_answers) as stub:
        # the first member's answer fails, the second's keeps the photo: checked, kept
        assert filter_media(claim, "en", panel(stub, ["broken", "keeps"]), store) == {}
        normalized, reason, dropped = normalize_claim(claim, None, panel(stub, ["broken", "broken"]),
                                                      NormalizeSettings(), ClaimRules(), store)
    assert (normalized, reason) == (None, "media_check_failed:filter_failed")
    assert dropped == [f"{clean.medium_id}:filter_failed"]
    # an unreadable file (its path gone) is read twice, then the claim goes
    gone = clean.model_copy(update={"medium_id": "gone", "path": "images/gone.jpg"})
    with serving(filter_answers) as stub:
        normalized, reason, _ = normalize_claim(claim.model_copy(update={"media": [gone]}), None,
                                                panel(stub, ["keeps"]), NormalizeSettings(), ClaimRules(), store)
    assert normalized is None and reason == "media_check_failed:ocr_failed"


def test_plain_drops_match_whole_words_in_the_claims_language():
    """Issue 34: plain_drops matched substrings, so an article image captioned with a real claim about a stampede
    (PesaCheck, 5pils), a "timestamp" or the Italian "virologo" went as the fact-checker's graphic unasked."""
    from pathlib import Path

    from assets.rules.media_rules import plain_drops

    stampede = json.loads((Path(__file__).parent / "fixtures" / "5pils_stampede.json").read_text())[0]["claim"]

    def image(mid, caption="", alt=""):
        return Medium(medium_id=mid, kind="image", path=f"images/{mid}.jpg", width=640, height=480, origin="article",
                      caption=caption, alt=alt)

    media = [image("stampede", stampede), image("time", alt="Screenshot of the post with its timestamp"),
             image("virologo", "Il virologo Roberto Burioni in televisione"), image("logo", alt="PesaCheck logo"),
             image("timbro", "Il timbro di Facta sulla foto"), image("stamp", alt="FALSE stamp")]
    assert plain_drops(media, -1, "en") == {"logo": "fact_checker_graphic", "stamp": "fact_checker_graphic"}
    # Italian's own words count for a claim in Italian (English's for every language)
    assert plain_drops(media, -1, "it") == {"logo": "fact_checker_graphic", "timbro": "fact_checker_graphic",
                                            "stamp": "fact_checker_graphic"}


@pytest.mark.parametrize("line, overlay", [
    ("False information", "false information"),
    ("FALSE INFORMATION", "false information"),
    ("Checked by independent fact-checkers", "checked by independent fact checkers"),
    ("Informazioni false", "informazioni false"),
    ("Readers added context", "readers added context"),
    ("Caution: Video flagged for unverified content", "caution video flagged for unverified content"),
    ("This is false information about vaccines", ""),  # the post's own sentence
    ("See why", ""),
    ("Checked byindependent fact-checkers", "checked by independent fact checkers"),  # the OCR ran words together
])
def test_platform_overlays_are_stamps(line, overlay):
    from assets.rules.media_rules import overlay_stamp

    assert overlay_stamp(line) == overlay


def test_every_platform_overlay_names_its_platform_language_and_source():
    from assets.rules.overlays import PLATFORM_OVERLAYS

    assert {p for p, *_ in PLATFORM_OVERLAYS} == {"meta", "x", "tiktok", "youtube"}
    for platform, language, text, source in PLATFORM_OVERLAYS:
        assert language in {"en", "de", "fr", "es", "pt", "it", "ar"} and text.strip(), (platform, text)
        assert source.startswith(("https://", "http://")), text


def test_the_ocr_reads_metas_false_information_overlay_as_a_stamp(store):
    """Meta's overlay reads "False information": "information" is no stamp word, so before the platforms' overlays
    the OCR found only a verdict word in text, and the image's fate hung on one member's answer."""
    img = Image.new("RGB", (640, 480), (40, 40, 45))  # the overlay: white text on the post's darkened image
    draw = ImageDraw.Draw(img)
    draw.text((60, 200), "False information", font=ImageFont.load_default(size=36), fill=(255, 255, 255))
    draw.text((60, 256), "Checked by independent fact-checkers", font=ImageFont.load_default(size=24), fill=(230, 230, 230))
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=90)
    overlaid = as_medium(store.put_image(buf.getvalue()))
    assert media_verdict_text(overlaid, store, "en", "") == ("stamp", "false information")
