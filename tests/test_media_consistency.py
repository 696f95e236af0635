"""Issue 49: rewrites consistent with their media. A rectified claim keeps its original's media, and media often carry
the original post's words (a screenshot, a caption burned into the picture; the simulated quarter draws the claim's
first 40 characters into its pictures). Comparing the picture's text with the claim told a rewrite from a natural
claim. Stage 7 now rectifies a claim whose media carry its wording only with a rewrite that keeps those words
(assets/claims/rectified_claims.media_problem), its checker is shown the media's text, and the rule's exclusions are
counted by media kind."""

import hashlib
import io
import json

import pytest
from PIL import Image

from assets.claims.rectified_claims import media_problem, rectify_all
from assets.ensemble.scoring import score_claim
from assets.release.numbering import ordered_release
from assets.rules.media_text import TextCache
from assets.selection.channels import MediaTexts, consistent_with_media
from assets.selection.shortcut_audit import pool_rows, release_rows, shortcut_audit
from dagster_project.resources.media import MediaStore
from dagster_project.simulation.openai_stub import serving
from dagster_project.simulation.rewrites import rewrites, vocabulary
from prompts import render
from schemas.records import Medium
from tests.ops_support import rating, rating_reply
from tests.test_adversarial import REAL
from tests.test_rating_flow import ARTICLE, CLAIM_RULES, EVERY, SCORING, _key, claim, resource  # noqa: F401
from tests.test_release import ORDER_KEY
from tests.test_release import claim as scored

FALSE = "<image:0> Crowd in Hong Kong yesterday at the big protest march"
SHOWN = "CrowdinHongKongyesterday"  # what the OCR reads on the picture: the claim's opening words, spaces lost
CHANGES = "<image:0> Crowd in Paris yesterday at the big protest march"  # the false detail is in the picture's words
KEEPS = "<image:0> Crowd in Hong Kong yesterday at the big open-air concert"  # the picture's words kept


def test_the_rule_asks_a_rewrite_to_keep_the_words_its_media_show():
    assert media_problem([SHOWN], FALSE, CHANGES) == f"media_inconsistent:{SHOWN}"
    assert media_problem([SHOWN], FALSE, KEEPS) == ""
    assert media_problem(["Crowd in"], FALSE, CHANGES) == ""  # too short to say anything
    assert media_problem(["Sunset over the harbour"], FALSE, CHANGES) == ""  # media that do not carry the wording
    assert media_problem(None, FALSE, CHANGES) == "" and media_problem([], FALSE, CHANGES) == ""  # not read
    # the words kept, but no longer where the picture has them (a reordered paraphrase): not consistent
    assert not consistent_with_media([SHOWN], FALSE, "<image:0> At the big protest march: crowd in Hong Kong yesterday")


def test_the_writer_is_shown_the_media_text_it_must_keep():
    user = render("rectify_claim", claim=FALSE, evidence="", decisive_property="veracity", justification="",
                  max_words=60, max_sentences=3, media_text=SHOWN, media=[], language="en",
                  claim_date="")[-1]["content"]
    assert f'Text printed in the claim\'s media (read by OCR; it may miss spaces or letters): "{SHOWN}"' in user
    assert "keep these words as they are and where they are" in user
    assert "Text printed" not in render("rectify_claim", claim=FALSE, evidence="", decisive_property="veracity",
                                        justification="", max_words=60, max_sentences=3, media=[],
                                        language="en", claim_date="")[-1]["content"]


def test_the_checker_is_shown_the_media_text():
    user = render("check_rectified", original=FALSE, claim=KEEPS, evidence="", media_text=SHOWN)[-1]["content"]
    assert f'Text printed in the claim\'s media (read by OCR; it may miss spaces or letters): "{SHOWN}"' in user
    assert "Text printed" not in render("check_rectified", original=FALSE, claim=KEEPS, evidence="")[-1]["content"]


CHECKED: list = []
WRITTEN: list = []


def writer_and_raters(mode: str, body: dict):
    """'consistent' writes CHANGES until the critique says what the picture shows, then KEEPS; 'reads' keeps the
    words its prompt shows from the first round; 'stubborn' always CHANGES; the checker agrees (its prompts are
    kept); the raters hold the original out of context and a rewrite true."""
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    user = user if isinstance(user, str) else "\n".join(p.get("text", "") for p in user if p.get("type") == "text")
    if "You turn a compromised claim" in system:
        WRITTEN.append(user)
        told = "claim's own media show" in user if mode == "consistent" else f'"{SHOWN}"' in user
        return 200, json.dumps({"claim": KEEPS if told and mode != "stubborn" else CHANGES})
    if "You check a rewritten claim" in system:
        CHECKED.append(user)
        return 200, json.dumps({"consistent": "yes", "shareable": "yes", "critique": ""})
    true_claim = "concert" in user or "Paris" in user
    return rating_reply(user, rating("positive" if true_claim else "negative", why="the crowd"),
                        rating("positive" if true_claim else "negative", why="the place"))


