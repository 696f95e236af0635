"""Videos through yt-dlp with every request routed through the web resource.

yt-dlp picks formats and extractors, but it never opens a socket itself: a request handler hands each of
its requests to ``WebResource.fetch``, so videos get the same politeness, SSRF guard, caps and WARC archive as
pages. Only plain HTTP(S) formats are allowed (no external downloaders, no ffmpeg network input). yt-dlp is imported
when a video is downloaded, not with the module: the code location imports it, and the runs of the other stages
need none of it.
"""

import functools
import io
import os
import tempfile

MAX_VIDEO_BYTES = 128 * 1024 * 1024
MAX_VIDEO_SECONDS = 300
# yt-dlp's headers go along (extractors need their API tokens), except these: our User-Agent stays honest,
# and the web resource owns the encoding and the framing.
_DROPPED_HEADERS = frozenset({"user-agent", "accept-encoding", "host", "content-length", "connection", "cookie"})


def js_runtimes() -> dict:
    """yt-dlp's JavaScript runtime for YouTube's signature and n challenges: the deno binary of the ``deno`` package
    (PyPI), which runs the solver scripts of ``yt-dlp-ejs`` locally (no remote component is ever fetched). Empty
    when the package is missing: yt-dlp then finds no runtime and YouTube formats that need one are skipped."""
    try:
        import deno
    except ImportError:
        return {}
    try:
        return {"deno": {"path": deno.find_deno_bin()}}
    except (OSError, RuntimeError):  # the package without its binary for this platform
        return {}


# What yt-dlp's extractors say when a platform refuses a video (their ExtractorError messages, e.g. YouTube's
# playability reasons in yt_dlp/extractor/youtube/_video.py), as drop reasons; anything else is ``ytdlp_failed``.
FAILURE_REASONS = (
    ("age_gate", ("confirm your age", "age-restricted", "age restricted", "inappropriate for some users")),
    ("private", ("private video", "this video is private", "this account is private", "is a private")),
    ("login_required", ("only available for registered users", "login required", "log in", "sign in",
                        "--cookies")),
    ("rate_limited", ("http error 429", "too many requests", "rate-limit", "rate limit")),
    ("geo_blocked", ("not available from your location", "not available in your country", "geo restriction")),
    ("forbidden", ("http error 403",)),  # the host refused the file itself (a signed URL expired, a bot wall)
    ("unavailable", ("video unavailable", "has been removed", "no longer available", "does not exist",
                     "http error 404", "not found")),
)


def failure_reason(message: str) -> str:
    """A drop reason for one of yt-dlp's error messages (first match in FAILURE_REASONS order)."""
    text = message.lower()
    for reason, needles in FAILURE_REASONS:
        if any(needle in text for needle in needles):
            return reason
    return "ytdlp_failed"


class VideoError(Exception):
    """A video was not downloaded; ``code`` is a short reason for the yields."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code, self.detail = code, detail


def _handler_class(web, max_bytes: int) -> type:
    """yt-dlp's ``RequestHandler`` that sends every request through the web resource ``web``."""
    from yt_dlp.networking.common import RequestHandler, Response
    from yt_dlp.networking.exceptions import HTTPError, TransportError, UnsupportedRequest

    class VeritasWebRH(RequestHandler):
        _SUPPORTED_URL_SCHEMES = ("http", "https")
        _SUPPORTED_PROXY_SCHEMES = None  # proxies are ignored: the web resource never uses one
        _SUPPORTED_FEATURES = None

        def _check_extensions(self, extensions):
            for key in ("cookiejar", "timeout", "legacy_ssl", "keep_header_casing", "impersonate"):
                extensions.pop(key, None)

        def _send(self, request):
            if request.method not in ("GET", "HEAD", "POST"):
                raise UnsupportedRequest(f"{request.method} is not allowed")
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROPPED_HEADERS}
            method = "POST" if request.method == "POST" else "GET"  # a HEAD is answered from a (reused) GET
            result = web.fetch(
                request.url, headers or None, max_bytes=max_bytes, reuse=True, method=method, data=_body(request.data)
            )
            if result.status is None:
                raise TransportError(msg=f"{result.error}: {result.error_detail}".strip(": "))
            if result.error is not None:
                raise TransportError(msg=f"{result.error} ({result.status})")
            body = b"" if request.method == "HEAD" else result.content
            out_headers = {
                k: v for k, v in result.headers.items() if k not in ("content-encoding", "content-length", "transfer-encoding")
            }
            out_headers["content-length"] = str(len(result.content))  # the body is already decoded
            response = Response(io.BytesIO(body), url=result.final_url, headers=out_headers, status=result.status)
            if not 200 <= result.status < 300:
                raise HTTPError(response)
            return response

    return VeritasWebRH


