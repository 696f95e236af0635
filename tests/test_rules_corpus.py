"""The labelled real claims of tests/fixtures/rules/ (issue 48, section 2), and every rule of stages 5-7 that drops or
changes a claim without asking a model held to the issue's target on them: precision at least 0.98 in every language
with at least 20 labelled cases (bench/rules.py prints the whole table)."""

import gzip
import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

import pytest

from bench.rules import DROPPING, MIN_CASES, MIN_PRECISION, held_out, load, measure, read

FIXTURES = Path(__file__).parent / "fixtures"
RULES = FIXTURES / "rules"
LABELS = {"report": bool, "verdict": bool, "sentences": int, "too_long": bool, "graphic": bool, "stamp": bool,
          "language": str}
KINDS = {"claim", "title", "sentence", "caption", "alt", "ocr_line"}


@pytest.fixture(scope="module")
def labelled() -> tuple[list[dict], list[dict]]:
    return load()


def test_the_set_holds_600_real_claims_in_the_languages_the_issue_names(labelled):
    records, pairs = labelled
    real = [r for r in records if "derived_from" not in r]
    assert len(real) >= 600 and len({r["id"] for r in records}) == len(records)
    languages = Counter(r["labels"]["language"] for r in records)
    for language in ("hi", "th", "nb", "nn", "tl", "ar", "pt", "es", "fr", "de", "en"):
        assert languages[language] >= MIN_CASES, language
    assert sum(n >= MIN_CASES for n in languages.values()) >= 8
    assert {"ceb", "yue"} <= set(languages)  # the hard cases the issue names
    for r in records:
        assert r["text"].strip() and r["origin"] and r["kind"] in KINDS, r["id"]
        assert {k: type(v) for k, v in r["labels"].items()} == LABELS, r["id"]
        if "derived_from" in r:
            assert r["derived_from"] and "derived" in r["origin"], r["id"]
    for p in pairs:
        assert p["a"].strip() and p["b"].strip() and isinstance(p["same"], bool) and p["origin_a"] and p["origin_b"]
    assert {p["kind"] for p in pairs} >= {"repost", "rewording", "negation", "hedge", "contraction", "other"}


def squashed(text: str) -> str:
    """A text without whitespace or the link markers pages put in sentences ("( 1 , 2 )"), in NFC."""
    markers = r"\(\s*(?:\d+\s*,?\s*|\.\.\.\s*|veja aqui\s*|hier\s*,?\s*)+\)"
    text = re.sub(markers, "", unicodedata.normalize("NFC", text))
    return re.sub(r"\s+", "", text)


def test_the_real_texts_are_their_sources_own(labelled):
    """Every real text is copied unchanged from a source that ships with the project (or, for the 5Pils and Fact
    Check Tools records outside the excerpts, is checked where /work/shared/data is present)."""
    from bs4 import BeautifulSoup

    records, _ = labelled
    with gzip.open(FIXTURES / "averitec_dev.json.gz", "rt", encoding="utf-8") as f:
        averitec = [c["claim"] for c in json.load(f)]
    checked = 0
    pages: dict[str, str] = {}
    for r in records:
        if r["id"].startswith("en-averitec-"):
            assert r["text"] == averitec[int(r["id"].rsplit("-", 1)[1])].strip(), r["id"]
            checked += 1
        elif r["origin"].startswith("fact-check page"):
            path = re.search(r"tests/fixtures/factcheck_pages/(\S+)", r["origin"]).group(1)
            if path not in pages:
                with gzip.open(FIXTURES / "factcheck_pages" / path, "rt", encoding="utf-8", errors="replace") as f:
                    html = f.read()
                soup = BeautifulSoup(html, "html.parser")
                texts = [html, soup.get_text(" "), *(i.get("alt") or "" for i in soup.find_all("img"))]
                for script in soup.find_all("script", type="application/ld+json"):  # the ClaimReview, unescaped
                    try:
                        texts.append(json.dumps(json.loads(script.string or ""), ensure_ascii=False))
                    except ValueError:
                        pass
                pages[path] = squashed(" ".join(texts).replace('\\"', '"').replace("&#039;", "'"))
            text = squashed(r["text"])
            assert text in pages[path] or text.replace("'", "&#039;") in pages[path], r["id"]
            checked += 1
    excerpt = {c["claim"] for c in json.loads((FIXTURES / "5pils_test_excerpt.json").read_text())}
    gfc = {c["text"] for name in ("gfc_claims_search_ar_excerpt.json", "gfc_claims_verdict_words.json")
           for c in json.loads((FIXTURES / name).read_text())}
    shared = Path("/work/shared/data")
    if (shared / "image_text" / "5pils_test.json").is_file():
        for part in ("test", "val", "train"):
            excerpt |= {c["claim"] for c in json.loads((shared / "image_text" / f"5pils_{part}.json").read_text())}
    if (shared / "claimreview" / "gfc_claims_search_ar_2023-2025.json").is_file():
        sample = json.loads((shared / "claimreview" / "gfc_claims_search_ar_2023-2025.json").read_text())
        gfc |= {c["text"] for c in sample}
    for r in records:
        source = excerpt if r["id"].startswith("en-5pils-") else gfc if r["id"].startswith("ar-gfc-") else None
        if source is not None and r["text"] in source:
            checked += 1
    assert checked >= 480  # AVeriTeC and the pages alone: 188 + 256; more where the shared data is present


def test_every_rule_that_drops_without_a_model_meets_the_target_in_every_language(labelled):
    """Issue 48's target, on the labelled set: a rule that drops a claim (or a medium, or a rewrite) without asking a
    model has precision at least 0.98 in every language where it has at least 20 labelled cases."""
    results, wrong = measure(*labelled)
    assert set(DROPPING) <= set(results)
    failures = {(rule, language): (s["precision"], wrong[rule]["misfires"])
                for rule, by_language in results.items() if rule in DROPPING
                for language, s in by_language.items()
                if language != "all" and s["cases"] >= MIN_CASES and s["precision"] is not None
                and s["precision"] < MIN_PRECISION}
    assert failures == {}
    # and the rules catch what they are for: the report, sentence and stamp rules most of their positives
    assert results["reports_a_claim"]["all"]["recall"] >= 0.85
    assert results["verdict_stamp"]["all"]["recall"] >= 0.9
    assert results["too_many_sentences"]["all"]["recall"] >= 0.9


def test_the_report_rule_holds_on_the_samples_labelled_after_it():
    """heldout.jsonl's second audit was drawn and labelled after the fixes and never used to change a rule."""
    rows = [line for line in held_out().splitlines() if line.startswith("| 2 |")]
    assert {line.split("|")[2].strip() for line in rows} == {"ar", "en"}
    for line in rows:
        precision, misfires = line.split("|")[6].strip(), int(line.split("|")[8])
        assert misfires == 0 and float(precision) >= MIN_PRECISION, line
    assert len(read("heldout.jsonl")) >= 150


def test_the_guide_says_who_labelled_how_and_what_is_derived():
    guide = (RULES / "GUIDE.md").read_text(encoding="utf-8")
    assert "by reading each text" in guide and "not checked by a second person" in guide
    assert "not by a rule" in guide and "derived" in guide and "development set" in guide
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    assert "rules/claims.jsonl" in readme and "rules/GUIDE.md" in readme