@pytest.fixture(scope="module")
def stub():
    with serving(writer_and_raters) as s:
        yield s


def picture_claim(tmp_path, llm):
    """The false claim with a stored picture whose text stage 5's OCR read as SHOWN (kept in its cache)."""
    buf = io.BytesIO()
    Image.new("RGB", (320, 240), (120, 40, 40)).save(buf, "JPEG")
    store = MediaStore(str(tmp_path / "media"))
    stored = store.put_image(buf.getvalue())
    cache = TextCache(tmp_path / "ocr_cache.sqlite", reader=lambda jpeg: SHOWN)
    cache.read_text(store.read(stored.path))
    cache.close()
    photo = Medium(medium_id=stored.sha256, kind="image", path=stored.path, width=stored.width,
                   height=stored.height, phash=stored.phash)
    original, _ = score_claim(claim(FALSE, [photo]), "e", llm, SCORING, CLAIM_RULES, store)
    assert original.integrity.label == "compromised"
    return original, store


def test_stage_7_refuses_a_rewrite_that_changes_the_pictures_words_and_takes_one_that_keeps_them(stub, tmp_path):
    llm = resource(stub, tmp_path, ("consistent", "agree", "agree"))
    original, store = picture_claim(tmp_path, llm)
    CHECKED.clear()
    out, stats = rectify_all([original], {"r1": ARTICLE}, llm, **EVERY, media_store=store, key=ORDER_KEY)
    assert len(out) == 2 and out[1].text == KEEPS and out[1].rewrite_rounds == 2, stats.extra
    assert stats.extra["refine/refused/media_inconsistent"] == 1
    assert stats.extra["rectify/media_carry/image"] == 1 and stats.extra["rectify/media_refused/image"] == 1
    assert "rectify/media_excluded/image" not in stats.extra and stats.extra["rectify/media_text_unread"] == 0
    assert len(CHECKED) == 1 and SHOWN in CHECKED[0]  # the rule refused before the checker; then it saw the text


def test_a_writer_told_the_pictures_words_keeps_them_in_its_first_round(stub, tmp_path):
    llm = resource(stub, tmp_path, ("reads", "agree", "agree"))
    original, store = picture_claim(tmp_path, llm)
    WRITTEN.clear()
    out, stats = rectify_all([original], {"r1": ARTICLE}, llm, **EVERY, media_store=store, key=ORDER_KEY)
    assert len(out) == 2 and out[1].text == KEEPS and out[1].rewrite_rounds == 1, stats.extra
    assert "refine/refused/media_inconsistent" not in stats.extra and stats.extra["rectify/media_carry/image"] == 1
    assert len(WRITTEN) == 1 and f'"{SHOWN}"' in WRITTEN[0]


def test_a_claim_whose_rewrites_all_change_the_pictures_words_is_not_rectified_and_counted(stub, tmp_path):
    llm = resource(stub, tmp_path, ("stubborn", "agree", "agree"))
    original, store = picture_claim(tmp_path, llm)
    out, stats = rectify_all([original], {"r1": ARTICLE}, llm, **EVERY, media_store=store, key=ORDER_KEY)
    assert len(out) == 1 and stats.extra["not_rectified/media_inconsistent"] == 1
    assert stats.extra["rectify/media_excluded/image"] == 1 and stats.extra["rectify/media_excluded_writer_calls"] == 3
    assert stats.extra["refine/refused/media_inconsistent"] == 3


# ------------------------------------------------------------------ the planted channel: a simulated quarter
CAPTIONS: dict[str, str] = {}


def picture(i: int, text: str) -> Medium:
    """A picture of claim i as the simulated quarter draws it: the claim's first 40 characters as its caption
    (dagster_project/simulation/quarter.py, Pictures.photo); its text is what an OCR reads there."""
    path = f"images/{i:04d}.jpg"
    CAPTIONS[path] = text[:40].replace(" ", "")  # the OCR of the rehearsal's pictures often lost the spaces
    digest = hashlib.sha256(path.encode()).hexdigest()
    return Medium(medium_id=digest, kind="image", path=path, width=320, height=240, phash=digest[:16])


