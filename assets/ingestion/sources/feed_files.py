"""A local feed file opened as the feed reader reads it: a regular file only (``open_regular``: a FIFO, a device
such as ``/dev/zero`` or a folder stops with ``FeedFileError`` instead of hanging), its encoding found from its
first bytes (``sniff``: gzip, a UTF-8/16/32 byte order mark, or UTF-16/32 without one as RFC 8259 tells them
apart), and ``open_feed``, which gives a stream of UTF-8 bytes whatever the file holds. A gzip stream that ends
early ends the text there (``GzipTail.cut``), so the reader keeps what came before and quarantines the rest as
``truncated_feed``.
"""

import codecs
import os
import stat
import zlib
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
_KINDS = {stat.S_IFIFO: "a FIFO (named pipe)", stat.S_IFCHR: "a character device", stat.S_IFBLK: "a block device",
          stat.S_IFSOCK: "a socket", stat.S_IFDIR: "a folder", stat.S_IFLNK: "a link"}


class FeedFileError(ValueError):
    """A feed file that cannot be read as a feed: not a regular file, or no feed shape in it. The message names the
    file and what was found, in one line."""


def open_regular(path: str | os.PathLike) -> BinaryIO:
    """``path`` opened for reading in binary, when it is a regular file (followed through links). The open does not
    block (a FIFO with no writer would wait forever), and the check is on the file opened, not on the name."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise FeedFileError(f"{path}: is a folder, not a feed file") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise FeedFileError(f"{path}: is {_KINDS.get(stat.S_IFMT(mode), 'not a regular file')}, not a feed file: "
                            "give the path of a file that holds the feed")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def sniff(head: bytes) -> tuple[bool, str]:
    """(gzip-compressed, text encoding) of a file from its first bytes; for gzip, the encoding of what it holds
    is found after decompressing (``open_feed``)."""
    if head.startswith(GZIP_MAGIC):
        return True, ""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return False, encoding
    if len(head) >= 4:  # JSON text starts with an ASCII character: its zero bytes give the width and order
        zeros = tuple(b == 0 for b in head[:4])
        encoding = {(True, True, True, False): "utf-32-be", (False, True, True, True): "utf-32-le",
                    (True, False, True, False): "utf-16-be", (False, True, False, True): "utf-16-le"}.get(zeros)
        if encoding:
            return False, encoding
    return False, "utf-8"


def rangeable(path: str | os.PathLike) -> bool:
    """Whether a file can be read in byte ranges: its bytes are the feed's UTF-8 text as they are (no compression,
    no other encoding), and it is a feed object (a range starts inside the object's list)."""
    with open_regular(path) as fh:
        head = fh.read(1024)
    compressed, encoding = sniff(head)
    return not compressed and encoding == "utf-8" and head.removeprefix(codecs.BOM_UTF8).lstrip()[:1] == b"{"


class GzipTail:
    """A gzip stream decompressed a read at a time, members one after another. An early end (a cut download) or a
    corrupt tail ends the data there instead of raising, after every byte that decompressed: ``cut`` says why.
    (zlib's own object, not ``gzip.GzipFile``, whose read raises on a cut stream and loses the read's bytes.)"""

    def __init__(self, raw) -> None:
        self._raw = raw
        self._inflate = zlib.decompressobj(wbits=31)  # 31: a gzip header and trailer around the deflate data
        self.cut = ""

    def read(self, n: int = -1) -> bytes:
        if n < 0:  # all of it
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        while not self.cut:
            data = self._raw.read(max(n, 1 << 16))  # what one read inflates to is any size: not fewer bytes
            if not data:
                if not self._inflate.eof:
                    self.cut = "the gzip stream ends early"
                return b""
            try:
                out = self._inflate.decompress(data)
                while self._inflate.eof and self._inflate.unused_data:  # another member follows
                    rest = self._inflate.unused_data
                    self._inflate = zlib.decompressobj(wbits=31)
                    out += self._inflate.decompress(rest)
            except zlib.error as err:
                self.cut = f"the gzip stream is corrupt ({err})"
                return b""
            if out:
                return out
        return b""

    def close(self) -> None:
        self._raw.close()


def _undecodable_bytes(err: UnicodeDecodeError) -> tuple[str, int]:
    """Bytes that are not text in the file's encoding, held as U+DC80..U+DCFF as for UTF-8: the record holding them
    is then quarantined as ``invalid_utf8`` (the feed reader's reason for a byte that is not text)."""
    bad = err.object[err.start:err.end]
    return "".join(chr(0xDC80 | (b & 0x7F)) for b in bad), err.end


codecs.register_error("veritas.undecodable", _undecodable_bytes)


class Recoded:
    """A byte stream in another encoding given as UTF-8 bytes, a read at a time (no more than a read is held)."""

    def __init__(self, raw, encoding: str) -> None:
        self._raw = raw
        self._decoder = codecs.getincrementaldecoder(encoding)("veritas.undecodable")
        self._done = False

    def read(self, n: int = -1) -> bytes:
        if n < 0:  # all of it
            return b"".join(iter(lambda: self.read(1 << 20), b""))
        while not self._done:
            data = self._raw.read(n)
            self._done = not data
            text = self._decoder.decode(data, final=self._done)
            if text or self._done:
                return text.encode("utf-8", "surrogateescape")
        return b""

    def close(self) -> None:
        self._raw.close()


def _peek(stream, n: int) -> tuple[bytes, object]:
    """The first ``n`` bytes of a stream, and a stream that still gives them."""
    head = b""
    while len(head) < n:
        more = stream.read(n - len(head))
        if not more:
            break
        head += more
    return head, _Prefixed(head, stream)


class _Prefixed:
    def __init__(self, head: bytes, stream) -> None:
        self._head, self._stream = head, stream

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            data, self._head = self._head + self._stream.read(), b""
            return data
        if self._head:
            data, self._head = (self._head, b"") if n >= len(self._head) else (self._head[:n], self._head[n:])
            return data
        return self._stream.read(n)

    def close(self) -> None:
        self._stream.close()


def open_feed(path: str | os.PathLike) -> tuple[object, str]:
    """A feed file as a stream of UTF-8 bytes, and what it was (``"utf-8"``, ``"gzip, utf-16-le"``, ...). The caller
    closes the stream; a ``GzipTail`` in it says whether the gzip stream was cut (``cut_of``)."""
    raw = open_regular(path)
    head, stream = _peek(raw, 4)
    compressed, encoding = sniff(head)
    shape = []
    if compressed:
        stream = GzipTail(stream)
        head, stream = _peek(stream, 4)
        encoding = sniff(head)[1]
        shape.append("gzip")
    shape.append(encoding)
    if encoding not in ("utf-8",):
        stream = Recoded(stream, encoding)
    return stream, ", ".join(shape)


def cut_of(stream) -> str:
    """Why the gzip stream under ``stream`` ended early, or ""."""
    while stream is not None:
        if isinstance(stream, GzipTail):
            return stream.cut
        stream = getattr(stream, "_raw", None) or getattr(stream, "_stream", None)
    return ""
