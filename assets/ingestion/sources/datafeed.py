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
from assets.ingestion.sources.feed_files import FeedFileError, cut_of, open_feed, open_regular
from assets.ingestion.sources.feed_text import _FeedEnd, _FeedText, _undecodable


_LISTS = ("dataFeedElement", "@graph")  # the members that hold a feed's entries: a DataFeed's, a JSON-LD graph's


def is_claimreview(value: Any) -> bool:
    """Whether a JSON object is a ClaimReview itself (not a DataFeedItem that holds one)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("@type")
    return "claimReviewed" in value or kind == "ClaimReview" or (isinstance(kind, list) and "ClaimReview" in kind)


def feed_entries(feed: Any, origin: str) -> list:
    """The entries of parsed feed JSON in every shape publishers serve: a DataFeed (``dataFeedElement``), a JSON-LD
    ``@graph``, a bare array of ClaimReviews or DataFeedItems, or one ClaimReview. Raises ``FeedFileError`` naming
    the shape when it is none of them: a feed never vanishes as one quarantined record."""
    if isinstance(feed, list):
        return feed
    if isinstance(feed, dict):
        for key in _LISTS:
            if isinstance(feed.get(key), list):
                return feed[key]
        if is_claimreview(feed):
            return [feed]
    raise FeedFileError(f"{origin}: {shape_of(feed)}, not a feed: expected a DataFeed (dataFeedElement), a JSON-LD "
                        "@graph, an array of ClaimReviews or one ClaimReview")


def shape_of(value: Any) -> str:
    """What a feed's top-level JSON is, in words, for a refusal."""
    if isinstance(value, dict):
        keys = ", ".join(repr(k)[:40] for k in list(value)[:6])
        return f"a JSON object with the members {keys}" if keys else "an empty JSON object"
    return f"a JSON {type(value).__name__ if value is not None else 'null'}"


def iter_datafeed(feed: Any, origin: str) -> Iterator[Triple]:
    """Yield (row or None, reason, raw item) for every ClaimReview of parsed feed JSON (``feed_entries``)."""
    for i, element in enumerate(feed_entries(feed, origin)):
        yield from datafeed_element_rows(element, i, origin)


def datafeed_element_rows(element: Any, i: int, origin: str, undecodable: bool = False) -> Iterator[Triple]:
    """The rows of one ``dataFeedElement`` entry (shared by the in-memory and the streaming feed readers).

    ``undecodable``: the element held bytes that are not UTF-8; each item holding them is quarantined as
    ``invalid_utf8``, and only those."""
    items = element.get("item") if isinstance(element, dict) else None
    if items is None and is_claimreview(element):
        items = [element]  # a bare array's or a graph's entry is the ClaimReview itself
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
    found_list: bool = False  # a feed list was found (a file cut inside it is a truncated feed, not no feed)


def stream_datafeed(source: str | os.PathLike | BinaryIO, origin: str, start: int | None = None,
                    stops: Iterable[int] = (), outcome: FeedRange | None = None) -> Iterator[Triple]:
    """Yield the rows of a feed file one entry at a time (memory does not grow with the file).

    The shapes of ``feed_entries``: a DataFeed's ``dataFeedElement`` or a JSON-LD ``@graph`` list, a bare array,
    or one ClaimReview object; from a path, gzip and UTF-16/32 files too (``feed_files.open_feed``). A file in no
    feed shape, or with no JSON at its start, raises ``FeedFileError`` naming it. Each entry is parsed alone
    (Python's C decoder), within ``MAX_RECORD_CHARS`` and ``MAX_RECORD_DEPTH``: an entry over a cap, one that does
    not parse, and each item holding bytes that are not UTF-8 are quarantined alone (``record_too_large``,
    ``record_too_deep``, ``malformed_record_json``, ``invalid_utf8``), and the entries after them are read. A file
    cut mid-JSON (a gzip stream too) yields every entry before the cut, then one ``truncated_feed`` record; broken
    structure between entries ends the feed with ``malformed_feed_json``.

    A byte range of the file (``assets.ingestion.feed_ranges``, plain UTF-8 files only): ``start`` is the file
    offset of an element of the list, read as if the elements before it had been (numbered from 0 there); the
    reading ends early at the first of ``stops`` (file offsets) where an element starts, and ``outcome`` says
    which one."""
    if isinstance(source, (str, os.PathLike)):
        yield from _stream_file(source, origin, start, stops, outcome)
        return
    if start is not None:
        source.seek(start)
    feed = _FeedText(source, start or 0, stops)
    outcome = outcome if outcome is not None else FeedRange()
    inside = start is not None  # a range that starts at an element is inside the list
    found_list = inside
    try:
        first = "{" if inside else feed.peek()
        if first == "[":
            feed.pos += 1
            found_list = True
            yield from _entries(feed, origin, outcome)
        elif first == "{":
            feed.pos += 0 if inside else 1
            found_list, members = yield from _object_members(feed, origin, outcome, inside)
            if not found_list:
                if members is None or not is_claimreview(members):
                    raise FeedFileError(f"{origin}: {shape_of(members or {})}, not a feed: expected a DataFeed "
                                        "(dataFeedElement), a JSON-LD @graph, an array of ClaimReviews or one "
                                        "ClaimReview")
                found_list = True
                yield from datafeed_element_rows(members, 0, origin)
        elif first in _FIRST_EVENT or first == "-" or first.isdigit():
            raise FeedFileError(f"{origin}: a JSON {_FIRST_EVENT.get(first, 'number')} at the top, not a feed")
        else:
            feed.fail(first, "a feed is a JSON object or array")
        if outcome.stopped_at is None and feed.peek() != "":
            feed.fail(feed.peek(), "expected the end of the file after the feed")
    except _FeedEnd as end:
        if not (found_list or outcome.found_list):  # nothing of a feed was found: the file is no feed
            raise FeedFileError(f"{origin}: no JSON feed at its start ({end.error[:200]})") from None
        yield None, end.reason, ElementRef(origin=origin, elements_read=outcome.elements, error=end.error[:300])


