"""Stage 2's publisher matching: the shipped registry (``registry/publishers.csv``), a review's publisher found by
its URL's host, its publisher site or its name, and the filter that keeps the reviews of active signatories."""

import csv
import re
import unicodedata
from collections import Counter
from functools import lru_cache
from urllib.parse import urlsplit

import dagster as dg
import polars as pl

from assets.stage.tables import StageYield
from schemas.frames import polars_schema
from schemas.records import Publisher, Review, TrustedReview


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


def filter_trusted(reviews: pl.DataFrame, publishers: list[Publisher]) -> tuple[pl.DataFrame, StageYield, Counter]:
    """Keep the reviews of active signatories (a frame of ``TrustedReview`` columns); count the unknown publishers by
    registered domain. Each distinct (host, site, name) is matched once, then joined back."""
    index = PublisherIndex(publishers)
    keyed = reviews.with_columns(_netloc=pl.col("review_url").str.extract(r"^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*)"))
    combos = keyed.select("_netloc", "publisher_site", "publisher_name").unique()
    matched = []
    for netloc, site, name in combos.iter_rows():
        url = f"http://{netloc}/" if netloc is not None else ""
        publisher, how = index.match_fields(url, site, name)
        matched.append({"_netloc": netloc, "publisher_site": site, "publisher_name": name,
                        "publisher_id": publisher.publisher_id if publisher else None,
                        "publisher_country": publisher.country if publisher else "",
                        "_trusted": bool(publisher and publisher.trusted), "_how": how,
                        "_unknown": unknown_key(url, name) if publisher is None else ""})
    table = pl.DataFrame(matched, schema={"_netloc": pl.Utf8, "publisher_site": pl.Utf8, "publisher_name": pl.Utf8,
                                         "publisher_id": pl.Utf8, "publisher_country": pl.Utf8, "_trusted": pl.Boolean,
                                         "_how": pl.Utf8, "_unknown": pl.Utf8})
    found = keyed.select("_netloc", "publisher_site", "publisher_name").join(
        table, on=["_netloc", "publisher_site", "publisher_name"], how="left", nulls_equal=True, maintain_order="left")
    joined = keyed.hstack(found.drop("_netloc", "publisher_site", "publisher_name"))  # the review columns are not copied
    stats = StageYield(reviews.height)
    # counts on the few columns they need: a filter of the whole frame would copy every column
    unknown = Counter(dict(found.filter(pl.col("publisher_id").is_null())["_unknown"].value_counts().iter_rows()))
    if unknown:
        stats.drop("unknown_publisher", sum(unknown.values()))
    untrusted = found.filter(pl.col("publisher_id").is_not_null() & ~pl.col("_trusted")).height
    if untrusted:
        stats.drop("not_a_signatory", untrusted)
    for how, n in sorted(found.filter(pl.col("_trusted"))["_how"].value_counts().iter_rows()):
        stats.extra[f"matched_by/{how}"] = int(n)
    return joined.filter(pl.col("_trusted")).select(*polars_schema(TrustedReview)), stats, unknown


TOP_PUBLISHERS = 10


TOP_LANGUAGES = 20


def mix_metadata(frame: pl.DataFrame, publishers: list[str]) -> dict:
    """The quarter's top publishers and language mix as numeric metadata (``publisher/<key>``, ``language/<code>``,
    the rest summed as ``.../other``), plus the full language counts as JSON."""
    out: dict = {}
    counts = Counter(p or "unknown" for p in publishers)
    languages = Counter(lang or "unknown" for lang in frame["language"].to_list())
    for prefix, found, top in (("publisher", counts, TOP_PUBLISHERS), ("language", languages, TOP_LANGUAGES)):
        shown = found.most_common(top)
        for key, n in shown:
            out[f"{prefix}/{key}"] = n
        rest = sum(found.values()) - sum(n for _, n in shown)
        if rest:
            out[f"{prefix}/other"] = rest
    out["languages_detected"] = int(frame["language_detected"].sum())
    out["languages"] = dg.MetadataValue.json(dict(languages.most_common()))
    return out
