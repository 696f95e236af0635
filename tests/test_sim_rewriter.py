"""The simulated writer and checker of stage 7 (issue 33): each planted claim's rewrites in four styles
(dagster_project/simulation/rewrites.py), the panel's draw of a style per claim and round, the refine round, the
checker's answers, and the raters and the rehearsal knowing every style as the claim's Intact variant. The claims
are real: tests/fixtures/rehearsal (en, ar) and the ClaimReview claims of tests/fixtures/factcheck_pages (de, fr,
es, pt)."""

import gzip
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from assets.rules.claim_text import changed_language, verdict_leak
from assets.rules.length import count_sentences, count_words
from dagster_project.simulation.panel import (
    DEFAULT_MEMBERS,
    Panel,
    PanelConfig,
    parse_styles,
)
from dagster_project.simulation.quarter import (
    QuarterConfig,
    fits,
    pick_records,
    planted_rewrites,
    registry_domains,
)
from dagster_project.simulation.records import claim_key, load_records
from dagster_project.simulation.rewrites import (
    CORRECTION,
    NEGATION,
    STYLES,
    rewrites,
    script_language,
    vocabulary,
)

PAGES = Path(__file__).parent / "fixtures" / "factcheck_pages"
# words that make a rewrite a denial or a hedge (the tells a word rule catches), and correction phrasing
NEGATION_OR_HEDGE = {
    "en": r"\b(no|not|never|none|evidence|false|allegedly|reportedly|claimed|unproven|misleading)\b",
    "ar": r"(?<!\w)(لا|ليس|ليست|غير|لم|لن|دليل|يزعم|مزعوم)(?!\w)",
}
CORRECTION_PHRASE = {"en": r"\b(in reality|actually)\b", "ar": r"(في الواقع|الحقيقة أن)"}


@pytest.fixture(scope="module")
def quarter():
    """The rewrites of every claim a small real-mix quarter of the committed records plants."""
    config = QuarterConfig(reviews=600)
    picked = pick_records(load_records(prefer_shared=False), config, registry_domains())
    claims = {claim_key(r["claim"]): r for r in picked}
    return claims, planted_rewrites(picked, config.seed)


def added(pattern: str, text: str, original: str) -> set[str]:
    return {m.casefold() for m in re.findall(pattern, text, re.I)} - {
        m.casefold() for m in re.findall(pattern, original, re.I)}


def test_every_style_is_written_for_real_claims_within_the_limits(quarter):
    claims, written = quarter
    languages = Counter(script_language(r["claim"], r["language"]) for r in claims.values())
    assert languages["en"] > 250 and languages["ar"] > 60, languages
    changed = Counter()
    for key, r in claims.items():
        lang = script_language(r["claim"], r["language"])
        texts = written[key]["rewrites"]
        assert set(texts) == set(STYLES)
        for style, text in texts.items():
            assert count_words(text) <= 70 and count_sentences(text, lang) <= 2, (style, text)
            assert not verdict_leak(text, lang) and '"' not in text, (style, text)
            assert not changed_language(text, lang), (style, text)  # stage 7 refuses a rewrite in another language
            assert claim_key(text) != key and claim_key(text) not in claims, (style, text)
        assert texts["negation"].startswith(NEGATION[lang].split("{")[0])
        assert any(texts["correction"].startswith(t.split("{")[0]) for t in CORRECTION[lang]), texts["correction"]
        # the correction phrasing adds no negation or hedge word; the minimal edit and the paraphrase add neither
        # that nor correction phrasing
        for style in ("correction", "minimal", "paraphrase"):
            assert not added(NEGATION_OR_HEDGE[lang], texts[style], r["claim"]), (style, texts[style])
        for style in ("minimal", "paraphrase"):
            assert not added(CORRECTION_PHRASE[lang], texts[style], r["claim"]), (style, texts[style])
        swap = written[key]["swap"]
        if swap:  # one detail swapped, the rest the claim's own words
            old, new = swap
            assert texts["minimal"] == r["claim"].replace(old, new, 1) or texts["minimal"].count(new) > r["claim"].count(new)
            changed["swapped"] += 1
            changed["paraphrased"] += texts["paraphrase"] != texts["minimal"]
        changed[lang] += 1
    assert changed["swapped"] >= 0.99 * len(claims)
    assert changed["paraphrased"] >= 0.6 * changed["swapped"], changed


def test_a_number_a_year_or_a_name_is_swapped_from_the_quarters_own_words():
    claims = [("A photo shows the flooded airport in Dubai in 2019.", "en"),
              ("Floods hit Lagos and Accra after 300 millimetres of rain.", "en"),
              ("صورة تظهر فيضانات في مدينة دبي عام 2019.", "ar")]
    words = vocabulary(claims)
    assert "Lagos" in words["en"]["names"] and "Dubai" in words["en"]["names"]
    for claim, language in claims:
        made = rewrites(claim, language, words, seed=13)
        old, new = made["swap"]
        assert old in claim and new not in claim and made["rewrites"]["minimal"] == claim.replace(old, new, 1)
        if old.isdigit():
            assert new.isdigit() and len(new) == len(old)
        else:
            assert new in words[language]["names" if language == "en" else "words"]


