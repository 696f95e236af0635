"""The configured sources loaded: ``load_sources`` turns each ``SourceSpec`` into the ``(kind, origin, payload)``
that ``read_source`` reads (a local feed's path, a fetched feed's rows, a ``claims:search`` answer, the pages'
markup) and a status per origin for the yield.
"""

import os
import typing
from typing import Any

from assets.ingestion.sources.datafeed_url import (
    feed_url_triples,
    fetch_feed_incremental,
)
from assets.ingestion.sources.factcheck_api import claims_search_dump
from assets.ingestion.sources.factcheck_api_live import FactCheckToolsClient
from assets.ingestion.sources.feed_files import open_feed
from assets.ingestion.sources.page_markup import fetch_page_markup

if typing.TYPE_CHECKING:  # Dagster is not imported here: a process that reads a feed range starts without it
    from dagster_project.resources.web import WebResource

# ---- the configured sources --------------------------------------------------------------------------------------

def load_sources(specs: list[Any], web: "WebResource | None", state_dir: str | os.PathLike) -> tuple[list[tuple[str, str, Any]], dict[str, str]]:
    """Configured sources -> (kind, origin, payload) for ``ingest``, and a status per origin for the yield.

    Local feeds are streamed from disk; feed URLs are fetched incrementally (status new/changed/unchanged)."""
    from dagster_project.stage_settings import SourceSpec

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
                stream, _ = open_feed(path)  # a regular file only; gzip and UTF-16/32 read as for a feed
                try:
                    body = stream.read()
                finally:
                    stream.close()
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
