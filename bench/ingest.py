"""Stages 1-2 (reviews, trusted_reviews) at scale, in memory: the ingestion path against a json.load-and-loop baseline.

    .venv/bin/python bench/ingest.py [--reviews 400000] [--workdir /tmp/veritas_bench_ingest]

Builds a DataFeed of N ClaimReviews by expanding the real records (the Arabic claims:search set, the IFCN CSV
rows and the AFP page's ClaimReview; new review URLs and shifted dates, real texts, ratings and publishers),
with the mess real feeds have: duplicates, null items, missing URLs, claim dates after the review date. Then it
runs, each in its own subprocess so that peak RSS is measured apart: the baseline (``json.load`` the whole
file and one loop that buckets the reviews by quarter) and the ingestion path (streamed elements, polars cleaning
and merging, once for all quarters; then each quarter's stage-1 table written and read back for stage 2).
``bench/backfill.py`` measures the same through Dagster (``veritas backfill``).
"""

import argparse
import copy
import csv
import json
import os
import resource
import subprocess
import sys
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = ROOT.parent / "shared" / "data" / "claimreview"
FIXTURES = ROOT / "tests" / "fixtures"
REGISTRY = ROOT / "registry" / "publishers.csv"

from tests.ingest_shapes import afp_claimreview, gfc_feed_items, ifcn_feed_items  # noqa: E402 (after the sys.path line)

# ---- the seed records: real ClaimReviews in feed shape ---------------------------------------------------------