def _stream_file(path: str | os.PathLike, origin: str, start: int | None, stops: Iterable[int],
                 outcome: FeedRange | None) -> Iterator[Triple]:
    """``stream_datafeed`` of a file: a byte range of a plain file as it is, a whole file decoded (``open_feed``);
    a gzip stream cut short says so in its ``truncated_feed`` record."""
    if start is not None:
        with open_regular(path) as fh:
            yield from stream_datafeed(fh, origin, start, stops, outcome)
        return
    stream, _ = open_feed(path)
    try:
        for row, reason, raw in stream_datafeed(stream, origin, None, stops, outcome):
            if reason == "truncated_feed" and isinstance(raw, ElementRef) and cut_of(stream):
                raw["error"] = f"{cut_of(stream)}; {raw.get('error', '')}"[:300]
            yield row, reason, raw
    except FeedFileError as err:  # named by its path, which the user gave, not by the origin's short name
        raise FeedFileError(f"{path}{str(err).removeprefix(origin)}") from None
    finally:
        stream.close()


def _entries(feed: _FeedText, origin: str, outcome: FeedRange) -> Iterator[Triple]:
    """The entries of a feed's list, the cursor just inside its ``[``; the cursor ends after its ``]`` (or at the
    first of the reader's stops, which ``outcome.stopped_at`` then names)."""
    outcome.found_list = True
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
            if isinstance(element, dict) and not problem:  # what the next entry looks like, for a resync
                feed.entry_key = "item" if "item" in element else "claimReviewed"
            yield from datafeed_element_rows(element, i, origin, undecodable=bool(problem))
        after = feed.peek()
        if after not in (",", "]"):
            feed.fail(after, f"expected ',' or ']' after element {i}")
        if after == ",":
            feed.pos += 1
            after = feed.peek()
    feed.pos += 1


_KEPT_CHARS = 1 << 20  # the members of a top-level object kept for a single ClaimReview (a real one takes a few KB)


def _object_members(feed: _FeedText, origin: str, outcome: FeedRange, inside: bool = False) -> Iterator[Triple]:
    """The members of a top-level object, the cursor just inside its ``{`` (or, ``inside``, at an element of its
    feed list): the entries of its feed list (yielded), the other members kept while small (for a file that is one
    ClaimReview). Returns (whether a feed list was found, the members kept, or None when they were too large)."""
    found, members, kept = inside, {}, 0
    if not inside and feed.peek() == "}":
        feed.pos += 1
        return found, members
    while True:
        if not inside:
            if feed.peek() != '"':
                feed.fail(feed.peek(), "expected a key of the feed's object")
            key, _ = feed.value()
            feed.expect(":", f"after the key {key!r}")
        if inside or (key in _LISTS and feed.peek() == "[" and not found):
            feed.pos += 0 if inside else 1  # past the list's "[" unless the range began inside it
            found, inside = True, False
            yield from _entries(feed, origin, outcome)
            if outcome.stopped_at is not None:
                return found, None
        else:
            before = feed.pos
            value, problem = feed.value()  # another member: read within the caps
            kept += feed.pos - before
            if members is not None and not problem and kept < _KEPT_CHARS:
                members[key] = value
            else:
                members = None
        after = feed.peek()
        if after not in (",", "}"):
            feed.fail(after, "expected ',' or '}' between the feed's members")
        feed.pos += 1
        if after == "}":
            return found, members


def iter_datafeed_any(payload: Any, origin: str) -> Iterator[Triple]:
    """A DataFeed given as a local path or binary file (streamed) or as already-parsed JSON."""
    if isinstance(payload, (str, os.PathLike)) or hasattr(payload, "read"):
        return stream_datafeed(payload, origin)
    return iter_datafeed(payload, origin)