READER = MediaTexts(lambda data: CAPTIONS[data.decode()], lambda path: path.encode())


def picture_quarter(n: int = 150, candidates: int = 350):
    """``n`` natural Compromised claims with their pictures, and ``candidates`` others rewritten by the simulated
    writer (its minimal edit: one detail swapped), each rewrite keeping its original's picture."""
    words = vocabulary([(t, "en") for t in REAL])
    natural = [scored(f"n{i}-o", -0.7778, "<image:0> " + REAL[i], media=[picture(i, REAL[i])]) for i in range(n)]
    made = []
    for i in range(n, n + candidates):
        m, text = picture(i, REAL[i]), "<image:0> " + REAL[i]
        edit = "<image:0> " + rewrites(REAL[i], "en", words, 13)["rewrites"]["minimal"]
        natural.append(scored(f"f{i}-o", -0.7778, text, media=[m], variant_of=f"f{i}-r"))
        made.append(scored(f"f{i}-r", 0.7778, edit, media=[m], variant="rectified", variant_of=f"f{i}-o")
                    .model_copy(update={"original_text": text}))
    return natural, made


def test_rewrites_beside_pictures_of_the_original_words_fail_the_gate_until_the_rule_is_on():
    natural, made = picture_quarter()
    originals = {c.claim_id: c for c in natural}

    def audit(rewritten):
        ordered, release, _, _ = ordered_release(natural[:150] + rewritten[:150], ORDER_KEY)
        return shortcut_audit(release_rows(release, [c.variant for c in ordered], ordered, READER),
                              pool_rows(natural + made, READER), seed=2)

    before = audit(made)  # as today: every rewrite keeps its original's picture, whatever it changed
    media = before["channels"]["gating"]["media_text"]
    assert media["above_chance"] and media["accuracy"] > 0.65, media
    assert any(p.startswith("the media_text channel tells rewritten claims") for p in before["text_problems"])
    # the rule on: a candidate whose rewrite changed the picture's words is not rectified, another one is
    kept = [v for v in made if not media_problem(READER(v.media), originals[v.variant_of].text, v.text)]
    assert 150 <= len(kept) < 0.8 * len(made)
    after = audit(kept)
    assert not after["channels"]["gating"]["media_text"]["off_chance"], after["channels"]["gating"]["media_text"]
    assert after["text_problems"] == [], after["text_problems"]


# ------------------------------------------------------------------ the halves' media carry their words alike
def test_the_compromised_half_takes_as_many_claims_whose_media_carry_their_words_as_the_intact_half_has():
    """Stage 7 cannot rewrite every claim whose picture shows its words, so its rewrites carry their words less often
    than natural claims: the Compromised half's media claims are drawn per stratum to the Intact half's share, each
    stratum from the front of the secret rank (no claim is taken for its variant)."""
    from assets.selection.release_selection import select_release, selection_rank
    from tests.test_release import _many

    compromised = _many("c", 200, -1.0, with_media=200)
    intact = _many("i", 120, 1.0, with_media=120)
    carry = {c.claim_id for c in compromised[:120]} | {c.claim_id for c in intact[:48]}  # 60% and 40%
    inside = lambda c: c.claim_id in carry  # noqa: E731

    def share(chosen, label):
        media = [c for c in chosen if c.integrity.label == label and c.media]
        return sum(map(inside, media)) / len(media)

    args = dict(size=240, media_share=1.0, similarity=92, dedupe=False, key=ORDER_KEY)  # every Intact claim
    plain, _ = select_release(compromised + intact, **args)
    assert share(plain, "compromised") > 0.5 and share(plain, "intact") == 0.4
    chosen, report = select_release(compromised + intact, **args, stratum=inside)  # the Intact half has 0.4
    assert share(chosen, "compromised") == 0.4 and len(chosen) == 240
    assert report["stratum_share_of_media"] == {"compromised": 0.4, "intact": 0.4}
    rank = selection_rank(ORDER_KEY)
    taken = [c for c in chosen if c.integrity.label == "compromised"]
    for side in (True, False):  # each stratum's claims are the first of the secret rank
        ids = sorted((c for c in compromised if inside(c) == side), key=rank)
        assert {c.claim_id for c in taken if inside(c) == side} == {c.claim_id for c in ids[:sum(
            inside(c) == side for c in taken)]}
