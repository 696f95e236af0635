"""Issue 49, the channels beyond the text (assets/selection/channels.py): the media's own text and how it matches the
claim, the pictures' size and perceptual hash, and the claim's fluency under a character n-gram model trained on
the quarter's natural claims. The shortcut audit reports each on its own and combined with the text, against natural
Compromised claims (the gating pair, two-sided) and against all natural claims, and on the 3-bin label.

The planted fluency tell: the simulated writer (dagster_project/simulation/rewrites.py) garbles one word of each
rewrite; the text classifier does not tell (one word of a claim), the fluency channel does."""

import io

import numpy as np
from PIL import Image

from assets.release.numbering import ordered_release
from assets.selection.channels import (
    CharLM,
    MediaTexts,
    carries_wording,
    channel_features,
    media_fit,
    media_texts,
    merge_groups,
)
from assets.selection.shortcut_audit import _channels_md, audit_markdown, pool_rows, release_rows, shortcut_audit
from dagster_project.simulation.rewrites import garble, rewrites, vocabulary
from tests.test_adversarial import REAL
from tests.test_release import ORDER_KEY, claim


def writer_quarter(garbled: bool, n: int = 150):
    """``n`` natural Compromised claims and ``n`` rewrites (the simulated writer's minimal edits of other real claims,
    each beside its original in the pool), all real AVeriTeC claims."""
    words = vocabulary([(t, "en") for t in REAL])
    natural = [claim(f"n{i}-o", -0.7778, REAL[i]) for i in range(n)]
    made = []
    for i in range(n, 2 * n):
        text = REAL[i]
        edit = rewrites(text, "en", words, 13, garbled)["rewrites"]["minimal"]
        natural.append(claim(f"f{i}-o", -0.7778, text, variant_of=f"f{i}-r"))
        made.append(claim(f"f{i}-r", 0.7778, edit, variant="rectified", variant_of=f"f{i}-o")
                    .model_copy(update={"original_text": text}))
    return natural, made


def audited(natural, made):
    chosen = natural[: len(made)] + made
    ordered, release, _, _ = ordered_release(chosen, ORDER_KEY)
    return shortcut_audit(release_rows(release, [c.variant for c in ordered], ordered), pool_rows(natural + made),
                          seed=2)


def test_a_writer_that_garbles_one_word_per_rewrite_is_caught_by_the_fluency_channel():
    plain = audited(*writer_quarter(garbled=False))
    fluency = plain["channels"]["gating"]["fluency"]
    assert not fluency["off_chance"] and plain["text_problems"] == [], (fluency, plain["text_problems"])
    garbled = audited(*writer_quarter(garbled=True))
    fluency = garbled["channels"]["gating"]["fluency"]
    assert fluency["above_chance"] and fluency["accuracy"] > 0.7, fluency
    assert not garbled["rectified_style"]["off_chance"]  # one word of a claim: the text classifier misses it
    assert any(p.startswith("the fluency channel tells rewritten claims from natural Compromised ones")
               for p in garbled["text_problems"]), garbled["text_problems"]
    assert "character 5-gram language model" in garbled["channels"]["fluency_model"]
    card = audit_markdown(garbled)
    assert "| fluency |" in card and "| combined |" in card and "(above)" in card
    assert set(garbled["channels"]["vs_natural"]) == set(garbled["channels"]["gating"]) == {"fluency", "combined"}
    assert garbled["channels"]["skipped"]["media_text"].startswith("no media text given")


def test_the_garbling_writer_garbles_one_common_word():
    text = "Photo shows flooding in New York after the hurricane."
    out = garble(text, __import__("random").Random(1))
    changed = [(a, b) for a, b in zip(text.split(), out.split()) if a != b]
    assert len(changed) == 1 and changed[0][0] == "hurricane." and sorted(changed[0][1]) == sorted("hurricane.")
    made = rewrites(text, "en", vocabulary([(text, "en"), ("Boston is near Chicago today.", "en")]), 13, True)
    plain = rewrites(text, "en", vocabulary([(text, "en"), ("Boston is near Chicago today.", "en")]), 13, False)
    assert all(sum(a != b for a, b in zip(made["rewrites"][s].split(), plain["rewrites"][s].split())) == 1
               for s in plain["rewrites"])


def test_the_fluency_model_leaves_out_the_claims_own_review_group():
    texts = ["the flood covered the old bridge in march", "a new bridge opened in the city centre today",
             "prices of bread rose sharply in the capital"] * 3
    lm = CharLM(texts + ["zqxj vrkw plfm"], [f"g{i % 3}" for i in range(9)] + ["own"])
    seen = lm.fluency("zqxj vrkw plfm")[0]
    alone = lm.fluency("zqxj vrkw plfm", group="own")[0]
    assert alone < seen - 1.0  # its own n-grams taken out, the odd text is odd again
    assert lm.fluency("the flood covered the old bridge", group="own")[0] > alone + 1.0


