"""The offline knowledge store the verifier searches: dated text passages (BM25) and dated images (perceptual hashes).

Built from WARC archives (the web resource's captures, e.g. ``demo/snapshot/pages.warc.gz``) and/or the
``articles`` table.  Every entry carries a publication date and where that date came from:

* ``htmldate``: the page's own date (htmldate, original publication date preferred);
* ``archive``: a Wayback Machine capture timestamp in the URL (the page existed then);
* ``capture``: the WARC record's capture time (an upper bound: the page existed by then);
* ``none``: undated (excluded by the temporal guard unless explicitly allowed).

The **temporal guard** (``admissible``) is applied inside every search, before ranking, so no evidence
dated after the claim date is ever returned.
"""

import html as html_lib
import io
import json
import re
import threading
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path
from urllib.parse import urljoin

import numpy as np

#: AVerImaTeC's baseline cuts retrieved text into chunks of at most 128 words before BM25 selects among them.
CHUNK_WORDS = 128
_WAYBACK = re.compile(r"web\.archive\.org/web/(\d{8})(\d{0,6})[a-z_]*/", re.IGNORECASE)
_IMG = re.compile(r"<img\b[^>]*?\bsrc\s*=\s*[\"']([^\"']+)[\"'][^>]*>", re.IGNORECASE)
_ALT = re.compile(r"\balt\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)


@dataclass
class Passage:
    """A chunk of a dated document."""

    doc_id: int
    url: str
    title: str
    text: str
    published: str  # ISO date or ""
    date_source: str  # htmldate | archive | capture | article | none


@dataclass
class ImageEntry:
    """An image seen on the web, with the text around it and the date it was first seen."""

    url: str
    phash: str
    published: str
    date_source: str
    context: str = ""  # alt text and the embedding page's title
    page_url: str = ""
    width: int = 0
    height: int = 0


@dataclass
class Hit:
    """One search result handed to the verifier."""

    url: str
    text: str
    published: str
    date_source: str
    score: float
    kind: str = "text"  # text | image
    extra: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------ the guard


def as_date(value) -> date | None:
    if value in (None, ""):
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


def admissible(published, claim_date, allow_undated: bool = False) -> tuple[bool, str]:
    """Whether evidence published on ``published`` may be used for a claim made on ``claim_date``.

    Evidence dated after the claim date is never admissible; the claim's own day is.  Undated evidence is
    excluded unless ``allow_undated``; a claim without a date admits only what ``allow_undated`` admits.
    """
    pub, claim = as_date(published), as_date(claim_date)
    if pub is None:
        return allow_undated, "" if allow_undated else "undated"
    if claim is None:
        return allow_undated, "" if allow_undated else "undated_claim"
    if pub > claim:
        return False, "after_claim_date"
    return True, ""


# ------------------------------------------------------------------------------------- dating


def wayback_date(url: str) -> str:
    m = _WAYBACK.search(url or "")
    if not m:
        return ""
    try:
        return datetime.strptime(m.group(1), "%Y%m%d").date().isoformat()
    except ValueError:
        return ""


def page_date(html: str, url: str, capture: str = "") -> tuple[str, str]:
    """(ISO date, source): htmldate first, then a Wayback timestamp, then the WARC capture time."""
    from htmldate import find_date

    try:
        found = find_date(html, url=url, original_date=True, extensive_search=False)
    except Exception:  # noqa: BLE001 - htmldate raises on odd markup; the next source still dates the page
        found = None
    if found:
        return found[:10], "htmldate"
    archived = wayback_date(url)
    if archived:
        return archived, "archive"
    if capture:
        return capture[:10], "capture"
    return "", "none"


def chunks(text: str, words: int = CHUNK_WORDS) -> list[str]:
    tokens = (text or "").split()
    return [" ".join(tokens[i:i + words]) for i in range(0, len(tokens), words)] or []


def _bm25_tokens(texts: list[str]) -> list[list[str]]:
    import bm25s

    return bm25s.tokenize(texts, return_ids=False, show_progress=False, stopwords="english")


# ---------------------------------------------------------------------------------- the store


class KnowledgeStore:
    """Dated passages searched with BM25 and dated images searched by perceptual hash or by their context text."""

    def __init__(self, passages: list[Passage] | None = None, images: list[ImageEntry] | None = None):
        self.passages: list[Passage] = list(passages or [])
        self.images: list[ImageEntry] = list(images or [])
        self._text_index = None
        self._image_index = None
        self._index_lock = threading.Lock()  # claims are verified on several threads: each index is built once
        self._next_doc = 1 + max((p.doc_id for p in self.passages), default=-1)

    # -- building

    def add_document(self, url: str, text: str, published: str = "", date_source: str = "none",
                     title: str = "") -> int:
        doc_id, self._next_doc = self._next_doc, self._next_doc + 1
        for piece in chunks(text):
            self.passages.append(Passage(doc_id, url, title, piece, published, date_source if published else "none"))
        self._text_index = None
        return doc_id

    def add_image(self, data: bytes, url: str, published: str = "", date_source: str = "none",
                  context: str = "", page_url: str = "") -> ImageEntry | None:
        import imagehash
        from PIL import Image

        try:
            with Image.open(io.BytesIO(data)) as im:
                entry = ImageEntry(url, str(imagehash.phash(im)), published, date_source if published else "none",
                                   context, page_url, im.width, im.height)
        except Exception:  # noqa: BLE001 - not an image Pillow can read (e.g. an HTML error page served as image/*)
            return None
        self.images.append(entry)
        self._image_index = None
        return entry

    @classmethod
    def from_warc(cls, paths: list[str | Path], min_chars: int = 80) -> "KnowledgeStore":
        """Every HTML page (text via trafilatura, dated as above) and every image (dated by the earliest page that
        embeds it, else its own capture) in the WARC files."""
        import trafilatura
        from warcio.archiveiterator import ArchiveIterator

        pages, images = [], {}
        for path in paths:
            with open(path, "rb") as f:
                for record in ArchiveIterator(f):
                    if record.rec_type != "response" or record.http_headers is None:
                        continue
                    if record.http_headers.get_statuscode() != "200":
                        continue
                    url = record.rec_headers.get_header("WARC-Target-URI") or ""
                    capture = record.rec_headers.get_header("WARC-Date") or ""
                    kind = (record.http_headers.get_header("Content-Type") or "").split(";")[0].strip().lower()
                    body = record.content_stream().read()
                    if kind in ("text/html", "application/xhtml+xml"):
                        pages.append((url, capture, body.decode("utf-8", "replace")))
                    elif kind.startswith("image/"):
                        images[url] = (capture, body)
        store = cls()
        embedded: dict[str, list[tuple[str, str, str, str]]] = {}
        for url, capture, html in pages:
            published, source = page_date(html, url, capture)
            text = trafilatura.extract(html, url=url, include_comments=False) or ""
            title_match = re.search(r"<title[^>]*>(.*?)</title>", html, re.IGNORECASE | re.DOTALL)
            title = html_lib.unescape(re.sub(r"\s+", " ", title_match.group(1)).strip())[:200] if title_match else ""
            if len(text) >= min_chars:
                store.add_document(url, text, published, source, title)
            for tag in _IMG.finditer(html):
                alt = _ALT.search(tag.group(0))
                src = urljoin(url, tag.group(1))
                alt_text = html_lib.unescape(alt.group(1)) if alt else ""
                embedded.setdefault(src, []).append((published, source, url, f"{alt_text} {title}".strip()))
        for url, (capture, body) in images.items():
            seen = sorted((e for e in embedded.get(url, []) if e[0]), key=lambda e: e[0])
            if seen:
                published, source, page, context = seen[0]
            else:
                published, source, page, context = (capture[:10], "capture", "", "") if capture else ("", "none", "", "")
            store.add_image(body, url, published, source, context, page)
        return store

    def add_articles(self, articles) -> None:
        """Fact-check articles (``Article`` records) as documents dated by their ``published`` field."""
        for a in articles:
            published = (a.published or "")[:10]
            self.add_document(a.final_url or a.review_url, a.text, published, "article" if published else "none", a.title)

    # -- persistence

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        payload = {"passages": [asdict(p) for p in self.passages], "images": [asdict(i) for i in self.images]}
        path.write_text(json.dumps(payload, ensure_ascii=False))
        return path

    @classmethod
    def load(cls, path: str | Path) -> "KnowledgeStore":
        payload = json.loads(Path(path).read_text())
        return cls([Passage(**p) for p in payload["passages"]], [ImageEntry(**i) for i in payload["images"]])

    def stats(self) -> dict:
        sources: dict[str, int] = {}
        for p in self.passages:
            sources[p.date_source] = sources.get(p.date_source, 0) + 1
        return {"documents": len({p.doc_id for p in self.passages}), "passages": len(self.passages),
                "images": len(self.images), "passage_date_sources": sources}

    # -- search

    def _mask(self, entries, claim_date, allow_undated: bool, exclude_urls: set[str]) -> tuple[np.ndarray, dict]:
        mask = np.zeros(len(entries), dtype=np.float32)
        rejected: dict[str, int] = {}
        for i, e in enumerate(entries):
            ok, why = admissible(e.published, claim_date, allow_undated)
            if ok and e.url in exclude_urls:
                ok, why = False, "excluded_url"
            if ok:
                mask[i] = 1.0
            else:
                rejected[why] = rejected.get(why, 0) + 1
        return mask, rejected

    def _bm25(self, texts: list[str]):
        import bm25s

        retriever = bm25s.BM25()
        retriever.index(_bm25_tokens(texts), show_progress=False)
        return retriever

    def _ranked(self, index, n: int, query: str, mask: np.ndarray, k: int) -> list[tuple[int, float]]:
        tokens = _bm25_tokens([query])
        if n == 0 or not tokens or not tokens[0] or not mask.any():
            return []
        docs, scores = index.retrieve(tokens, k=min(n, max(k, 1)), weight_mask=mask, show_progress=False)
        return [(int(d), float(s)) for d, s in zip(docs[0], scores[0]) if s > 0 and mask[int(d)] > 0]

    def text_search(self, query: str, claim_date, k: int = 5, allow_undated: bool = False,
                    exclude_urls: set[str] = frozenset()) -> tuple[list[Hit], dict]:
        """The ``k`` best admissible passages for ``query`` and the count of passages the guard rejected, by reason."""
        with self._index_lock:
            if self._text_index is None and self.passages:
                self._text_index = self._bm25([f"{p.title} {p.text}" for p in self.passages])
        mask, rejected = self._mask(self.passages, claim_date, allow_undated, set(exclude_urls))
        hits = [Hit(self.passages[i].url, self.passages[i].text, self.passages[i].published,
                    self.passages[i].date_source, s, "text", {"title": self.passages[i].title})
                for i, s in self._ranked(self._text_index, len(self.passages), query, mask, k)]
        return hits, rejected

    def image_search(self, query: str, claim_date, k: int = 3, allow_undated: bool = False,
                     exclude_urls: set[str] = frozenset()) -> tuple[list[Hit], dict]:
        """Images whose surrounding text (alt, page title) matches ``query``."""
        with self._index_lock:
            if self._image_index is None and self.images:
                self._image_index = self._bm25([f"{i.context} {i.url}" for i in self.images])
        mask, rejected = self._mask(self.images, claim_date, allow_undated, set(exclude_urls))
        hits = [Hit(self.images[i].url, self.images[i].context or self.images[i].url, self.images[i].published,
                    self.images[i].date_source, s, "image", {"page_url": self.images[i].page_url})
                for i, s in self._ranked(self._image_index, len(self.images), query, mask, k)]
        return hits, rejected

    def reverse_image_search(self, data: bytes, claim_date, k: int = 3, max_distance: int = 10,
                             allow_undated: bool = False, exclude_urls: set[str] = frozenset()) -> tuple[list[Hit], dict]:
        """Earlier copies of an image: entries within ``max_distance`` bits of its perceptual hash, nearest first."""
        import imagehash
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            probe = imagehash.phash(im)
        mask, rejected = self._mask(self.images, claim_date, allow_undated, set(exclude_urls))
        found = []
        for i, entry in enumerate(self.images):
            if mask[i] == 0:
                continue
            distance = probe - imagehash.hex_to_hash(entry.phash)
            if distance <= max_distance:
                found.append((distance, i))
        hits = []
        for distance, i in sorted(found)[:k]:
            e = self.images[i]
            text = f"The same image (hash distance {distance}) appeared at {e.page_url or e.url}" + \
                   (f" on {e.published}" if e.published else "") + (f": {e.context}" if e.context else "")
            hits.append(Hit(e.page_url or e.url, text, e.published, e.date_source, 1.0 - distance / 64, "image",
                            {"image_url": e.url, "distance": int(distance)}))
        return hits, rejected
