"""The ``datafeed`` source kind: a schema.org DataFeed read into triples, either already parsed
(``iter_datafeed``) or streamed from a file one ``dataFeedElement`` at a time (``stream_datafeed``, which can
also read one byte range of the file for ``assets.ingestion.feed_ranges``), with ``ElementRef`` and
``FeedRange`` that the streamed read reports in, and ``iter_datafeed_any``, the reader that picks between the
two.
"""

import os
from dataclasses import dataclass
from typing import Any, BinaryIO, Iterable, Iterator

from assets.ingestion.sources.claimreview import Triple, claimreview_to_row
from assets.ingestion.sources.feed_text import _FeedEnd, _FeedText, _undecodable


def iter_datafeed(feed: dict, origin: str) -> Iterator[Triple]:
    """Yield (row or None, reason, raw item) for every ClaimReview of a DataFeed."""
    elements = feed.get("dataFeedElement") if isinstance(feed, dict) else None
    if not isinstance(elements, list):
        yield None, "feed_without_dataFeedElement", feed
        return
    for i, element in enumerate(elements):
        yield from datafeed_element_rows(element, i, origin)


def datafeed_element_rows(element: Any, i: int, origin: str, undecodable: bool = False) -> Iterator[Triple]:
    """The rows of one ``dataFeedElement`` entry (shared by the in-memory and the streaming feed readers).

    ``undecodable``: the element held bytes that are not UTF-8; each item holding them is quarantined as
    ``invalid_utf8``, and only those."""
    items = element.get("item") if isinstance(element, dict) else None
    if items is None:
        yield None, "invalid_utf8" if undecodable and _undecodable(element) else "element_without_items", element
        return
    for j, item in enumerate(items if isinstance(items, list) else [items]):
        if undecodable and _undecodable(item):
            yield None, "invalid_utf8", item
            continue
        try:
            yield claimreview_to_row(item, f"feed:{origin}#{i}.{j}"), "", item
        except ValueError as err:
            yield None, str(err), item


# ---- streaming DataFeed -------------------------------------------------------------------------------------

_ELEMENTS = "dataFeedElement"
_FIRST_EVENT = {"[": "start_array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}


class ElementRef(dict):
    """The record of a quarantined element that names the element by its index (``element``, ``elements_read``): a
    feed read in byte ranges renumbers these (``assets.ingestion.feed_ranges``)."""


@dataclass
class FeedRange:
    """What ``stream_datafeed`` read: the elements (the next one's index) and, when it was given stops, the index of
    the stop it ended at (None: it read to the end of the feed)."""

    elements: int = 0
    stopped_at: int | None = None


def stream_datafeed(source: str | os.PathLike | BinaryIO, origin: str, start: int | None = None,
                    stops: Iterable[int] = (), outcome: FeedRange | None = None) -> Iterator[Triple]:
    """Yield the rows of a DataFeed file one ``dataFeedElement`` at a time (memory does not grow with the file).

    Each element is parsed alone (Python's C decoder), within ``MAX_RECORD_CHARS`` and ``MAX_RECORD_DEPTH``: an
    element over a cap, one that does not parse, and each item holding bytes that are not UTF-8 are quarantined
    alone (``record_too_large``, ``record_too_deep``, ``malformed_record_json``, ``invalid_utf8``), and the
    elements after them are read. A file cut mid-JSON yields every element before the cut, then one
    ``truncated_feed`` record; broken structure between elements ends the feed with ``malformed_feed_json``.

    A byte range of the file (``assets.ingestion.feed_ranges``): ``start`` is the file offset of an element of the
    ``dataFeedElement`` list, read as if the elements before it had been (numbered from 0 there); the reading ends
    early at the first of ``stops`` (file offsets) where an element starts, and ``outcome`` says which one."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, "rb") as fh:
            yield from stream_datafeed(fh, origin, start, stops, outcome)
        return
    if start is not None:
        source.seek(start)
    feed = _FeedText(source, start or 0, stops)
    outcome = outcome if outcome is not None else FeedRange()
    found_list = inside = start is not None  # a range that starts at an element is inside the list
    try:
        if not inside:
            first = feed.peek()
            if first != "{":
                if first in _FIRST_EVENT or first == "-" or first.isdigit():
                    event = _FIRST_EVENT.get(first, "number")
                    yield None, "feed_without_dataFeedElement", {"origin": origin, "first_event": event}
                    return
                feed.fail(first, "a DataFeed is a JSON object")
            feed.pos += 1
        if not inside and feed.peek() == "}":
            feed.pos += 1
        else:
            while True:
                if not inside:
                    if feed.peek() != '"':
                        feed.fail(feed.peek(), "expected a key of the DataFeed")
                    key, problem = feed.value()
                    feed.expect(":", f"after the key {key!r}")
                if inside or (key == _ELEMENTS and feed.peek() == "["):
                    found_list = True
                    feed.pos += 0 if inside else 1
                    inside = False
                    after = feed.peek()
                    while after != "]":
                        if feed.stops and feed.peek() and feed.at_stop():
                            outcome.stopped_at = feed.passed
                            return
                        element, problem = feed.value()
                        i = outcome.elements
                        outcome.elements += 1
                        if problem and element is None:
                            yield None, problem, ElementRef(origin=origin, element=i)
                        else:  # invalid_utf8 with the element parsed: only its items that hold the bytes go
                            yield from datafeed_element_rows(element, i, origin, undecodable=bool(problem))
                        after = feed.peek()
                        if after not in (",", "]"):
                            feed.fail(after, f"expected ',' or ']' after element {i}")
                        if after == ",":
                            feed.pos += 1
                    feed.pos += 1
                else:
                    feed.value()  # another member (an odd dataFeedElement too): read past, within the caps
                after = feed.peek()
                if after not in (",", "}"):
                    feed.fail(after, "expected ',' or '}' between the DataFeed's members")
                feed.pos += 1
                if after == "}":
                    break
        if feed.peek() != "":
            feed.fail(feed.peek(), "expected the end of the file after the DataFeed")
    except _FeedEnd as end:
        yield None, end.reason, ElementRef(origin=origin, elements_read=outcome.elements, error=end.error[:300])
        return
    if not found_list:
        yield None, "feed_without_dataFeedElement", {"origin": origin, "first_event": "start_map"}


def iter_datafeed_any(payload: Any, origin: str) -> Iterator[Triple]:
    """A DataFeed given as a local path or binary file (streamed) or as already-parsed JSON."""
    if isinstance(payload, (str, os.PathLike)) or hasattr(payload, "read"):
        return stream_datafeed(payload, origin)
    return iter_datafeed(payload, origin)