def test_media_references_stay_in_every_rewrite():
    claim = "<image:0> A photo shows the flooded airport in Dubai in 2019."
    made = rewrites(claim, "en", vocabulary([(claim, "en"), ("Floods hit Lagos.", "en")]), seed=13)
    for style, text in made["rewrites"].items():
        assert text.startswith("<image:0> ") and text.count("<image:0>") == 1, (style, text)


def test_claims_in_the_other_languages_of_the_real_pages():
    """The ClaimReview claims of the real German, French, Spanish and Portuguese pages: every style in the claim's
    language and within the limits (the swaps drawn from the words of the pages' claims and titles)."""
    labels = json.loads((PAGES / "labels.json").read_text())["pages"]
    claims, titles = [], []
    for page in labels.values():
        if page["language"] not in ("de", "fr", "es", "pt"):
            continue
        html = gzip.decompress((PAGES / page["file"]).read_bytes()).decode("utf-8", "replace")
        title = re.search(r"<title[^>]*>([^<]+)</title>", html)
        if title:
            titles.append((" ".join(title.group(1).split()), page["language"]))
        match = re.search(r'"claimReviewed"\s*:\s*("(?:[^"\\]|\\.)*")', html)
        if match:
            text = " ".join(json.loads(match.group(1)).replace('"', "").split())
            if fits(text, page["language"]):
                claims.append((text, page["language"]))
    assert {lang for _, lang in claims} == {"de", "fr", "es", "pt"}, claims
    words = vocabulary(claims + titles)
    for claim, lang in claims:
        made = rewrites(claim, lang, words, seed=13)
        assert made["swap"], claim
        for style, text in made["rewrites"].items():
            assert count_words(text) <= 70 and count_sentences(text, lang) <= 2 and not changed_language(text, lang)
        assert made["rewrites"]["correction"].startswith(CORRECTION[lang][0].split("{")[0])


# ---- the panel ------------------------------------------------------------------------------------------------------
TRUTH = {"claims": {
    "a": {"claim": "A photo shows the flooded airport in Dubai last week.", "category": "compromised_ooc",
          "rewrites": {"negation": "There is no evidence that a photo shows the flooded airport in Dubai last week.",
                       "correction": "In reality, a photo shows the flooded airport in Lagos last week.",
                       "minimal": "A photo shows the flooded airport in Lagos last week.",
                       "paraphrase": "Last week, a picture showed the flooded airport in Lagos."}},
    "b": {"claim": "The city council approved the new park in March.", "category": "compromised_veracity",
          "rewrites": {"negation": "There is no evidence that the city council approved the new park in March.",
                       "correction": "Actually, the city council approved the new park in June.",
                       "minimal": "The city council approved the new park in June.",
                       "paraphrase": "In June, the city council approved the new park."}},
}}
MEDIA = [{"kind": "image", "alt": "", "caption": "", "source": "https://pbs.twimg.com/media/S1.jpg"}]
BASE = {"language": "en", "claim_date": "2025-07-02", "evidence": "The article."}
REFINE = '\nPrevious rewrite (round {n}): "{text}"\nWhy it was refused: reads as a correction notice, not as a post.\n'


def careful_panel(**config) -> Panel:
    from dataclasses import replace

    members = tuple(replace(m, flip=0.0) for m in DEFAULT_MEMBERS)
    return Panel(TRUTH, PanelConfig(members=members, latency_median_s=0.0, faults={}, **config))


def ask(panel: Panel, member: str, prompt: str, extra_user: str = "", **inputs) -> dict:
    from prompts import render

    messages = render(prompt, media=MEDIA, **inputs)
    if extra_user:  # the refine round's lines, as the critique-and-refine loop puts them in the user message
        user = next(m for m in messages if m["role"] == "user")
        if isinstance(user["content"], list):
            user["content"][0]["text"] += extra_user
        else:
            user["content"] += extra_user
    status, message, *_ = panel(member, {"messages": messages})
    assert status == 200
    panel.settle(True)
    return json.loads(message["content"])


def rewrite(panel: Panel, claim: str, extra_user: str = "") -> str:
    return ask(panel, "sim-alpha", "rectify_claim", extra_user, decisive_property="veracity", justification="",
               max_words=70, max_sentences=2, previous="", critique="", round=1, **{**BASE, "claim": claim})["claim"]


def test_the_shares_hold_over_many_claims():
    panel = careful_panel()
    drawn = Counter(panel.rewrite_style({"claim": f"claim {i}"}, "")[0] for i in range(4000))
    for style, share in PanelConfig().rewrite_styles.items():
        assert abs(drawn[style] / 4000 - share) < 0.03, drawn
    assert sum(PanelConfig().rewrite_styles[s] for s in ("negation", "correction")) >= 1 / 3  # templates: a third
    only = careful_panel(rewrite_styles={"negation": 0.5, "correction": 0.5})
    assert {only.rewrite_style({"claim": f"claim {i}"}, "")[0] for i in range(200)} == {"negation", "correction"}