def test_review_groups_join_an_original_its_rewrite_and_other_reviews_of_the_claim():
    rows = [{"group": "claim a", "review": "r1"}, {"group": "claim a rewritten", "review": "r1"},
            {"group": "claim a", "review": "r2"}, {"group": "claim b", "review": "r3"}]
    merge_groups(rows)
    assert rows[0]["group"] == rows[1]["group"] == rows[2]["group"] != rows[3]["group"]


def test_media_text_is_compared_without_the_spaces_the_ocr_drops():
    claim_text = "<image:0> Photo of a football ground at Ukhrul in Manipur (India)."
    ocr = ["PhotoofafootballgroundatUkhrul in"]  # as stage 5's OCR read the rehearsal's picture
    assert media_fit(ocr, claim_text) == (100.0, 100.0) and carries_wording(ocr, claim_text)
    rewrite = "<image:0> In reality, photo of a football ground at Algeria in Manipur (India)."
    overlap, prefix = media_fit(ocr, rewrite)
    assert overlap < 90 and prefix < 80
    assert media_fit(["03"], claim_text) is None and not carries_wording(["Lalibela,atowninethiopia"], claim_text)


def test_image_features_and_the_nearest_hash_of_another_group():
    rows = [{"text": "a", "group": "g1", "media_info": [{"kind": "image", "width": 320, "height": 240,
                                                         "phash": "ffff000000000000"}]},
            {"text": "b", "group": "g1", "media_info": [{"kind": "image", "width": 320, "height": 240,
                                                         "phash": "ffff000000000000"}]},
            {"text": "c", "group": "g2", "media_info": [{"kind": "image", "width": 640, "height": 480,
                                                         "phash": "ffff00000000000f"}]},
            {"text": "d", "group": "g3", "media_info": []}]
    image = channel_features(rows, rows)["image"]
    assert image[0, 2] == image[1, 2] == 4 and image[2, 2] == 4  # its own group's copy is not its neighbour
    assert np.isnan(image[3]).all() and abs(image[2, 0] - np.log(640 * 480)) < 1e-9 and image[0, 1] == 320 / 240


def test_the_media_text_is_read_back_from_stage_5s_ocr_cache(tmp_path):
    """What stage 5's OCR read is kept by the image's sha256 (assets/rules/media_text.TextCache): the audit and stage
    7 read it back there, without the OCR."""
    from assets.rules.media_text import TextCache
    from dagster_project.resources.media import MediaStore

    buf = io.BytesIO()
    Image.new("RGB", (320, 240), (30, 90, 200)).save(buf, "JPEG")
    store = MediaStore(str(tmp_path / "media"))
    stored = store.put_image(buf.getvalue())
    cache = TextCache(tmp_path / "ocr_cache.sqlite", reader=lambda jpeg: "Floodwaters in Lagos 2019")
    cache.read_text(store.read(stored.path))  # stage 5 reads the stored file
    cache.close()
    class Medium:
        kind, path, frame_paths = "image", stored.path, []

    reader = media_texts(str(tmp_path / "llm_cache.sqlite"), store)
    assert reader([Medium()]) == ["Floodwaters in Lagos 2019"] and reader.unread == 0
    reader.close()
    missing = MediaTexts(lambda data: "", lambda path: (_ for _ in ()).throw(FileNotFoundError(path)))
    assert missing([Medium()]) is None and missing.unread == 1
    assert media_texts(str(tmp_path / "llm_cache.sqlite"), None)([Medium()]) is None  # no store: unread


def test_the_card_names_what_natural_claims_alone_give_a_channel_above_chance_on_the_label():
    """A 3-bin figure above chance passes only up to what natural claims alone give the same channel: the card's
    cell says so, next to the figure."""
    def figure(accuracy):
        return {"accuracy": accuracy, "null_mean": 0.487, "margin": 0.028, "above_chance": accuracy > 0.515,
                "below_chance": False}

    channels = {"method": "bins + lr", "fluency_model": "5-gram", "gating": {"media_text": figure(0.51)},
                "vs_natural": {"media_text": figure(0.52)}, "label": {"media_text": figure(0.519)},
                "natural_label": {"media_text": {"accuracy": 0.524}}}
    row = next(line for line in _channels_md({"channels": channels}) if line.startswith("| media_text |"))
    assert row.endswith("| 0.519 vs 0.487 ± 0.028 (above); natural claims alone 0.524 |"), row
