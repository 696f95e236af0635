"""Stage 2: keep reviews by professional fact-checkers (active IFCN or EFCSN signatories)."""

import csv
import io
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from urllib.parse import urlsplit

import dagster as dg

from assets.common import StageYield, count, finish_stage, load_upstream, quarter_of_context, stage_asset
from assets.ingestion.reviews import mix_metadata
from dagster_project.config import PipelineResource
from dagster_project.resources.store import StoreResource
from schemas.records import Publisher, Review, TrustedReview

STAGE = "trusted_reviews"


def load_registry(path: str) -> list[Publisher]:
    """The shipped publisher registry (CSV; list fields are ';'-separated)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [
            Publisher(
                **{k: v for k, v in row.items() if k not in ("aliases", "domains")},
                aliases=[a for a in row["aliases"].split(";") if a],
                domains=[d.lower() for d in row["domains"].split(";") if d],
            )
            for row in csv.DictReader(fh)
        ]


def _name_key(name: str) -> str:
    return re.sub(r"[\W_]+", "", unicodedata.normalize("NFKC", name).casefold())


def host_of(url: str) -> str:
    """The lower-case host without ``www.``; also for a bare host such as the Fact Check Tools ``site``."""
    url = (url or "").strip()
    try:
        host = urlsplit(url if "//" in url else "//" + url).hostname or ""
    except ValueError:  # e.g. an unclosed IPv6 bracket: no usable host
        return ""
    host = host.lower().rstrip(".")
    return host[4:] if host.startswith("www.") else host


@lru_cache(maxsize=1)
def _extractor():
    import tldextract

    # the snapshot bundled with tldextract, never a download; private suffixes make x.blogspot.com its own site
    return tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, include_psl_private_domains=True)


@lru_cache(maxsize=65536)
def registered_domain(host: str) -> str:
    """The registered domain of a host (``factuel.afp.com`` -> ``afp.com``); the host itself when it has none."""
    parts = _extractor()(host)
    return ".".join(p for p in (parts.domain, parts.suffix) if p) if parts.domain and parts.suffix else host


def unknown_key(url: str, name: str) -> str:
    """How an unmatched publisher is reported: its registered domain, else its name."""
    host = host_of(url)
    return registered_domain(host) if host else name


class PublisherIndex:
    """Finds a review's publisher by the review URL's host (the most specific registered domain or subdomain wins,
    never a bare public suffix), then by the publisher site, then by name or alias."""

    def __init__(self, publishers: list[Publisher]):
        self.by_domain = {d: p for p in publishers for d in p.domains}
        self.by_name = {_name_key(n): p for p in publishers for n in [p.name, *p.aliases] if _name_key(n)}

    def _by_host(self, host: str) -> Publisher | None:
        if not host:
            return None
        floor = registered_domain(host).count(".")  # labels above the registered domain are never tried
        labels = host.split(".")
        for i in range(max(len(labels) - floor, 1)):
            publisher = self.by_domain.get(".".join(labels[i:]))
            if publisher:
                return publisher
        return None

    def match_fields(self, review_url: str, publisher_site: str, publisher_name: str) -> tuple[Publisher | None, str]:
        for url in (review_url, publisher_site):
            publisher = self._by_host(host_of(url)) if url else None
            if publisher:
                return publisher, "domain"
        publisher = self.by_name.get(_name_key(publisher_name))
        return (publisher, "alias") if publisher else (None, "")

    def match(self, review: Review) -> tuple[Publisher | None, str]:
        return self.match_fields(review.review_url, review.publisher_site, review.publisher_name)


def filter_trusted(reviews: list[Review], publishers: list[Publisher]) -> tuple[list[TrustedReview], StageYield, Counter]:
    """Keep the reviews of active signatories; count the unknown publishers by host."""
    index = PublisherIndex(publishers)
    stats, unknown, kept = StageYield(len(reviews)), Counter(), []
    for review in reviews:
        publisher, how = index.match(review)
        if publisher is None:
            unknown[unknown_key(review.review_url, review.publisher_name)] += 1
            stats.drop("unknown_publisher")
        elif not publisher.trusted:
            stats.drop("not_a_signatory")
        else:
            count(stats, f"matched_by/{how}")
            kept.append(
                TrustedReview(
                    **review.model_dump(), publisher_id=publisher.publisher_id, publisher_country=publisher.country
                )
            )
    return kept, stats, unknown


@stage_asset(
    "ingestion",
    "Stage 2: reviews whose publisher is an active IFCN/EFCSN signatory; unknown publishers reported.",
    deps=("reviews",),
)
def trusted_reviews(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, store: StoreResource
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    bad: list = []  # upstream rows that fail validation
    kept, stats, unknown = filter_trusted(
        load_upstream(store, "reviews", quarter, Review, bad), load_registry(pipeline.publisher_registry)
    )
    report = f"reports/{STAGE}/{quarter}/unknown_publishers.csv"
    store.put_bytes(report, unknown_report(unknown), content_type="text/csv")
    stats.extra["unknown_publishers"] = dg.MetadataValue.json(dict(unknown.most_common()))  # all of them, not a sample
    stats.extra["unknown_publishers_distinct"] = len(unknown)
    stats.extra["unknown_publishers_report"] = dg.MetadataValue.path(f"{store.location}/{report}")
    stats.extra["top_publishers"] = dg.MetadataValue.json(dict(Counter(r.publisher_id for r in kept).most_common(10)))
    stats.extra.update(mix_metadata(kept, lambda r: r.publisher_id))
    return finish_stage(context, store, STAGE, quarter, kept, TrustedReview, stats, bad)


def unknown_report(unknown: Counter) -> bytes:
    """The unknown publishers of a quarter as CSV (registered domain or name, reviews), most frequent first."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["publisher", "reviews"])
    writer.writerows(unknown.most_common())
    return out.getvalue().encode("utf-8")
