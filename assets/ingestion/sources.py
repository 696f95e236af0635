"""Every ClaimReview source of stage 1, read into the same ``(row | None, reason, raw)`` triples: DataFeeds (parsed
JSON, or streamed from disk), incremental feed URLs, Fact Check Tools ``claims:search`` answers (dumps or the live
API) and ClaimReview markup read from the fact-check pages themselves.

The bottom of the ingestion package: cleaning (``assets.ingestion.cleaning``) reads these triples, merging
(``assets.ingestion.merging``) joins the cleaned rows, and the assets (``assets.ingestion.reviews``) store them.
"""

import codecs
import email.utils
import hashlib
import json
import os
import re
import threading
import time
import typing
import unicodedata
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterable, Iterator
from urllib.parse import urljoin

import httpx

from dagster_project.resources.files import atomic_write

if typing.TYPE_CHECKING:  # Dagster is not imported here: a process that reads a feed range starts without it
    from dagster_project.resources.web import WebResource

Triple = tuple[dict | None, str, Any]

# ---- ClaimReview objects to rows ----------------------------------------------------------------------------------


def normalize_claim_text(text: str) -> str:
    """The claim text used in the review key: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()  # split() drops the same spaces as \s


def _text(value: Any) -> str:
    if type(value) is str:  # the usual case first: this runs ten times per record
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip()
    if isinstance(value, dict):
        return _text(value.get("name") or value.get("alternateName") or value.get("@value"))
    if isinstance(value, list) and value:
        return _text(value[0])
    return ""


def _language(value: Any) -> str:
    """``inLanguage`` as a code, a name, or a Language object; the code is preferred, a name becomes its code."""
    if isinstance(value, dict):
        code = _text(value.get("alternateName"))
        return language_code(code or _text(value.get("name")))
    return language_code(_text(value))


@lru_cache(maxsize=1)
def _language_names() -> dict[str, str]:
    """English language names -> ISO codes (babel's CLDR data), e.g. 'spanish' -> 'es'."""
    from babel import Locale

    names = {}
    for code, name in Locale("en").languages.items():
        if "_" not in code:
            names.setdefault(name.casefold(), code)
    return names


@lru_cache(maxsize=4096)
def language_code(value: str) -> str:
    """A language as written in a feed ('en', 'pt-BR', 'Spanish') -> a lower-case code; unknown names kept."""
    text = value.strip().lower()
    if not text or re.fullmatch(r"[a-z]{2,3}([-_][a-z0-9]{2,8})*", text):
        return text.replace("_", "-")
    return _language_names().get(text.casefold(), text)




def _urls(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url.strip().startswith(("http://", "https://")):
            out.append(url.strip())
    return out


def _required(value: Any) -> Any:
    """A required text field: stripped if it is a string, else kept as is for clean_row to reject by type."""
    return value.strip() if isinstance(value, str) else value


_NO_FIELDS: dict = {}  # read-only stand-in for an absent or malformed sub-object


def claimreview_to_row(item: dict, source: str) -> dict:
    """One schema.org ClaimReview object (feed or page markup) to a review row; raises ValueError if unusable."""
    if not isinstance(item, dict):
        raise ValueError("not_an_object")
    # this runs once per record of a feed: plain strings are stripped inline, other shapes go through _text
    get = item.get
    reviewed = get("itemReviewed")
    if not isinstance(reviewed, dict):
        reviewed = _NO_FIELDS
    rating = get("reviewRating")
    if not isinstance(rating, dict):
        rating = _NO_FIELDS
    author = get("author")
    if isinstance(author, list) and author:
        author = author[0]
    if not isinstance(author, dict):
        author = {"name": author}
    appearance, first = reviewed.get("appearance"), reviewed.get("firstAppearance")
    appearances = (_urls(appearance) if appearance is not None else []) + (_urls(first) if first is not None else [])
    if isinstance(reviewed.get("url"), str):
        appearances += _urls(reviewed["url"])
    return {
        "review_url": v.strip() if type(v := get("url")) is str else _required(v),
        "claim_text": v.strip() if type(v := get("claimReviewed")) is str else _required(v),
        "claim_date": reviewed.get("datePublished"),
        "review_date": get("datePublished"),
        "publisher_name": v.strip() if type(v := author.get("name")) is str else _text(v),
        "publisher_site": v.strip() if type(v := author.get("url")) is str else _text(v),
        "rating_text": v.strip() if type(v := rating.get("alternateName")) is str else _text(v),
        "rating_value": v.strip() if type(v := rating.get("ratingValue")) is str else _text(v),
        "rating_best": v.strip() if type(v := rating.get("bestRating")) is str else _text(v),
        "rating_worst": v.strip() if type(v := rating.get("worstRating")) is str else _text(v),
        "language": language_code(v.strip()) if type(v := get("inLanguage")) is str else _language(v),
        "claim_author": v.strip() if type(v := reviewed.get("author")) is str else _text(v),
        "title": v.strip() if type(v := get("name") or get("headline")) is str else _text(v),
        "appearance_urls": list(dict.fromkeys(appearances)) if len(appearances) > 1 else appearances,
        "sources": [source],
    }


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


def iter_factcheck_api(claims: Any, origin: str) -> Iterator[Triple]:
    """Yield rows from a Fact Check Tools ``claims:search`` answer (a list, or an object with ``claims``)."""
    if isinstance(claims, dict):
        claims = claims.get("claims")
    if not isinstance(claims, list):
        yield None, "api_without_claims", claims
        return
    for i, claim in enumerate(claims):
        if not isinstance(claim, dict) or not isinstance(claim.get("claimReview"), list):
            yield None, "claim_without_claimReview", claim
            continue
        for j, review in enumerate(claim["claimReview"]):
            if not isinstance(review, dict):
                yield None, "not_an_object", review
                continue
            publisher = review.get("publisher") if isinstance(review.get("publisher"), dict) else {}
            yield {
                "review_url": _required(review.get("url")),
                "claim_text": _required(claim.get("text")),
                "claim_date": claim.get("claimDate"),
                "review_date": review.get("reviewDate"),
                "publisher_name": _text(publisher.get("name")),
                "publisher_site": _text(publisher.get("site")),
                "rating_text": _text(review.get("textualRating")),
                "language": _language(review.get("languageCode")),
                "claim_author": _text(claim.get("claimant")),
                "title": _text(review.get("title")),
                "appearance_urls": [],
                "sources": [f"api:{origin}#{i}.{j}"],
            }, "", review



# ---- streaming DataFeed -------------------------------------------------------------------------------------

_ELEMENTS = "dataFeedElement"
# One dataFeedElement at most, in characters and in nesting; a larger or deeper one is quarantined unparsed, so memory
# follows these caps, not the file. A real element nests 6 deep and takes a few KB (the 10 MB claim of issue 3 fits).
MAX_RECORD_CHARS = 16 * 1024 * 1024
MAX_RECORD_DEPTH = 64
# bytes per read of the file; on the 400 MB feed of bench/backfill.py a range read in 4.9 s with 64-128 KB reads,
# 5.6 s with 1 or 4 MB reads (measured, the cause not isolated: the text held stays in the CPU's caches)
_READ = 1 << 17
_NEAR_END = 64  # a parse error this close to the end of what was read may be the cut, not the record
_WS = re.compile(r"[ \t\n\r]*")
_OUTSIDE = re.compile(r'[^"\[\]{}]+|[\[{]+|[\]}]+|"')  # a value's tokens outside strings: runs of brackets as one
_IN_STRING = re.compile(r'[^"\\]*(?:\\.[^"\\]*)*')  # up to a string's closing quote (or an escape cut by the read)
_SCALAR = re.compile(r"[-+.0-9A-Za-z]+")
_UNDECODABLE = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as the surrogateescape decoder holds it
_FIRST_EVENT = {"[": "start_array", '"': "string", "t": "boolean", "f": "boolean", "n": "null"}


def _json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # Python's json reads NaN and Infinity; a feed must not hold them


_DECODER = json.JSONDecoder(parse_constant=_json_constant)


class _FeedEnd(Exception):
    """The feed cannot be read past this point: ``truncated_feed`` or ``malformed_feed_json``."""

    def __init__(self, reason: str, error: str) -> None:
        super().__init__(error)
        self.reason, self.error = reason, error


def _cut_short(text: str, err: json.JSONDecodeError) -> bool:
    """Whether a parse error is the end of the text arriving early (a string, literal, number or escape cut)."""
    rest = text[err.pos:].rstrip(" \t\n\r")
    return (err.msg.startswith("Unterminated string") or not rest or rest.startswith("\\u")
            or any(w.startswith(rest) for w in ("true", "false", "null")) or bool(re.fullmatch(r"-?[0-9.eE+-]*", rest)))


def _depth(value: Any) -> int:
    """Nesting of parsed JSON, without recursion: a scalar 0, ``[]`` 1, ``{"a": []}`` 2."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def _undecodable(value: Any) -> bool:
    """Whether parsed JSON holds a byte that was not UTF-8 (in a key or a string, at any depth)."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if _UNDECODABLE.search(node):
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


class _FeedText:
    """A binary stream decoded a read at a time, with a cursor: the text before the cursor is let go at each read.

    Bytes that are not UTF-8 are kept as the lone surrogates U+DC80..U+DCFF (``surrogateescape``), which no valid
    UTF-8 text holds, so the record that holds them can be told and quarantined alone."""

    def __init__(self, stream: BinaryIO, offset: int = 0, stops: Iterable[int] = ()) -> None:
        self.stream = stream
        self.text, self.pos = "", 0
        self.eof = False
        self.dirty = False  # a read held bytes that are not UTF-8
        self._pending = b""  # the start of a UTF-8 sequence that the next read completes
        self._started = offset > 0  # a byte order mark is looked for at the start of the file only
        self.consumed = offset  # the file offset of the next read
        # Byte offsets, ascending, where the reader may stop (``stream_datafeed``'s ranges): ``stop_pos`` is the text
        # index of the first once the text reaches it, -1 when that offset is no character boundary of the text.
        self.stops, self.stop_pos, self.passed = list(stops), None, 0

    def more(self, at_least: int = _READ) -> bool:
        """Read on (at least ``at_least`` bytes, at most a record's cap); False at the end of the stream."""
        if self.eof:
            return False
        data = self.stream.read(max(_READ, min(at_least, MAX_RECORD_CHARS)))
        final = not data
        self.consumed += len(data)
        data = self._pending + data
        try:
            text, used = codecs.utf_8_decode(data, "strict", final)
        except UnicodeDecodeError:
            text, used = codecs.utf_8_decode(data, "surrogateescape", final)
            self.dirty = True
        self._pending = data[used:]
        if not self._started:
            text, self._started = text.removeprefix("\ufeff"), True  # a byte order mark is not content
        dropped = self.pos
        self.text, self.pos = self.text[self.pos:] + text, 0
        self.eof = final
        if self.stop_pos is not None:
            self.stop_pos -= dropped
        elif self.stops:
            self._place_stop()
        return bool(text) or not final

    def _place_stop(self) -> None:
        """Find the first stop in the text once the text reaches it (the text is encoded again once per stop)."""
        end = self.consumed - len(self._pending)  # the file offset just after the text
        if end < self.stops[0] and not self.eof:
            return
        raw = self.text.encode("utf-8", "surrogateescape")
        k = self.stops[0] - (end - len(raw))
        at = len(raw[:k].decode("utf-8", "surrogateescape")) if 0 <= k <= len(raw) else -1
        self.stop_pos = at if at >= 0 and len(self.text[:at].encode("utf-8", "surrogateescape")) == k else -1

    def at_stop(self) -> bool:
        """Whether the cursor is exactly at the first stop; a stop the cursor went past (it was inside a value, or
        is no character boundary) is dropped for the next (``passed`` counts them)."""
        while self.stops:
            if self.stop_pos is None:
                return False
            if self.pos == self.stop_pos:
                return True
            if 0 <= self.pos < self.stop_pos:
                return False
            self.stops.pop(0)
            self.stop_pos, self.passed = None, self.passed + 1
            if self.stops:
                self._place_stop()
        return False

    def peek(self) -> str:
        """The next character after whitespace ("" at the end of the stream); the cursor moves to it."""
        while True:
            self.pos = _WS.match(self.text, self.pos).end()
            if self.pos < len(self.text):
                return self.text[self.pos]
            if not self.more():
                return ""

    def expect(self, char: str, where: str) -> None:
        found = self.peek()
        if found != char:
            self.fail(found, f"expected {char!r} {where}")
        self.pos += 1

    def fail(self, found: str, what: str) -> None:
        if found == "":
            raise _FeedEnd("truncated_feed", f"the feed ends early: {what}")
        raise _FeedEnd("malformed_feed_json", f"{what}, found {self.text[self.pos:self.pos + 40]!r}")

    def value(self) -> tuple[Any, str]:
        """The JSON value at the cursor and "" (the cursor moves past it), or None and why it was left unparsed:
        ``record_too_large``, ``record_too_deep``, ``invalid_utf8`` or ``malformed_record_json``. Raises
        ``_FeedEnd`` when no value can be framed there."""
        self.peek()
        while True:
            start = self.pos
            try:
                value, end = _DECODER.raw_decode(self.text, start)
            except RecursionError:  # deeper than the interpreter's stack: far over MAX_RECORD_DEPTH
                return self._skip("record_too_deep")
            except json.JSONDecodeError as err:
                cut = err.pos >= len(self.text) - _NEAR_END or err.msg.startswith("Unterminated string")
                if cut and not self.eof:
                    if len(self.text) - start > MAX_RECORD_CHARS:
                        return self._skip("record_too_large")
                    self.more(len(self.text) - start)  # twice the text held: a long record is parsed a few times
                    continue
                if self.eof and _cut_short(self.text, err):
                    raise _FeedEnd("truncated_feed", f"the feed ends inside a record: {err.msg}") from None
                bad_byte = self.dirty and _UNDECODABLE.match(self.text, err.pos) is not None
                return self._skip("invalid_utf8" if bad_byte else "malformed_record_json", err.msg)
            except ValueError as err:  # NaN, Infinity, an integer of more than 4,300 digits
                return self._skip("malformed_record_json", str(err))
            if end >= len(self.text) and not self.eof and not isinstance(value, (dict, list, str)):
                self.more()  # a number may go on in the next read
                continue
            self.pos = end
            if end - start > MAX_RECORD_CHARS:
                return None, "record_too_large"
            if self.text.count("[", start, end) + self.text.count("{", start, end) > MAX_RECORD_DEPTH:
                if _depth(value) > MAX_RECORD_DEPTH:  # the count bounds the depth; most records stop at it
                    return None, "record_too_deep"
            if self.dirty and _UNDECODABLE.search(self.text, start, end):
                return value, "invalid_utf8"  # the caller finds which items hold the bytes
            return value, ""

    def _skip(self, reason: str, error: str = "") -> tuple[None, str]:
        """Move the cursor past the value at it without parsing it (brackets counted outside strings, the text
        let go as it is read); raises ``_FeedEnd`` when the value cannot be framed."""
        depth, in_string, i = 0, False, self.pos
        first = self.text[i] if i < len(self.text) else ""
        if first not in ("[", "{", '"'):  # a number or a word, which may go on in the next read
            if _SCALAR.match(self.text, i) is None:
                self.fail(first, f"a value cannot start here ({error or reason})")
            while True:
                m = _SCALAR.match(self.text, self.pos)
                self.pos = m.end() if m else self.pos
                if self.pos < len(self.text) or not self.more():
                    return None, reason
        while True:
            text = self.text
            while i < len(text):
                if in_string:
                    i = _IN_STRING.match(text, i).end()
                    if i >= len(text) or text[i] != '"':
                        break  # the string goes on in the next read (perhaps after a cut escape)
                    i, in_string = i + 1, False
                    if depth == 0:
                        self.pos = i
                        return None, reason
                    continue
                token = _OUTSIDE.match(text, i).group()
                if token == '"':
                    in_string = True
                elif token[0] in "[{":
                    depth += len(token)
                elif token[0] in "]}":
                    if depth <= len(token):
                        self.pos = i + depth
                        return None, reason
                    depth -= len(token)
                i += len(token)
            self.pos = i  # what was scanned is let go: memory stays at one read
            if not self.more():
                self.fail("", f"inside a record that was left unread ({reason})")
            i = self.pos


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


def iter_triples(payload: Iterable[Triple], origin: str) -> Iterator[Triple]:
    """Triples that were parsed earlier (the row cache of an unchanged feed)."""
    yield from payload


# ---- incremental fetch of a feed URL --------------------------------------------------------------------------


@dataclass
class FeedCopy:
    """The local copy of a feed URL after a (re-)fetch."""

    url: str
    path: Path  # the last fetched body
    status: str  # "new" | "changed" | "unchanged"
    sha256: str
    etag: str
    content_length: int
    rows_cache: Path  # triples parsed from this very body, JSON lines; first line names the body's sha256
    method: str = "full"  # "range": only the head and the new tail came over the wire
    bytes_fetched: int = 0


def _url_stem(url: str) -> str:
    return hashlib.sha256(url.encode("utf-8")).hexdigest()[:20]


def _read_state(state_file: Path) -> dict:
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return state if isinstance(state, dict) else {}


RANGE_OVERLAP = 16 * 1024  # bytes of the old copy that the new tail must repeat, proof that the feed only grew
_HEAD_SLACK = 4096  # the head may grow a little (dateModified written with more digits)
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+|\*)")


def _feed_frame(body: bytes) -> tuple[int, int] | None:
    """(end of the head: just after the '[' of dataFeedElement, end of the last element) of a feed body."""
    key = body.find(b'"dataFeedElement"')
    head_end = body.find(b"[", key) + 1 if key >= 0 else 0
    close = body.rstrip().rstrip(b"}").rstrip().rfind(b"]") if head_end else -1
    last = len(body[:close].rstrip()) if close > 0 else -1  # appended elements follow it after a comma
    return (head_end, last) if 0 < head_end <= last else None


def _range_body(web: "WebResource", url: str, old: bytes) -> tuple[str, bytes, dict, int] | None:
    """(method, body, headers, bytes fetched): the new feed body rebuilt from a fresh head, the old middle and the
    new tail (two Range requests); or the whole body when the server answered the first Range with all of it; or
    None when the feed did not just grow at its end (then it is fetched whole)."""
    frame = _feed_frame(old)
    if frame is None or frame[1] <= RANGE_OVERLAP:
        return None
    head_end, close = frame
    head = web.fetch(url, headers={"Range": f"bytes=0-{head_end + _HEAD_SLACK - 1}"})
    if head.ok and head.status == 200:
        return "full", head.content, head.headers, len(head.content)  # Range ignored: this is the whole feed
    if not head.ok or head.status != 206:
        return None
    new_head_frame = _feed_frame(head.content + b"]}")
    if new_head_frame is None:
        return None
    new_head = head.content[: new_head_frame[0]]
    shift = len(new_head) - head_end  # where the old bytes sit in the new file
    start = close - RANGE_OVERLAP
    tail = web.fetch(url, headers={"Range": f"bytes={start + shift}-"})
    match = _CONTENT_RANGE.fullmatch(tail.headers.get("content-range", "").strip())
    if not tail.ok or tail.status != 206 or not match or int(match.group(1)) != start + shift:
        return None
    if tail.content[: close - start] != old[start:close]:
        return None  # rewritten, not appended to
    body = new_head + old[head_end:start] + tail.content
    if match.group(3) != "*" and len(body) != int(match.group(3)):
        return None
    return "range", body, tail.headers, len(head.content) + len(tail.content)


def fetch_feed_incremental(web: "WebResource", url: str, state_dir: str | os.PathLike) -> FeedCopy:
    """Fetch a feed URL and compare it with the last fetched copy kept under ``state_dir``.

    When a copy exists, only the head (it carries dateModified) and the part from just before the old end are
    requested with HTTP Range, and the new body is the new head + the old middle + the new tail; the tail must
    repeat the old copy's last bytes, so a feed that was rewritten rather than extended is fetched whole, as is one
    from a server that ignores Range. The feed is "unchanged" when its sha256 (and ETag, if both have one) match."""
    state_dir = Path(state_dir)
    state_file = state_dir / "feeds.json"
    stem = _url_stem(url)
    copy_path, cache_path = state_dir / f"{stem}.json", state_dir / f"{stem}.rows.jsonl"
    state = _read_state(state_file)
    previous = state.get(url) if isinstance(state.get(url), dict) else None
    ranged = None
    if previous and copy_path.exists():
        ranged = _range_body(web, url, copy_path.read_bytes())
    if ranged is not None:
        method, body, headers, fetched = ranged
    else:
        result = web.fetch(url)
        if not result.ok:
            raise RuntimeError(f"could not fetch source {url}: {result.error or result.status}")
        body, headers, fetched, method = result.content, result.headers, len(result.content), "full"
    sha = hashlib.sha256(body).hexdigest()
    etag = headers.get("etag", "")
    length = len(body)
    same_etag = not (previous and previous.get("etag") and etag) or previous.get("etag") == etag
    if previous and previous.get("sha256") == sha and (same_etag or method == "range") and copy_path.exists():
        status = "unchanged"
    else:
        status = "changed" if previous else "new"
        atomic_write(copy_path, body)
        if method == "range":  # the archive holds only the parts: keep the rebuilt whole, so a replay sees it
            web.archive_whole(url, body, headers.get("content-type", "application/json"), "Range requests")
    state[url] = {
        "etag": etag,
        "content_length": length,
        "sha256": sha,
        "copy": copy_path.name,
        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "status": status,
        "method": method,
        "bytes_fetched": fetched,
    }
    atomic_write(state_file, json.dumps(state, indent=1, sort_keys=True).encode("utf-8"))
    return FeedCopy(url, copy_path, status, sha, etag, length, cache_path, method, fetched)


def _cached_triples(cache: Path, sha: str) -> Iterator[Triple] | None:
    """The cached triples of the body with this sha256, or None when the cache is missing or stale."""
    try:
        with open(cache, encoding="utf-8") as fh:
            header = json.loads(fh.readline() or "{}")
    except (OSError, json.JSONDecodeError):
        return None
    if header.get("sha256") != sha:
        return None

    def read() -> Iterator[Triple]:
        with open(cache, encoding="utf-8") as fh:
            fh.readline()
            for line in fh:
                row, reason, raw = json.loads(line)
                yield row, reason, raw

    return read()


def _parse_and_cache(copy: FeedCopy, origin: str) -> Iterator[Triple]:
    """Stream-parse the local copy, writing the triples to the row cache once the whole feed was read."""
    tmp = copy.rows_cache.with_name(f".tmp-{os.getpid()}-{copy.rows_cache.name}")
    done = False
    try:
        with open(tmp, "w", encoding="utf-8") as out:
            out.write(json.dumps({"sha256": copy.sha256, "origin": origin}) + "\n")
            for triple in stream_datafeed(copy.path, origin):
                out.write(json.dumps(list(triple)) + "\n")  # ASCII escapes keep lone surrogates round-trippable
                yield triple
        done = True
        os.replace(tmp, copy.rows_cache)
    finally:
        if not done:
            tmp.unlink(missing_ok=True)


class FeedRows:
    """The triples of a fetched feed body: an unchanged feed is read from its row cache (no re-parse), a new or
    changed one is parsed and cached. Iterable; ``sha256`` names the body without reading it."""

    def __init__(self, copy: FeedCopy, origin: str) -> None:
        self.copy, self.origin, self.sha256 = copy, origin, copy.sha256

    def __iter__(self) -> Iterator[Triple]:
        if self.copy.status == "unchanged":
            cached = _cached_triples(self.copy.rows_cache, self.copy.sha256)
            if cached is not None:
                return cached
        return _parse_and_cache(self.copy, self.origin)


def feed_url_triples(copy: FeedCopy, origin: str) -> FeedRows:
    return FeedRows(copy, origin)


# ---- Fact Check Tools claims:search -----------------------------------------------------------------------------

FACTCHECK_API_URL = "https://factchecktools.googleapis.com/v1alpha1/claims:search"
_LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


class FactCheckToolsError(RuntimeError):
    """claims:search failed; the message never contains the API key."""


class FactCheckToolsClient:
    """A client for the Fact Check Tools ``claims:search`` endpoint (httpx, no WARC: the API is not a web page).

    Retries on 429/503 use a small loop honouring Retry-After (tenacity is not in the venv)."""

    RETRY_STATUSES = frozenset({429, 503})

    def __init__(
        self,
        api_key: str,
        base_url: str = FACTCHECK_API_URL,
        timeout_s: float = 30.0,
        max_retries: int = 5,
        max_wait_s: float = 60.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        url = httpx.URL(base_url)
        if url.scheme != "https" and not (url.scheme == "http" and url.host in _LOOPBACK_HOSTS):
            raise ValueError(f"claims:search base URL must be https (plain http only on loopback): {base_url}")
        if not api_key:
            raise ValueError("claims:search needs an API key")
        self.base_url = base_url
        self._key = api_key
        self.max_retries = max_retries
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False)  # no env proxies: loopback stays loopback
        self.pages_fetched = 0
        self.retries = 0

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "FactCheckToolsClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _wait(self, response: httpx.Response | None, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): Retry-After if given, else 1, 2, 4, ..."""
        header = response.headers.get("retry-after", "").strip() if response is not None else ""
        if header.isdigit():
            return min(float(header), self.max_wait_s)
        if header:
            try:
                when = email.utils.parsedate_to_datetime(header)
                return min(max((when - datetime.now(timezone.utc)).total_seconds(), 0.0), self.max_wait_s)
            except (TypeError, ValueError):
                pass
        return min(2.0**attempt, self.max_wait_s)

    def _get(self, params: dict[str, Any]) -> dict:
        for attempt in range(self.max_retries + 1):
            response = None
            try:
                response = self._client.get(self.base_url, params={**params, "key": self._key})
            except httpx.TransportError as err:
                if attempt == self.max_retries:
                    raise FactCheckToolsError(f"claims:search unreachable: {type(err).__name__}") from None
            if response is not None:
                if response.status_code == 200:
                    try:
                        answer = response.json()
                    except ValueError:
                        raise FactCheckToolsError("claims:search answered with non-JSON") from None
                    if not isinstance(answer, dict):
                        raise FactCheckToolsError("claims:search answer is not an object")
                    return answer
                if response.status_code not in self.RETRY_STATUSES or attempt == self.max_retries:
                    raise FactCheckToolsError(f"claims:search answered HTTP {response.status_code}")
            self.retries += 1
            self._sleep(self._wait(response, attempt))
        raise FactCheckToolsError("claims:search: retries exhausted")  # unreachable; keeps type checkers calm

    def iter_pages(
        self,
        query: str = "",
        site: str = "",
        max_age_days: int | None = None,
        language_code: str = "",
        page_size: int = 100,
        max_pages: int = 50,
    ) -> Iterator[dict]:
        """Every answer page, following ``nextPageToken`` until it is absent or ``max_pages`` pages were read."""
        if not query and not site:
            raise ValueError("claims:search needs a query or a reviewPublisherSiteFilter")
        params: dict[str, Any] = {"pageSize": page_size}
        if query:
            params["query"] = query
        if site:
            params["reviewPublisherSiteFilter"] = site
        if max_age_days is not None:
            params["maxAgeDays"] = max_age_days
        if language_code:
            params["languageCode"] = language_code
        token = ""
        for _ in range(max_pages):
            answer = self._get({**params, "pageToken": token} if token else params)
            self.pages_fetched += 1
            yield answer
            token = answer.get("nextPageToken") or ""
            if not isinstance(token, str) or not token:
                return

    def search(self, **kwargs: Any) -> list[dict]:
        """All ``claims`` of all pages, in the shape ``iter_factcheck_api`` reads."""
        claims: list[dict] = []
        for answer in self.iter_pages(**kwargs):
            page = answer.get("claims") or []
            claims.extend(page if isinstance(page, list) else [page])
        return claims


# ---- ClaimReview markup in the page itself ----------------------------------------------------------------------

_SCHEMA_PREFIXES = ("http://schema.org/", "https://schema.org/", "schema:")


def _short(name: Any) -> Any:
    if isinstance(name, str):
        for prefix in _SCHEMA_PREFIXES:
            if name.startswith(prefix):
                return name[len(prefix):]
    return name


def _types(node: dict) -> list[str]:
    value = node.get("@type")
    return [_short(t) for t in (value if isinstance(value, list) else [value]) if isinstance(t, str)]


def _nodes(value: Any) -> Iterator[dict]:
    """Every object in a JSON-LD document, depth first (``@graph``, lists and nested objects alike)."""
    if isinstance(value, dict):
        yield value
        for child in value.values():
            yield from _nodes(child)
    elif isinstance(value, list):
        for child in value:
            yield from _nodes(child)


def _resolve(value: Any, index: dict[str, dict], depth: int = 0) -> Any:
    """Replace bare ``{"@id": ...}`` references by the node they name (a few levels deep; cycles stop there)."""
    if depth > 4:
        return value
    if isinstance(value, list):
        return [_resolve(v, index, depth + 1) for v in value]
    if isinstance(value, dict):
        if set(value) == {"@id"} and value["@id"] in index:
            value = index[value["@id"]]
        return {k: _resolve(v, index, depth + 1) if k not in ("@id", "@context") else v for k, v in value.items()}
    return value


def _compact_rdfa(nodes: list[dict]) -> list[dict]:
    """extruct's RDFa output is expanded JSON-LD (full IRIs, value lists); make schema.org nodes look like JSON-LD."""
    by_id = {n["@id"]: n for n in nodes if isinstance(n, dict) and isinstance(n.get("@id"), str)}

    def compact(node: dict, depth: int) -> dict:
        out: dict[str, Any] = {}
        if isinstance(node.get("@id"), str) and not node["@id"].startswith("_:"):
            out["@id"] = node["@id"]
        types = _types(node)
        if types:
            out["@type"] = types if len(types) > 1 else types[0]
        for key, values in node.items():
            if key.startswith("@") or _short(key) == key:
                continue
            items = []
            for v in values if isinstance(values, list) else [values]:
                if isinstance(v, dict) and "@value" in v:
                    items.append(v["@value"])
                elif isinstance(v, dict) and "@id" in v:
                    target = by_id.get(v["@id"])
                    items.append(compact(target, depth + 1) if target is not None and depth < 4 else v["@id"])
                else:
                    items.append(v)
            out[_short(key)] = items[0] if len(items) == 1 else items
        return out

    return [compact(n, 0) for n in nodes if isinstance(n, dict)]


def claimreviews_from_page(html: str | bytes, url: str) -> list[dict]:
    """schema.org ClaimReview objects in a page's JSON-LD, microdata and RDFa (JSON-LD first; duplicates once).

    A ClaimReview without its own ``url`` gets the page URL, since the page is the review; a ``url`` written as a
    path is resolved against the page, and a ``claimReviewed`` that is a list of one string is that string.
    extruct (with rdflib, html5lib, mf2py) is imported here: a feed or an API answer needs none of it."""
    import extruct

    data = extruct.extract(html, base_url=url, syntaxes=["json-ld", "microdata", "rdfa"], uniform=True, errors="ignore")
    documents = list(data.get("json-ld") or []) + list(data.get("microdata") or [])
    documents.append(_compact_rdfa(list(data.get("rdfa") or [])))
    found: list[dict] = []
    seen: set[tuple[str, str]] = set()
    for document in documents:
        index = {n["@id"]: n for n in _nodes(document) if isinstance(n.get("@id"), str) and len(n) > 1}
        for node in _nodes(document):
            if "ClaimReview" not in _types(node):
                continue
            review = _resolve(node, index)
            if not isinstance(review.get("url"), str) or not review["url"].strip():
                review["url"] = url
            elif review["url"].strip().startswith("/") and not review["url"].strip().startswith("//"):
                review["url"] = urljoin(url, review["url"].strip())  # Estadão writes the path alone
            claim = review.get("claimReviewed")
            if isinstance(claim, list) and len(claim) == 1 and isinstance(claim[0], str):
                review["claimReviewed"] = claim[0]  # The Quint writes a list of one claim
            claim = review.get("claimReviewed")
            key = (review["url"].strip(), normalize_claim_text(claim) if isinstance(claim, str) else repr(claim))
            if key in seen:
                continue
            seen.add(key)
            found.append(review)
    return found


@dataclass
class PageMarkup:
    """What one fact-check page gave: its ClaimReviews, or why it gave none."""

    url: str
    claimreviews: list[dict]
    error: str | None = None


def fetch_page_markup(web: "WebResource", urls: list[str]) -> list[PageMarkup]:
    pages = []
    for url in urls:
        result = web.fetch(url)
        if not result.ok:
            pages.append(PageMarkup(url, [], result.error or f"http_{result.status}"))
            continue
        pages.append(PageMarkup(url, claimreviews_from_page(result.content, result.final_url)))
    return pages


def iter_page_markup(pages: list[PageMarkup], origin: str) -> Iterator[Triple]:
    """Rows of ClaimReview markup (source ``page:<url>``); a failed fetch or a page without any is quarantined."""
    for page in pages:
        if page.error:
            yield None, "page_fetch_failed", {"url": page.url, "error": page.error}
            continue
        if not page.claimreviews:
            yield None, "page_without_claimreview", {"url": page.url}
            continue
        for review in page.claimreviews:
            try:
                yield claimreview_to_row(review, f"page:{page.url}"), "", review
            except ValueError as err:
                yield None, str(err), review


def claims_search_dump(body: bytes, path: str) -> Any:
    """A ``claims:search`` answer kept as a file, parsed whole. A byte that is not UTF-8 stays in its claim as a
    lone surrogate, so that cleaning quarantines that review alone (``invalid_unicode``); a file JSON cannot read
    is an error that names it."""
    try:
        return json.loads(body.decode("utf-8", "surrogateescape").removeprefix("\ufeff"))
    except (ValueError, RecursionError) as err:
        what = "nested too deep" if isinstance(err, RecursionError) else " ".join(str(err).split())[:200]
        raise ValueError(f"{path}: not a claims:search answer JSON can read ({what}): fix the file, or remove it "
                         "from sources") from None


# ---- the configured sources --------------------------------------------------------------------------------------

def load_sources(specs: list[Any], web: "WebResource | None", state_dir: str | os.PathLike) -> tuple[list[tuple[str, str, Any]], dict[str, str]]:
    """Configured sources -> (kind, origin, payload) for ``ingest``, and a status per origin for the yield.

    Local feeds are streamed from disk; feed URLs are fetched incrementally (status new/changed/unchanged)."""
    from dagster_project.config import SourceSpec

    kinds = typing.get_args(SourceSpec.model_fields["kind"].annotation)  # the kinds the config accepts
    payloads: list[tuple[str, str, Any]] = []
    status: dict[str, str] = {}
    for spec in specs:
        kind, path = spec.kind, getattr(spec, "path", "") or ""
        if kind not in kinds:
            raise ValueError(f"unknown source kind {kind!r} (expected one of {list(kinds)})")
        origin = path.rsplit("/", 1)[-1]
        remote = path.startswith(("http://", "https://"))
        if kind in ("datafeed", "factcheck_api", "page_markup") and remote and web is None:
            raise ValueError(f"{path}: a URL source needs the web resource")
        if kind == "datafeed" and remote:
            copy = fetch_feed_incremental(web, path, state_dir)
            payloads.append(("rows", origin, feed_url_triples(copy, origin)))
            status[origin] = copy.status
        elif kind == "datafeed":
            payloads.append(("datafeed", origin, path))
            status[origin] = "local"
        elif kind == "factcheck_api":
            if remote:
                result = web.fetch(path)
                if not result.ok:
                    raise RuntimeError(f"could not fetch source {path}: {result.error or result.status}")
                body = result.content
            else:
                with open(path, "rb") as fh:
                    body = fh.read()
            payloads.append(("factcheck_api", origin, claims_search_dump(body, path)))
            status[origin] = "local" if not remote else "fetched"
        elif kind == "factcheck_api_live":
            key = os.environ.get(spec.api_key_env, "")
            if not key:
                raise RuntimeError(f"factcheck_api_live: environment variable {spec.api_key_env} holds no API key")
            origin = f"factchecktools:{spec.site or spec.query}"
            with FactCheckToolsClient(key, base_url=spec.base_url) as client:
                claims = client.search(query=spec.query, site=spec.site, max_age_days=spec.max_age_days,
                                       language_code=spec.language_code, page_size=spec.page_size,
                                       max_pages=spec.max_pages)
                status[origin] = f"{client.pages_fetched} pages"
            payloads.append(("factcheck_api", origin, claims))
        else:  # page_markup
            if web is None:
                raise ValueError("page_markup sources need the web resource")
            pages = fetch_page_markup(web, list(spec.urls))
            origin = f"pages#{len(payloads)}"
            payloads.append(("page_markup", origin, pages))
            status[origin] = f"{sum(1 for p in pages if p.error is None)}/{len(pages)} fetched"
    return payloads, status


READERS: dict[str, Callable[[Any, str], Iterable[Triple]]] = {
    "datafeed": iter_datafeed_any, "factcheck_api": iter_factcheck_api, "page_markup": iter_page_markup,
    "rows": iter_triples,
}


def read_source(kind: str, origin: str, payload: Any) -> Iterable[Triple]:
    """The triples of one (kind, origin, payload) that ``load_sources`` built."""
    if kind not in READERS:
        raise ValueError(f"unknown source kind {kind!r} (expected one of {sorted(READERS)})")
    return READERS[kind](payload, origin)


def _json_default(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f: getattr(value, f) for f in value.__dataclass_fields__}
    return repr(value)


def source_digest(kind: str, payload: Any) -> str:
    """The sha256 of a source's content, found without parsing it: a local feed's bytes (begun ahead where
    ``prefetch_digests`` did), a fetched feed's body, or the canonical JSON of an answer or of the pages' markup."""
    if isinstance(payload, FeedRows):
        return payload.sha256
    if isinstance(payload, (str, os.PathLike)):
        ahead = _AHEAD.pop(_file_state(payload), None)
        return (ahead.result() if ahead is not None else None) or _file_digest(payload)
    digest = hashlib.sha256()
    digest.update(json.dumps(payload, sort_keys=True, ensure_ascii=True, default=_json_default).encode())
    return digest.hexdigest()


_AHEAD: dict[tuple, Future] = {}  # file state -> its sha256 under way (prefetch_digests)


def _file_state(path: str | os.PathLike) -> tuple:
    """What says a file is unchanged between two looks in one process: where it is, its size and time, its inode."""
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino


def _file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def prefetch_digests(paths: Iterable[str]) -> None:
    """Begin the sha256 of local feed files on threads of their own, for ``source_digest`` to take up. hashlib lets go
    of the GIL, so a command hashes a 400 MB feed (0.35 s) on the second core while it imports Dagster. A digest is
    taken up only for the file state it began from and ended on (else the file is read again)."""

    def hashed(path: str, state: tuple, done: Future) -> None:
        try:
            digest = _file_digest(path)
            done.set_result(digest if _file_state(path) == state else None)
        except Exception:  # noqa: BLE001 - never leave the future unset: source_digest reads the file itself
            done.set_result(None)

    for path in paths:
        try:
            state = _file_state(path)
        except OSError:
            continue  # the stage names what is missing
        if state not in _AHEAD:
            _AHEAD[state] = Future()
            threading.Thread(target=hashed, args=(path, state, _AHEAD[state]), daemon=True, name="digest").start()
