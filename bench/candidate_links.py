"""Issue 26 bench: stage 4's candidate links on real fact-check pages against hand labels, per publisher.

    .venv/bin/python bench/candidate_links.py [--misses]

Every page of ``tests/fixtures/factcheck_pages`` goes through stages 1-3 as the pipeline runs them: the page's
ClaimReview markup (extruct) to a cleaned review row (stage 1's rules, dates included), the article (trafilatura,
the length rules and the wall detection of stage 3), then ``candidate_links``. A page that yields no article is
reported with its reason. Candidates and labels are compared by ``links.canonical`` (one key per post, tracking
parameters dropped). Targets (issue 26): recall >= 0.9 of the labelled appearances the page links, precision
>= 0.8.

The publishers are split in two fixed halves (sorted by name, alternately): the rule's thresholds
(``links.cited_as_evidence``) were chosen on the "tuning" half and are reported on the "held-out" half too.
"""

import argparse
import gzip
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.ingestion.cleaning import clean_row  # noqa: E402
from assets.ingestion.sources import claimreview_to_row, claimreviews_from_page  # noqa: E402
from assets.scraping.appearances import candidate_links  # noqa: E402
from assets.scraping.articles import build_article  # noqa: E402
from assets.scraping.links import canonical  # noqa: E402
from dagster_project.stage_settings import ScrapingSettings  # noqa: E402
from schemas.records import Article, TrustedReview  # noqa: E402

CORPUS = ROOT / "tests" / "fixtures" / "factcheck_pages"


@dataclass
class PageResult:
    name: str
    publisher: str
    language: str
    review_reason: str = ""  # why stage 1 kept no review of the page ("" when one was kept)
    article_reason: str = ""  # why stage 3 gave no article ("" when it gave one)
    candidates: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    @property
    def hits(self) -> set[str]:
        return {canonical(u) for u in self.candidates} & {canonical(u) for u in self.labels}

    @property
    def false_positives(self) -> list[str]:
        gold = {canonical(u) for u in self.labels}
        return [u for u in self.candidates if canonical(u) not in gold]

    @property
    def misses(self) -> list[str]:
        found = {canonical(u) for u in self.candidates}
        return [u for u in self.labels if canonical(u) not in found]


def load_corpus(corpus: Path = CORPUS) -> dict:
    return json.loads((corpus / "labels.json").read_text(encoding="utf-8"))["pages"]


def page_html(entry: dict, corpus: Path = CORPUS) -> str:
    return gzip.decompress((corpus / entry["file"]).read_bytes()).decode("utf-8")


def stage1_review(html: str, url: str, publisher_id: str) -> tuple[TrustedReview, str]:
    """The page's first ClaimReview as stage 1 cleans it; without a usable one, a review of the page URL alone
    (so stage 3 still runs) and the reason stage 1 gave."""
    reason = "page_without_claimreview"
    for i, item in enumerate(claimreviews_from_page(html, url)):
        try:
            row = claimreview_to_row(item, f"page:{url}#{i}")
        except ValueError as err:
            reason = str(err)
            continue
        row, reason = clean_row({**row, "sources": [f"page:{url}#{i}"]}, None)
        if row is not None:
            return TrustedReview(**row, publisher_id=publisher_id), ""
    row, _ = clean_row({**claimreview_to_row({"url": url, "claimReviewed": "(no usable ClaimReview)",
                                              "datePublished": "2026-01-01"}, "bench"), "sources": ["bench"]}, None)
    return TrustedReview(**row, publisher_id=publisher_id), reason


def run_page(name: str, entry: dict, corpus: Path = CORPUS) -> tuple[PageResult, Article | None]:
    html = page_html(entry, corpus)
    review, review_reason = stage1_review(html, entry["url"], entry["publisher_id"])
    article, reason = build_article(review, entry["url"], html, ScrapingSettings())
    result = PageResult(name, entry["publisher"], entry["language"], review_reason, reason,
                        labels=list(entry["appearances"]))
    if article is not None:
        result.candidates = candidate_links(review, article)
    return result, article


def run_corpus(corpus: Path = CORPUS) -> list[PageResult]:
    return [run_page(name, entry, corpus)[0] for name, entry in load_corpus(corpus).items()]


def scores(results: list[PageResult]) -> dict[str, dict]:
    """Per publisher and overall: pages, labelled appearances, candidates, hits, precision, recall."""
    groups: dict[str, list[PageResult]] = defaultdict(list)
    for r in results:
        groups[r.publisher].append(r)
        groups["all"].append(r)
    out = {}
    for name, rows in groups.items():
        hits = sum(len(r.hits) for r in rows)
        cands = sum(len(r.candidates) for r in rows)
        gold = sum(len(r.labels) for r in rows)
        out[name] = {"pages": len(rows), "languages": sorted({r.language for r in rows}), "labelled": gold,
                     "candidates": cands, "hits": hits,
                     "precision": hits / cands if cands else None, "recall": hits / gold if gold else None}
    return out


def half(publisher: str, publishers: list[str]) -> str:
    """"tuning" for the 1st, 3rd, ... publisher by sorted name, "held-out" for the others."""
    return "tuning" if sorted(publishers).index(publisher) % 2 == 0 else "held-out"


def halves(results: list[PageResult]) -> dict[str, dict]:
    """``scores`` of each half of the publishers and of all."""
    publishers = sorted({r.publisher for r in results})
    out = {}
    for name in ("tuning", "held-out"):
        part = [r for r in results if half(r.publisher, publishers) == name]
        out[name] = {**scores(part)["all"], "publishers": len({r.publisher for r in part})}
    out["all"] = {**scores(results)["all"], "publishers": len(publishers)}
    return out


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def table(results: list[PageResult]) -> str:
    rows = scores(results)
    lines = ["| publisher | pages | languages | labelled | candidates | precision | recall |", "|---|---|---|---|---|---|---|"]
    for name in sorted(rows, key=lambda n: (n == "all", n.lower())):
        s = rows[name]
        label = "**all**" if name == "all" else name
        lines.append(f"| {label} | {s['pages']} | {' '.join(s['languages']) if name != 'all' else len(s['languages'])} "
                     f"| {s['labelled']} | {s['candidates']} | {_fmt(s['precision'])} | {_fmt(s['recall'])} |")
    return "\n".join(lines)


def halves_table(results: list[PageResult]) -> str:
    lines = ["| half | publishers | pages | labelled | candidates | precision | recall |", "|---|---|---|---|---|---|---|"]
    for name, s in halves(results).items():
        lines.append(f"| {name} | {s['publishers']} | {s['pages']} | {s['labelled']} | {s['candidates']} "
                     f"| {_fmt(s['precision'])} | {_fmt(s['recall'])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list every false positive and every miss")
    args = parser.parse_args()
    results = run_corpus()
    print(table(results))
    print()
    print(halves_table(results))
    print()
    for r in results:
        if r.review_reason or r.article_reason:
            print(f"{r.name}: stage 1 {r.review_reason or 'ok'}, stage 3 {r.article_reason or 'ok'}")
        if args.misses:
            for url in r.false_positives:
                print(f"  FP {r.name} {url}")
            for url in r.misses:
                print(f"  MISS {r.name} {url}")


if __name__ == "__main__":
    main()
