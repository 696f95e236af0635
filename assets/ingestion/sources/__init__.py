"""Every ClaimReview source of stage 1, read into the same ``(row | None, reason, raw)`` triples: DataFeeds (parsed
JSON, or streamed from disk), incremental feed URLs, Fact Check Tools ``claims:search`` answers (dumps or the live
API) and ClaimReview markup read from the fact-check pages themselves. The bottom of the ingestion package: cleaning
(``assets.ingestion.cleaning``) reads these triples, merging (``assets.ingestion.merging``) joins the cleaned rows,
and the assets (``assets.ingestion.reviews``) store them. This module holds no code: it re-exports the names the
rest of the project imports from ``assets.ingestion.sources``. One job per module: ``claimreview`` (ClaimReview
objects to rows), ``feed_text`` (the incremental JSON reading of a feed file), one module per source kind
(``datafeed``, ``datafeed_url``, ``factcheck_api``, ``factcheck_api_live``, ``page_markup``), ``loading`` (the
configured sources to payloads), ``dispatch`` (the reader picked by kind) and ``digests`` (a source's sha256).
"""

from assets.ingestion.sources.claimreview import (
    Triple,
    claimreview_to_row,
    language_code,
    normalize_claim_text,
)
from assets.ingestion.sources.datafeed import (
    ElementRef,
    FeedRange,
    datafeed_element_rows,
    iter_datafeed,
    iter_datafeed_any,
    stream_datafeed,
)
from assets.ingestion.sources.datafeed_url import (
    RANGE_OVERLAP,
    FeedCopy,
    FeedRows,
    feed_url_triples,
    fetch_feed_incremental,
)
from assets.ingestion.sources.digests import check_unchanged, prefetch_digests, source_digest
from assets.ingestion.sources.dispatch import READERS, iter_triples, read_source
from assets.ingestion.sources.feed_files import FeedFileError
from assets.ingestion.sources.factcheck_api import (
    claims_search_dump,
    iter_factcheck_api,
)
from assets.ingestion.sources.factcheck_api_live import (
    FACTCHECK_API_URL,
    FactCheckToolsClient,
    FactCheckToolsError,
)

# the next two are private, but assets.ingestion.feed_ranges finds element starts with the feed reader's decoder
from assets.ingestion.sources.feed_text import MAX_RECORD_CHARS, MAX_RECORD_DEPTH
from assets.ingestion.sources.loading import load_sources
from assets.ingestion.sources.page_markup import (
    PageMarkup,
    claimreviews_from_page,
    fetch_page_markup,
    iter_page_markup,
)

__all__ = [
    "FACTCHECK_API_URL",
    "MAX_RECORD_CHARS",
    "MAX_RECORD_DEPTH",
    "RANGE_OVERLAP",
    "READERS",
    "ElementRef",
    "FactCheckToolsClient",
    "FactCheckToolsError",
    "FeedFileError",
    "FeedCopy",
    "FeedRange",
    "FeedRows",
    "PageMarkup",
    "Triple",
    "check_unchanged",
    "claimreview_to_row",
    "claimreviews_from_page",
    "claims_search_dump",
    "datafeed_element_rows",
    "feed_url_triples",
    "fetch_feed_incremental",
    "fetch_page_markup",
    "iter_datafeed",
    "iter_datafeed_any",
    "iter_factcheck_api",
    "iter_page_markup",
    "iter_triples",
    "language_code",
    "load_sources",
    "normalize_claim_text",
    "prefetch_digests",
    "read_source",
    "source_digest",
    "stream_datafeed",
]
