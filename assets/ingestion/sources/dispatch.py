"""The reader picked by ``kind``: ``READERS`` maps each payload kind that ``load_sources`` builds to its reader,
``read_source`` reads one ``(kind, origin, payload)`` into triples, and ``iter_triples`` is the reader of
triples parsed earlier (kind ``rows``).
"""

from typing import Any, Callable, Iterable, Iterator

from assets.ingestion.sources.claimreview import Triple
from assets.ingestion.sources.datafeed import iter_datafeed_any
from assets.ingestion.sources.factcheck_api import iter_factcheck_api
from assets.ingestion.sources.page_markup import iter_page_markup


def iter_triples(payload: Iterable[Triple], origin: str) -> Iterator[Triple]:
    """Triples that were parsed earlier (the row cache of an unchanged feed)."""
    yield from payload


READERS: dict[str, Callable[[Any, str], Iterable[Triple]]] = {
    "datafeed": iter_datafeed_any, "factcheck_api": iter_factcheck_api, "page_markup": iter_page_markup,
    "rows": iter_triples,
}


def read_source(kind: str, origin: str, payload: Any) -> Iterable[Triple]:
    """The triples of one (kind, origin, payload) that ``load_sources`` built."""
    if kind not in READERS:
        raise ValueError(f"unknown source kind {kind!r} (expected one of {sorted(READERS)})")
    return READERS[kind](payload, origin)
