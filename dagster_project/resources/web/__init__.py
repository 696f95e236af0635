"""The web resource, the only way veritas touches the web, as a package with one job per module: ``records``
(``FetchResult``, the hop record, WARC field names), ``http_helpers`` (``normalize_url``, header/body decoding,
charsets), ``redirects`` (the redirect chain), ``replay`` (the WARC replay index), ``warc_writer`` (writing the
archive), ``politeness`` (per-host state, robots.txt), ``transport`` (the loop thread, the clients, the guard, hops
and retries) and ``resource`` (``WebResource``). This module only re-exports the names other modules import.
"""

from dagster_project.resources.crawl_guard import ALLOWED_SCHEMES
from dagster_project.resources.web.http_helpers import normalize_url
from dagster_project.resources.web.records import FetchResult
from dagster_project.resources.web.replay import WARC_SUFFIXES
from dagster_project.resources.web.resource import WebResource
from dagster_project.resources.web.transport import is_blocked_address

__all__ = ["ALLOWED_SCHEMES", "WARC_SUFFIXES", "FetchResult", "WebResource", "is_blocked_address", "normalize_url"]
