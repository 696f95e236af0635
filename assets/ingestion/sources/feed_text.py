"""The incremental JSON reading under ``stream_datafeed``: ``_FeedText`` decodes a binary stream a read at a
time and frames and parses one value at a time within ``MAX_RECORD_CHARS`` and ``MAX_RECORD_DEPTH`` (a value
over a cap, one that does not parse, or one with bytes that are not UTF-8 is skipped unparsed, with its reason),
with the strict decoder (``_DECODER``), the patterns and read size it uses, and ``_FeedEnd``, raised when the
feed cannot be read on.
"""

import codecs
import json
import re
from typing import Any, BinaryIO, Iterable

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
_UNDECODABLE = re.compile("[\udc80-\udcff]")
_ENTRY_GAP = re.compile(r",[ \t\n\r]*\{")  # where the next entry of a list may start
_RESYNC_TRIES = 64  # candidate entry starts tried after a record that does not parse  # a byte that is not UTF-8, as the surrogateescape decoder holds it


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
        self.entry_key = "item"  # the key every entry of the list has: a DataFeedItem's, or a ClaimReview's

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
                reason = "invalid_utf8" if bad_byte else "malformed_record_json"
                resync = self._next_entry(start, err.pos)
                if resync is not None:  # the record's own brackets are broken: counting them would take the next
                    self.pos = resync
                    return None, reason
                return self._skip(reason, err.msg)
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

    def _next_entry(self, start: int, failed_at: int) -> int | None:
        """After a record that does not parse, the index of the ``,`` before the next entry of the list, when the
        parse or the counting of the record's brackets ran into it: the first ``, {`` before the later of the two
        ends where an object that is an entry (it has ``entry_key``: ``item``, or ``claimReviewed`` in a list of
        ClaimReviews) decodes and is followed by ``,`` or ``]``. A lost brace or quote makes both run on through the
        next records; where no value starts at all (stray brackets), the next entry is looked for in all the text
        held. None when they stop inside the record (``_skip`` then counts its brackets): an entry after it that
        does not parse (NaN, say) is then read, and quarantined, as itself."""
        framed = self._scan(start, 0, False)[0]  # where counting brackets ends, or the end of the text held
        if framed <= start:  # no value starts here (stray brackets between entries): the next entry, wherever it is
            framed = len(self.text)
        for tried, gap in enumerate(_ENTRY_GAP.finditer(self.text, start + 1, max(failed_at + 1, framed))):
            if tried >= _RESYNC_TRIES:
                return None
            try:
                value, end = _DECODER.raw_decode(self.text, gap.end() - 1)
            except (ValueError, RecursionError):
                continue
            after = _WS.match(self.text, end).end()
            entry = isinstance(value, dict) and self.entry_key in value
            if entry and self.text[after:after + 1] in (",", "]"):
                return gap.start()
        return None

    def _scan(self, i: int, depth: int, in_string: bool) -> tuple[int, int, bool, bool]:
        """Brackets counted outside strings over the text held, from index ``i`` inside a value at ``depth``:
        (index, depth, in a string, closed), closed when the value ends just before the index."""
        text = self.text
        while i < len(text):
            if in_string:
                i = _IN_STRING.match(text, i).end()
                if i >= len(text) or text[i] != '"':
                    return i, depth, True, False  # the string goes on in the next read (perhaps after a cut escape)
                i, in_string = i + 1, False
                if depth == 0:
                    return i, depth, False, True
                continue
            token = _OUTSIDE.match(text, i).group()
            if token == '"':
                in_string = True
            elif token[0] in "[{":
                depth += len(token)
            elif token[0] in "]}":
                if depth <= len(token):
                    return i + depth, 0, False, True
                depth -= len(token)
            i += len(token)
        return i, depth, in_string, False

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
            i, depth, in_string, closed = self._scan(i, depth, in_string)
            if closed:
                self.pos = i
                return None, reason
            self.pos = i  # what was scanned is let go: memory stays at one read
            if not self.more():
                self.fail("", f"inside a record that was left unread ({reason})")
            i = self.pos
