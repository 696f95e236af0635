"""The real ClaimReview records of tests/fixtures in the shapes stage 1 reads (issue 3): the Fact Check Tools answers
and the IFCN CSV rows as DataFeed ClaimReviews, and the IFCN rows as claims:search answers. Used by the stage-1
tests and by bench/ingest.py, which expands them to a large feed."""

import csv
import gzip
import json
import re
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def ifcn_claim_text(row: dict) -> str:
    # the CSV's claim column is a cluster file name; the explanation makes the text specific
    cluster = row["claim"].removesuffix(".csv").replace("-", " ")
    return f"{cluster}: {row['explanation']}"


def gfc_feed_items(claims: list[dict]) -> list[dict]:
    """Fact Check Tools answers as DataFeed ClaimReviews, field for field (what the API does not say stays out)."""
    items = []
    for claim in claims:
        for review in claim.get("claimReview") or []:
            publisher = review.get("publisher") or {}
            item = {
                "@type": "ClaimReview",
                "url": review.get("url"),
                "claimReviewed": claim.get("text"),
                "author": {"@type": "Organization", "name": publisher.get("name", "")},
                "reviewRating": {"@type": "Rating", "alternateName": review.get("textualRating", "")},
                "itemReviewed": {"@type": "Claim"},
                "inLanguage": review.get("languageCode", ""),
                "name": review.get("title", ""),
            }
            if publisher.get("site"):
                item["author"]["url"] = f"https://{publisher['site']}/"
            if claim.get("claimant"):
                item["itemReviewed"]["author"] = {"@type": "Person", "name": claim["claimant"]}
            if review.get("reviewDate"):
                item["datePublished"] = review["reviewDate"]
            if claim.get("claimDate"):
                item["itemReviewed"]["datePublished"] = claim["claimDate"]
            items.append(item)
    return items


def ifcn_feed_items(rows: list[dict]) -> list[dict]:
    """IFCN CSV rows as DataFeed ClaimReviews; no inLanguage (the CSV names the language, the feed item does not)."""
    items = []
    for row in rows:
        item = {
            "@type": "ClaimReview",
            "url": row["fact_check_url"],
            "claimReviewed": ifcn_claim_text(row),
            "datePublished": row["date"],
            "author": {"@type": "Organization", "name": row["organization"]},
            "reviewRating": {"@type": "Rating", "alternateName": row["final_rating"]},
            "itemReviewed": {"@type": "Claim", "author": {"name": row["source"]}},
        }
        if row["source_url"].startswith(("http://", "https://")):
            item["itemReviewed"]["appearance"] = [{"url": row["source_url"]}]
        items.append(item)
    return items


def ifcn_api_claims(rows: list[dict]) -> list[dict]:
    """IFCN CSV rows as claims:search answers (language as the CSV names it, e.g. 'Spanish')."""
    return [
        {
            "text": ifcn_claim_text(row),
            "claimant": row["source"],
            "claimReview": [{
                "publisher": {"name": row["organization"]},
                "url": row["fact_check_url"],
                "reviewDate": row["date"] + "T00:00:00Z",
                "textualRating": row["final_rating"],
                "languageCode": row["fact_check_lang"],
            }],
        }
        for row in rows
    ]


def real_claimreviews() -> list[dict]:
    """The 153 real ClaimReviews of the fixtures as feed items: 74 Fact Check Tools answers (Arabic), 79 IFCN rows."""
    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return gfc_feed_items(claims) + ifcn_feed_items(rows)


def feed(items: list) -> dict:
    """A DataFeed with one element per item."""
    return {"@context": "https://schema.org", "@type": "DataFeed",
            "dataFeedElement": [{"@type": "DataFeedItem", "item": [it]} for it in items]}


def afp_claimreview() -> dict:
    """The ClaimReview in the @graph of the real AFP page."""
    html = gzip.decompress((FIXTURES / "afp_B2LA2G3.html.gz").read_bytes()).decode("utf-8")
    for block in re.findall(r'<script[^>]+application/ld\+json[^>]*>(.*?)</script>', html, re.DOTALL):
        for node in json.loads(block).get("@graph", []):
            if node.get("@type") == "ClaimReview":
                return node
    raise LookupError("no ClaimReview in the AFP fixture")
