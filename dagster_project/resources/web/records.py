"""The records the web resource passes around: ``FetchResult`` (what one fetch produced, live or replayed, and what
callers get), ``_Hop`` (one request/response exchange inside a fetch), the names of veritas's own WARC fields, the
WARC-Truncated reasons mapped to fetch errors, and the ranks that order an archived answer (a final answer beats a
partial or retryable one, which beats a recorded failure).
"""

import codecs

import pydantic
from pydantic import Field

from dagster_project.resources.web.http_helpers import _META_CHARSET_RE, _known_codec

# Our own fields inside failure `metadata` records; the prefix keeps them apart from other tools' metadata.
ERROR_FIELD = "veritas-error"
DETAIL_FIELD = "veritas-error-detail"
# Extension WARC field on records of requests other than a plain GET: "<METHOD> sha1:<body digest>".
VARIANT_FIELD = "Veritas-Request-Variant"
ASSEMBLED_FIELD = "Veritas-Assembled-From"  # on a resource record: the whole body rebuilt from partial answers
# WARC-Truncated reason -> FetchResult.error, so a replayed truncated record reports what the live fetch did.
TRUNCATION_ERRORS = {"length": "too_large", "time": "timeout", "disconnect": "read_error", "unspecified": "truncated"}
# Index ranks: a final answer beats a partial or retryable one, which beats a recorded failure.
RANK_FAILURE, RANK_PARTIAL, RANK_FINAL = 0, 1, 2


class FetchResult(pydantic.BaseModel):
    """What one fetch produced, live or replayed."""

    url: str
    final_url: str
    status: int | None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    error_detail: str = ""
    elapsed_s: float = 0.0
    # URLs that answered with a redirect, in order (starts with `url` when any redirect happened).
    redirects: list[str] = Field(default_factory=list)
    # WARC file the final response was written to (live) or served from (replay).
    warc_path: str | None = None
    attempts: int = 0  # network attempts of the final hop (0: served from the archive or refused before sending)
    from_archive: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300

    @property
    def content_type(self) -> str:
        return self.headers.get("content-type", "").split(";", 1)[0].strip().lower()

    def text(self) -> str:
        """Body decoded with the header charset, else an HTML meta charset or BOM, else UTF-8."""
        for candidate in (self._header_charset(), self._meta_charset()):
            codec = _known_codec(candidate)
            if codec:
                return self.content.decode(codec, errors="replace")
        if self.content.startswith(codecs.BOM_UTF8):
            return self.content[len(codecs.BOM_UTF8):].decode("utf-8", errors="replace")
        if self.content.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
            return self.content.decode("utf-16", errors="replace")
        return self.content.decode("utf-8", errors="replace")

    def _header_charset(self) -> str | None:
        for param in self.headers.get("content-type", "").split(";")[1:]:
            key, _, value = param.partition("=")
            if key.strip().lower() == "charset":
                return value.strip().strip("\"'")
        return None

    def _meta_charset(self) -> str | None:
        # Browsers only look at the first 1024 bytes; a bit more tolerates long <head>s.
        match = _META_CHARSET_RE.search(self.content[:4096])
        return match.group(1).decode("ascii") if match else None


def _status_rank(status: int | None, truncated: str | None) -> int:
    if status is None:
        return RANK_FAILURE
    if truncated or status in (206, 304) or status == 429 or status >= 500:
        return RANK_PARTIAL
    return RANK_FINAL


class _Hop(pydantic.BaseModel):
    """One request/response exchange inside fetch(); internal."""

    status: int | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    content: bytes = b""
    error: str | None = None
    detail: str = ""
    location: str | None = None
    warc_path: str | None = None
    attempts: int = 0
    from_archive: bool = False
