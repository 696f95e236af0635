"""The ``factcheck_api_live`` source kind: ``FactCheckToolsClient``, a client of the live Fact Check Tools
``claims:search`` endpoint (pages followed by ``nextPageToken``, retries on 429/503 honouring Retry-After), and
``FactCheckToolsError``; the claims it gives are read as a ``factcheck_api`` answer.
"""

import email.utils
import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import httpx

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