@pytest.mark.parametrize("styles, expected", [({"negation": 0.5, "correction": 0.5}, 0.7),
                                              (None, 0.7 + 0.3 * 0.6)])
def test_a_refine_round_takes_the_critique_at_about_refine_uptake(styles, expected):
    """On a refine round the writer answers minimal or paraphrase with refine_uptake (0.7), else draws from the
    shares again: with templates only, non-template answers are refine_uptake; with the default shares 0.7 + 0.3 x
    0.6."""
    panel = careful_panel(**({"rewrite_styles": styles} if styles else {}))
    user = REFINE.format(n=1, text="There is no evidence that ...")
    draws = [panel.rewrite_style({"claim": f"claim {i}"}, user) for i in range(4000)]
    assert {r for _, r in draws} == {2}  # "Previous rewrite (round 1)": this is round 2
    plain = sum(s in ("minimal", "paraphrase") for s, _ in draws) / len(draws)
    assert abs(plain - expected) < 0.03, plain
    if styles:  # minimal and paraphrase have no share: the writer who takes the critique writes the minimal edit
        assert {s for s, _ in draws} <= {"negation", "correction", "minimal"}
    # without the critique line it is no refine round; each round draws afresh
    assert panel.rewrite_style({"claim": "x"}, REFINE.split("\nWhy")[0])[1] == 1  # stage 7's first round
    assert panel.rewrite_style({"claim": "x"}, REFINE.format(n=1, text="..."))[1] == 2


def test_the_rewrite_answer_comes_through_the_real_prompt_and_is_counted():
    panel = careful_panel(rewrite_styles={"negation": 1.0}, refine_uptake=1.0)
    claim = "<image:0> " + TRUTH["claims"]["a"]["claim"]
    first = rewrite(panel, claim)
    assert first == TRUTH["claims"]["a"]["rewrites"]["negation"]
    again = rewrite(panel, claim, REFINE.format(n=1, text=first))
    assert again == TRUTH["claims"]["a"]["rewrites"]["minimal"]  # took the critique
    counters = panel.counters()
    assert counters["rewrite_styles"] == {"minimal": 1, "negation": 1}
    assert counters["refine_rewrite_styles"] == {"minimal": 1} and counters["rewrite_rounds"] == {"1": 1, "2": 1}


def test_the_checker_refuses_the_negation_template_with_a_critique_and_passes_the_others():
    from schemas.answers import RectifiedCheckAnswer, json_schema

    panel = careful_panel()
    original = TRUTH["claims"]["a"]["claim"]
    schema = json_schema(RectifiedCheckAnswer)
    assert schema["properties"]["critique"]["maxLength"] <= 300 and "critique" in schema["required"]
    for style, text in TRUTH["claims"]["a"]["rewrites"].items():
        answer = ask(panel, "sim-beta", "check_rectified", original=original, claim="<image:0> " + text, **BASE)
        RectifiedCheckAnswer.model_validate(answer)
        if style == "negation":
            assert answer["consistent"] == "yes" and answer["shareable"] == "no"
            assert "correction notice" in answer["critique"] and "claim's own words" in answer["critique"]
        else:  # correction phrasing passes the simulated checker: the text classifier has real work
            assert answer == {"consistent": "yes", "shareable": "yes", "critique": ""}, (style, answer)
    # a text that is none of the claim's rewrites (another claim's, or made up) is not consistent
    for text in (TRUTH["claims"]["b"]["rewrites"]["minimal"], "The airport was closed for a week."):
        answer = ask(panel, "sim-beta", "check_rectified", original=original, claim=text, **BASE)
        assert answer["consistent"] == "no" and answer["critique"]


@pytest.mark.parametrize("style", STYLES)
def test_the_raters_and_the_rehearsal_know_every_style_as_the_intact_variant(style):
    from dagster_project.simulation.run import planted

    panel = careful_panel()
    text = TRUTH["claims"]["b"]["rewrites"][style]
    rated = ask(panel, "sim-gamma", "rate_claim", property="veracity", **{**BASE, "claim": text})
    assert rated["category"] == "positive"
    assert ask(panel, "sim-gamma", "rate_claim", property="veracity",
               **{**BASE, "claim": TRUTH["claims"]["b"]["claim"]})["category"] == "negative"
    truth = {**TRUTH["claims"]["b"], "bin3": "compromised", "decisive_property": "veracity"}
    by_url = {"https://example.org/r": truth}
    assert planted({"text": text, "review_url": "https://example.org/r"}, TRUTH, by_url) == (
        "intact", "context_coverage", True)
    assert planted({"text": truth["claim"], "review_url": "https://example.org/r"}, TRUTH, by_url)[2] is False
    assert panel.counters()["unmatched"] == {}


def test_the_styles_are_configured_by_name():
    assert parse_styles("negation=0.5,correction=0.5") == {"negation": 0.5, "correction": 0.5}
    with pytest.raises(ValueError):
        parse_styles("template=1")
    with pytest.raises(ValueError):
        PanelConfig(rewrite_styles={"negation": 0.0})
    with pytest.raises(ValueError):
        PanelConfig(refine_uptake=1.5)