def seed_items() -> list[dict]:
    """The real records: the full shared files when present, else the excerpts in tests/fixtures."""
    gfc_path = SHARED / "gfc_claims_search_ar_2023-2025.json"
    ifcn_path = SHARED / "ifcn_coronavirusfacts_sample_epfl.csv"
    if not gfc_path.exists():
        gfc_path, ifcn_path = FIXTURES / "gfc_claims_search_ar_excerpt.json", FIXTURES / "ifcn_excerpt.csv"
    claims = json.loads(gfc_path.read_text(encoding="utf-8"))
    with open(ifcn_path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return gfc_feed_items(claims) + ifcn_feed_items(rows) + [afp_claimreview()]


# ---- expansion ----------------------------------------------------------------------------------------------------

_DATE_KEYS = (("datePublished",), ("itemReviewed", "datePublished"))


def _shift(value, days: int):
    """Shift a real date value by whole days, keeping its written form (date-only, 'YYYY-MM-DD HH:MM', ISO Z)."""
    if not isinstance(value, str) or len(value) < 10:
        return value
    try:
        day = date.fromisoformat(value[:10]) + timedelta(days=days)
    except ValueError:
        return value
    return day.isoformat() + value[10:]


def _expand(item: dict, k: int) -> dict:
    out = copy.deepcopy(item)
    url = out.get("url")
    if isinstance(url, str):
        out["url"] = f"{url}{'&' if '?' in url else '?'}bench={k}"
    days = (k * 37) % 1500 - 750  # spread over about four years of quarters
    for path in _DATE_KEYS:
        holder = out
        for key in path[:-1]:
            holder = holder.get(key) if isinstance(holder.get(key), dict) else {}
        if path[-1] in holder:
            holder[path[-1]] = _shift(holder[path[-1]], days)
    return out


def build_feed(path: Path, n_reviews: int) -> dict:
    """Write a DataFeed of ``n_reviews`` ClaimReviews expanded from the seeds; returns what went in."""
    seeds = seed_items()
    made = {"reviews": 0, "duplicates": 0, "null_items": 0, "missing_url": 0, "claim_after_review": 0}
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"@context": "https://schema.org", "@type": "DataFeed", "dateModified": "%s", "dataFeedElement": [\n'
                 % datetime.now(timezone.utc).isoformat(timespec="seconds"))
        previous = None
        first = True
        k = 0
        while made["reviews"] < n_reviews:
            item = _expand(seeds[k % len(seeds)], k)
            if k % 50 == 7 and previous is not None:
                item = previous  # a review published twice in the feed (real feeds repeat records)
                made["duplicates"] += 1
            elif k % 400 == 11:
                item.pop("url", None)
                made["missing_url"] += 1
            elif k % 300 == 13 and isinstance(item.get("itemReviewed"), dict) and item.get("datePublished"):
                item["itemReviewed"]["datePublished"] = _shift(item["datePublished"][:10], 3)
                made["claim_after_review"] += 1
            element = {"@type": "DataFeedItem", "dateCreated": item.get("datePublished", ""), "item": [item]}
            fh.write(("" if first else ",\n") + json.dumps(element, ensure_ascii=False))
            first = False
            made["reviews"] += 1
            previous = item
            if k % 1000 == 500:
                fh.write(',\n{"@type": "DataFeedItem", "item": null}')
                made["null_items"] += 1
            k += 1
        fh.write("\n]}\n")
    made["bytes"] = path.stat().st_size
    made["seeds"] = len(seeds)
    return made


# ---- the two contenders (each runs in its own process) -------------------------------------------------------------


def _peak_rss_mb() -> float:
    """This process's peak RSS. VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def run_baseline(feed: Path, out: Path) -> dict:
    """The yardstick of issue 16: ``json.load`` the whole feed, then one Python loop that puts every review with a
    URL, a claim and a date in its quarter, once per (URL, claim) - no cleaning rules, no publisher matching."""
    start = time.perf_counter()
    with open(feed, "rb") as fh:
        payload = json.load(fh)
    quarters: dict[str, dict] = {}
    for element in payload.get("dataFeedElement") or []:
        items = element.get("item") if isinstance(element, dict) else None
        for item in items if isinstance(items, list) else [items]:
            if not isinstance(item, dict) or not item.get("url") or not item.get("claimReviewed"):
                continue
            reviewed = item.get("itemReviewed") if isinstance(item.get("itemReviewed"), dict) else {}
            day = str(reviewed.get("datePublished") or item.get("datePublished") or "")[:10]
            if len(day) < 7 or not day[:4].isdigit() or not day[5:7].isdigit():
                continue
            quarter = f"{day[:4]}Q{(int(day[5:7]) - 1) // 3 + 1}"
            quarters.setdefault(quarter, {})[(item["url"].strip(), " ".join(item["claimReviewed"].split()).casefold())] = item
    wall = time.perf_counter() - start
    return {"wall_s": wall, "reviews": sum(len(q) for q in quarters.values()), "quarters": len(quarters)}


def run_columnar(feed: Path, out: Path) -> dict:
    """Stages 1-2 for every quarter in memory: the feed parsed, cleaned and merged once, then each quarter's slice
    filtered by publisher, the stage-1 and stage-2 tables written per quarter as the assets do."""
    import polars as pl

    import assets.ingestion.sources  # noqa: F401 - module imports (httpx, the config, ...) are start-up: untimed
    from assets.ingestion.merging import merge_sources, quarter_slice
    from assets.ingestion.publishers import filter_trusted, load_registry

    start = time.perf_counter()
    merged = merge_sources([("datafeed", feed.name, str(feed))])
    publishers = load_registry(str(REGISTRY))
    n_reviews = n_trusted = n_bad = 0
    review_ids, trusted_ids = [], []
    for quarter in merged.counts["quarter"].to_list():
        reviews, bad, _ = quarter_slice(merged.reviews, merged.rejects.lazy(), merged.counts.lazy(), quarter)
        reviews.write_parquet(out.with_suffix(f".{quarter}.reviews.parquet"))
        trusted, _, _ = filter_trusted(pl.read_parquet(out.with_suffix(f".{quarter}.reviews.parquet")), publishers)
        trusted.write_parquet(out.with_suffix(f".{quarter}.trusted.parquet"))
        n_reviews, n_trusted, n_bad = n_reviews + reviews.height, n_trusted + trusted.height, n_bad + len(bad)
        review_ids += reviews["review_id"].to_list()
        trusted_ids += trusted["review_id"].to_list()
    wall = time.perf_counter() - start
    return {"wall_s": wall, "reviews": n_reviews, "quarantined": n_bad, "trusted": n_trusted,
            "quarters": merged.counts.height, "review_ids": _digest(review_ids), "trusted_ids": _digest(trusted_ids)}


def _digest(ids) -> str:
    import hashlib

    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()[:16]


def _child(kind: str, feed: str, out: str) -> None:
    result = (run_baseline if kind == "baseline" else run_columnar)(Path(feed), Path(out))
    result["peak_rss_mb"] = _peak_rss_mb()
    Path(out).write_text(json.dumps(result))


def _measure(kind: str, feed: Path, workdir: Path) -> dict:
    out = workdir / f"{kind}.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_OFFLINE_MODE": "true"}
    subprocess.run([sys.executable, __file__, "--child", kind, str(feed), str(out)], check=True, env=env)
    return json.loads(out.read_text())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reviews", type=int, default=400_000)
    ap.add_argument("--workdir", default="/tmp/veritas_bench_ingest")
    ap.add_argument("--skip-baseline", action="store_true")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    feed = workdir / f"feed_{args.reviews}.json"
    started = time.perf_counter()
    made = build_feed(feed, args.reviews)
    print(f"feed: {feed} {made['bytes'] / 1e6:.0f} MB, {made['reviews']:,} reviews from {made['seeds']:,} real records "
          f"({made['duplicates']:,} repeated, {made['missing_url']:,} without URL, {made['null_items']:,} null items, "
          f"{made['claim_after_review']:,} claim after review); built in {time.perf_counter() - started:.1f}s", flush=True)
    col = _measure("columnar", feed, workdir)
    print(f"ingestion: {col['wall_s']:.1f}s, peak RSS {col['peak_rss_mb']:.0f} MB; {col['reviews']:,} reviews in "
          f"{col['quarters']} quarters, {col['quarantined']:,} quarantined, {col['trusted']:,} trusted", flush=True)
    if args.skip_baseline:
        return 0
    base = _measure("baseline", feed, workdir)
    print(f"baseline (json.load + loop): {base['wall_s']:.1f}s, peak RSS {base['peak_rss_mb']:.0f} MB; "
          f"{base['reviews']:,} reviews in {base['quarters']} quarters", flush=True)
    print(f"time: {col['wall_s'] / base['wall_s']:.2f}x the baseline; memory: {col['peak_rss_mb'] / base['peak_rss_mb']:.2f} "
          f"of the baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
