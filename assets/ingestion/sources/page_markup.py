"""The ``page_markup`` source kind: ClaimReview markup read from the fact-check pages themselves (JSON-LD,
microdata and RDFa, through extruct): ``fetch_page_markup`` fetches the pages into ``PageMarkup``,
``claimreviews_from_page`` finds a page's ClaimReviews, and ``iter_page_markup`` reads them into triples.
"""

import typing
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import urljoin

from assets.ingestion.sources.claimreview import (
    Triple,
    claimreview_to_row,
    normalize_claim_text,
)

if typing.TYPE_CHECKING:  # Dagster is not imported here: a process that reads a feed range starts without it
    from dagster_project.resources.web import WebResource

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
