"""How many real claims the verdict-leak check drops as written (the fact-checker's own wording, the fallback when a
rewrite fails): the AVeriTeC dev set (500 English claims) and the Arabic ClaimReview sample (1,762 claims, ar/en/my).

AVeriTeC has no textual ratings: "with ratings" adds the 68 real rating strings of tests/fixtures/
factors_mapped_verdicts.txt as the quarter's English rating phrases. The ClaimReview claims carry their own rating
and title, and the quarter's phrases are those of all its reviews. Run: .venv/bin/python bench/verdict_leaks.py
[--list] (the claims dropped, with the word).
"""

import argparse
import gzip
import json
from collections import Counter
from pathlib import Path

from assets.rules.claim_text import LeakVocabulary, check_claim_text, verdict_leak
from dagster_project.stage_settings import ClaimRules

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
CLAIMREVIEW = Path("/work/shared/data/claimreview/gfc_claims_search_ar_2023-2025.json")


class Review:
    def __init__(self, rating_text: str, language: str):
        self.rating_text, self.language = rating_text, language


def averitec() -> list[dict]:
    with gzip.open(FIXTURES / "averitec_dev.json.gz", "rt", encoding="utf-8") as f:
        return [{"text": c["claim"], "language": "en", "rating": "", "title": ""} for c in json.load(f)]


def claimreview(path: Path) -> list[dict]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for claim in data["claims"] if isinstance(data, dict) else data:
        review = (claim.get("claimReview") or [{}])[0]
        out.append({"text": claim.get("text", ""), "language": review.get("languageCode", ""),
                    "rating": review.get("textualRating", ""), "title": review.get("title", "")})
    return out


def drops(claims: list[dict], leaks: LeakVocabulary | None) -> list[tuple[dict, str]]:
    claim_rules = ClaimRules()
    out = []
    for c in claims:
        if check_claim_text(c["text"], [], c["language"], claim_rules, leaks, c["rating"], c["title"],
                            c["text"]) == "verdict_leak":
            word = verdict_leak(c["text"], c["language"], leaks, c["rating"], c["title"], c["text"])
            out.append((c, word.casefold()))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    ratings = LeakVocabulary({"en": set(FIXTURES.joinpath("factors_mapped_verdicts.txt").read_text().split("\n")) - {""}})
    sets = [("AVeriTeC dev", averitec(), ratings)]
    if CLAIMREVIEW.is_file():
        claims = claimreview(CLAIMREVIEW)
        sets.append(("ClaimReview ar", claims, LeakVocabulary.from_reviews(
            [Review(c["rating"], c["language"]) for c in claims])))
    for name, claims, with_ratings in sets:
        for label, leaks in (("scheme only", None), ("with ratings", with_ratings)):
            found = drops(claims, leaks)
            words = Counter(w for _, w in found)
            print(f"{name}, {label}: {len(found)} of {len(claims)} dropped; {dict(words.most_common(12))}")
            if args.list:
                for c, w in found:
                    print(f"    [{w}] {c['text'][:160]}")


if __name__ == "__main__":
    main()