def _body(data) -> bytes | None:
    """yt-dlp request data (bytes, a file or an iterable of bytes) as bytes."""
    if data is None or isinstance(data, bytes):
        return data
    if hasattr(data, "read"):
        return data.read()
    return b"".join(data)


@functools.cache
def _guarded_ydl() -> type:
    """A YoutubeDL whose only request handler is the web resource (the class, made once)."""
    from yt_dlp import YoutubeDL

    class _GuardedYDL(YoutubeDL):
        def __init__(self, params: dict, handler: type):
            self._veritas_handler = handler
            super().__init__(params)

        @functools.cached_property
        def _request_director(self):
            return self.build_request_director([self._veritas_handler])

    return _GuardedYDL


class _QuietLogger:
    def __init__(self):
        self.errors: list[str] = []

    def debug(self, msg):
        pass

    def info(self, msg):
        pass

    def warning(self, msg):
        pass

    def error(self, msg):
        self.errors.append(msg)


def download_video(
    web, url: str, max_bytes: int = MAX_VIDEO_BYTES, max_seconds: float = MAX_VIDEO_SECONDS
) -> tuple[bytes, dict]:
    """(video bytes, info) for a page or file URL; VideoError with a reason otherwise."""
    import imageio_ffmpeg
    from yt_dlp.networking.exceptions import RequestError
    from yt_dlp.utils import YoutubeDLError, match_filter_func

    logger = _QuietLogger()
    with tempfile.TemporaryDirectory(prefix="veritas-ytdlp-") as folder:
        params = {
            "outtmpl": os.path.join(folder, "video.%(ext)s"),
            "paths": {"home": folder, "temp": folder},
            # single-file HTTP formats only: no merging, no HLS/DASH through ffmpeg's own networking
            "format": "best[protocol^=http][protocol!*=dash][vcodec!=none]/best[protocol^=http][protocol!*=dash]",
            "noplaylist": True,
            "max_filesize": max_bytes,
            "match_filter": match_filter_func(f"duration <=? {int(max_seconds)} & !is_live"),
            "retries": 0,  # the web resource retries
            "fragment_retries": 0,
            "extractor_retries": 0,
            "cachedir": False,
            "quiet": True,
            "no_warnings": True,
            "noprogress": True,
            "logger": logger,
            "ffmpeg_location": imageio_ffmpeg.get_ffmpeg_exe(),
            "proxy": "",
            "overwrites": True,
            "updatetime": False,
            "js_runtimes": js_runtimes(),
            "remote_components": [],  # the challenge solver comes from yt-dlp-ejs, never from the network
        }
        try:
            with _guarded_ydl()(params, _handler_class(web, max_bytes)) as ydl:
                info = ydl.extract_info(url, download=True)
        except (YoutubeDLError, RequestError) as exc:
            raise VideoError(failure_reason(str(exc)), str(exc)[:300]) from exc
        except Exception as exc:  # an extractor bug must cost one video, not the claim
            raise VideoError("ytdlp_error", f"{type(exc).__name__}: {exc}"[:300]) from exc
        if not info:
            raise VideoError("ytdlp_no_video", "; ".join(logger.errors)[:300])
        files = [os.path.join(folder, f) for f in os.listdir(folder) if f.startswith("video.") and not f.endswith(".part")]
        if not files:
            reason = "too_long" if (info.get("duration") or 0) > max_seconds else "ytdlp_no_file"
            raise VideoError(reason, "; ".join(logger.errors)[:300])
        path = max(files, key=os.path.getsize)
        if os.path.getsize(path) > max_bytes:
            raise VideoError("too_large", f"{os.path.getsize(path)} bytes")
        with open(path, "rb") as fh:
            data = fh.read()
    keep = ("id", "title", "duration", "ext", "webpage_url", "extractor", "uploader", "description")
    return data, {k: info.get(k) for k in keep if info.get(k) is not None}
