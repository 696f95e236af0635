"""Redirect following of the web resource, one rule for live and replay: a chain starts at the URL without its
fragment, every hop's answer becomes a ``FetchResult`` (a 2xx of an unwanted type refused as ``bad_content_type``),
and a redirect is followed unless it loops or exceeds ``max_redirects``; 301/302/303 turn a POST into a GET.
``RedirectMixin`` holds these methods of ``WebResource``.
"""

from urllib.parse import urljoin

from dagster_project.resources.web.http_helpers import normalize_url
from dagster_project.resources.web.records import FetchResult, _Hop

REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


class RedirectMixin:
    """The redirect chain of ``WebResource``, shared by both modes.

    Reads the field ``max_redirects`` and no private attribute; ``_afollow`` takes each hop from ``_ahop``
    (``TransportMixin``).
    """

    # ---- redirects (shared by both modes) -------------------------------------------------

    def _start_chain(self, url: str) -> tuple[str, set[str], list[str]]:
        current = url.split("#", 1)[0]
        return current, {normalize_url(current)}, []

    def _step(self, url: str, current: str, hop: _Hop, seen: set[str], redirects: list[str], content_types):
        """(next URL or None, the result so far): the one redirect rule for live and replay."""
        result = FetchResult(
            url=url,
            final_url=current,
            status=hop.status,
            headers=hop.headers,
            content=hop.content,
            error=hop.error,
            error_detail=hop.detail,
            redirects=list(redirects),
            warc_path=hop.warc_path,
            attempts=hop.attempts,
            from_archive=hop.from_archive,
        )
        if (
            hop.error is None
            and hop.status is not None
            and 200 <= hop.status < 300
            and content_types is not None
            and result.content_type  # no Content-Type at all is left to the caller's own sniffing
            and not any(result.content_type.startswith(t) for t in content_types)
        ):
            result.error, result.error_detail, result.content = "bad_content_type", result.content_type, b""
        if hop.error is not None or hop.status not in REDIRECT_STATUSES or not hop.location:
            return None, result
        target = urljoin(current, hop.location.strip()).split("#", 1)[0]
        if normalize_url(target) in seen:
            result.error = "redirect_loop"
            return None, result
        if len(redirects) >= self.max_redirects:
            result.error = "too_many_redirects"
            return None, result
        redirects.append(current)
        seen.add(normalize_url(target))
        return target, result

    def _follow_sync(self, url: str, hop_fn, content_types=None, method="GET", data=None) -> FetchResult:
        current, seen, redirects = self._start_chain(url)
        while True:
            hop = hop_fn(current, method, data)
            target, result = self._step(url, current, hop, seen, redirects, content_types)
            if target is None:
                return result
            current, (method, data) = target, _after_redirect(hop.status, method, data)

    async def _afollow(self, url: str, *, headers, content_types, max_bytes, reuse, method, data) -> FetchResult:
        current, seen, redirects = self._start_chain(url)
        while True:
            hop = await self._ahop(current, headers, content_types, max_bytes, reuse, method=method, data=data)
            target, result = self._step(url, current, hop, seen, redirects, content_types)
            if target is None:
                return result
            current, (method, data) = target, _after_redirect(hop.status, method, data)


def _after_redirect(status: int | None, method: str, data: bytes | None) -> tuple[str, bytes | None]:
    """301/302/303 turn a POST into a GET without a body (what browsers do); 307/308 repeat it."""
    if status in (301, 302, 303) and method != "GET":
        return "GET", None
    return method, data
