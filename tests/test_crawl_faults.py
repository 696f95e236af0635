"""Issue 4 fault tests: the live web resource against hostile and flaky loopback servers.

Every case runs inside a PacketGuard: name resolution is fake (test names map to 127.0.0.1, one name maps to
10.0.0.1) and any connect outside 127.0.0.0/8 and ::1 is refused locally and recorded as a violation.
"""

import asyncio
import gzip
import zlib
from collections import Counter

import pytest
from warcio.archiveiterator import ArchiveIterator

from dagster_project.resources.web import WebResource
from dagster_project.resources.web import transport as web_module
from tests.loopback_web import LoopbackServer, PacketGuard, Reply, Request

NEWS = "news.test"
HOSTILE = "hostile.test"
N_PAGES = 40
FAULTS = ("429", "500", "timeout", "reset")  # cycled over the faulty pages
READ_TIMEOUT_S = 1.0  # generous: a busy shared machine must not turn a normal answer into a timeout
CAP = 1024 * 1024


def _page(i: int) -> bytes:
    return f"<html><body><h1>Page {i}</h1><p>{'text ' * 50}</p></body></html>".encode()


def _fault_of(i: int) -> str:
    """30 % of the pages (i % 10 in 0, 3, 6) fail their first request, each with one of four faults."""
    faulty = [j for j in range(N_PAGES) if j % 10 in (0, 3, 6)]
    return FAULTS[faulty.index(i) % len(FAULTS)] if i in faulty else ""


def _flaky_handler(seen: Counter):
    async def handle(req: Request) -> Reply:
        i = int(req.path.rsplit("/", 1)[1])
        seen[i] += 1
        fault = _fault_of(i) if seen[i] == 1 else ""
        if fault == "429":
            return Reply(429, {"Retry-After": "1", "Content-Type": "text/plain"}, b"slow down")
        if fault == "500":
            return Reply(500, {"Content-Type": "text/plain"}, b"broken")
        if fault == "timeout":
            return Reply(action="hang", delay_s=READ_TIMEOUT_S * 3)
        if fault == "reset":
            return Reply(action="reset")
        return Reply(200, {"Content-Type": "text/html; charset=utf-8"}, _page(i))

    return handle


def _web(archive_dir, **kw) -> WebResource:
    opts = {
        "mode": "live", "archive_dir": str(archive_dir), "allow_private_hosts": [NEWS, HOSTILE],
        "per_host_delay_s": 0.0, "per_host_concurrency": 8, "read_timeout_s": READ_TIMEOUT_S,
        "connect_timeout_s": 2.0, "backoff_s": 0.01,
    }
    opts.update(kw)
    return WebResource(**opts)


def _warc_records(folder) -> list[tuple[str, str, str, bytes]]:
    """(type, target URI, WARC-Truncated, payload) of every record in the folder's WARC files."""
    out = []
    for path in sorted(folder.glob("*.warc.gz")):
        with open(path, "rb") as fh:
            for rec in ArchiveIterator(fh):
                out.append((rec.rec_type, rec.rec_headers.get_header("WARC-Target-URI") or "",
                            rec.rec_headers.get_header("WARC-Truncated") or "", rec.content_stream().read()))
    return out


@pytest.fixture()
def guard():
    with PacketGuard({NEWS: "127.0.0.1", HOSTILE: "127.0.0.1", "internal.test": "10.0.0.1"}) as g:
        yield g
    assert g.violations == []


def test_thirty_percent_faults_lose_nothing_and_a_rerun_fetches_only_the_failures(tmp_path, guard):
    seen: Counter = Counter()
    with LoopbackServer(_flaky_handler(seen)) as srv:
        urls = [f"http://{NEWS}:{srv.port}/page/{i}" for i in range(N_PAGES)]
        faulty = {i for i in range(N_PAGES) if _fault_of(i)}
        assert len(faulty) == 12 and Counter(_fault_of(i) for i in faulty) == {f: 3 for f in FAULTS}

        first = _web(tmp_path, max_retries=0)
        try:
            results = first.fetch_many(urls, reuse=True)
            log = first.fetch_log()
        finally:
            first.close()
        failed = {i for i, r in enumerate(results) if not r.ok}
        assert failed == faulty
        outcome = Counter(r.error or str(r.status) for r in results if not r.ok)
        assert outcome == {"429": 3, "500": 3, "timeout": 3, "read_error": 3}
        assert len(log) == N_PAGES and {e["url"] for e in log} == set(urls)  # every URL has its record
        # every page, failed or not, is in the archive: a response record or a failure record
        archived = {uri for kind, uri, _, _ in _warc_records(tmp_path) if kind in ("response", "metadata")}
        assert archived == set(urls)

        requests_before = len(srv.requests)
        again = _web(tmp_path, max_retries=0)
        try:
            second = again.fetch_many(urls, reuse=True)
            second_log = again.fetch_log()
        finally:
            again.close()
        rerun_paths = sorted(int(r.path.rsplit("/", 1)[1]) for r in srv.requests[requests_before:])
        assert rerun_paths == sorted(faulty)  # only what failed went over the network again
        assert all(r.ok for r in second) and [r.content for r in second] == [_page(i) for i in range(N_PAGES)]
        assert sum(e["from_archive"] for e in second_log) == N_PAGES - len(faulty)


def test_retries_recover_every_fault_in_one_run_honouring_retry_after(tmp_path, guard):
    seen: Counter = Counter()
    with LoopbackServer(_flaky_handler(seen)) as srv:
        urls = [f"http://{NEWS}:{srv.port}/page/{i}" for i in range(N_PAGES)]
        web = _web(tmp_path, max_retries=2)
        try:
            results = web.fetch_many(urls)
        finally:
            web.close()
        assert all(r.ok for r in results)
        assert [r.attempts for r in results] == [2 if _fault_of(i) else 1 for i in range(N_PAGES)]
        # the second request of a 429 page came no sooner than its Retry-After (1 s) asked
        for i in [i for i in range(N_PAGES) if _fault_of(i) == "429"]:
            times = [r.at for r in srv.requests if r.path == f"/page/{i}"]
            assert len(times) == 2 and times[1] - times[0] >= 0.95
    # both attempts of each faulty page are in the archive
    per_uri = Counter(uri for kind, uri, _, _ in _warc_records(tmp_path) if kind in ("response", "metadata"))
    assert [per_uri[u] for u in urls] == [2 if _fault_of(i) else 1 for i in range(N_PAGES)]


# --------------------------------------------------------------------------- hostile server

GIB = 1024 ** 3


def _bomb() -> bytes:
    """200 MB of zeros gzipped to ~200 KB."""
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1024 * 1024)
    return b"".join(z.compress(block) for _ in range(200)) + z.flush()


async def _gigabyte():
    block = b"y" * (1024 * 1024)
    for _ in range(1024):
        yield block


async def _drip():
    for _ in range(2000):
        yield b"."
        await asyncio.sleep(0.05)


def _hostile_handler(port_of):
    bomb = _bomb()

    async def handle(req: Request) -> Reply:
        port = port_of()
        path = req.path
        text = {"Content-Type": "text/plain"}
        if path == "/bomb":
            return Reply(200, {**text, "Content-Encoding": "gzip"}, bomb)
        if path == "/huge":
            return Reply(200, {**text, "Content-Length": str(GIB)}, _gigabyte)
        if path == "/huge-chunked":
            return Reply(200, text, _gigabyte, chunked=True)
        if path == "/drip":
            return Reply(200, text, _drip, chunked=True)
        if path == "/loop-a":
            return Reply(302, {"Location": "/loop-b"})
        if path == "/loop-b":
            return Reply(302, {"Location": "/loop-a"})
        if path == "/to-loopback":
            return Reply(302, {"Location": f"http://127.0.0.1:{port}/secret"})
        if path == "/to-private":
            return Reply(302, {"Location": "http://10.0.0.1/admin"})
        if path == "/to-metadata":
            return Reply(301, {"Location": "http://169.254.169.254/latest/meta-data/"})
        if path == "/to-rebound-name":
            return Reply(302, {"Location": "http://internal.test/"})
        if path == "/to-file":
            return Reply(302, {"Location": "file:///etc/passwd"})
        if path == "/image-not-html":
            return Reply(200, {"Content-Type": "image/png"}, b"\x89PNG" + b"0" * 5000)
        return Reply(404, text, b"no")

    return handle


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    archive = tmp_path_factory.mktemp("hostile-warc")
    holder = {}
    guard = PacketGuard({HOSTILE: "127.0.0.1", "internal.test": "10.0.0.1"})
    server = LoopbackServer(_hostile_handler(lambda: holder["port"]))
    with guard as g, server as srv:
        holder["port"] = srv.port
        base = f"http://{HOSTILE}:{srv.port}"
        web = _web(archive, max_bytes=CAP, max_fetch_s=1.0, max_retries=0)
        paths = ["/bomb", "/huge", "/huge-chunked", "/drip", "/loop-a", "/to-loopback", "/to-private",
                 "/to-metadata", "/to-rebound-name", "/to-file"]
        try:
            results = dict(zip(paths, web.fetch_many([base + p for p in paths]), strict=True))
            results["/image-not-html"] = web.fetch(base + "/image-not-html", content_types=("text/html",))
        finally:
            web.close()
        sent = srv.bytes_sent
    return {"results": results, "violations": g.violations, "connects": g.connects, "sent": sent,
            "warc": _warc_records(archive), "port": holder["port"]}


def test_no_packet_left_loopback(hostile):
    assert hostile["violations"] == []
    assert hostile["connects"] and all(c.startswith("127.0.0.1:") for c in hostile["connects"])


def test_gzip_bomb_stops_at_the_cap(hostile):
    bomb = hostile["results"]["/bomb"]
    assert bomb.error == "too_large" and len(bomb.content) == CAP and set(bomb.content) == {0}


def test_gigabyte_bodies_are_bounded_and_never_buffered(hostile):
    declared = hostile["results"]["/huge"]
    assert declared.status == 200 and declared.error == "too_large" and declared.content == b""
    streamed = hostile["results"]["/huge-chunked"]
    assert streamed.error == "too_large" and len(streamed.content) == CAP
    # the server wrote far less than the gigabyte before the client hung up (socket buffers only)
    assert hostile["sent"] < 64 * 1024 * 1024


def test_slow_drip_is_cut_by_the_total_time_budget(hostile):
    drip = hostile["results"]["/drip"]
    assert drip.status == 200 and drip.error == "timeout"
    assert 0 < len(drip.content) < 100 and set(drip.content) == {ord(".")}


def test_redirect_loop_is_refused(hostile):
    loop = hostile["results"]["/loop-a"]
    assert loop.error == "redirect_loop" and len(loop.redirects) == 1


@pytest.mark.parametrize(
    "path, target",
    [("/to-loopback", "http://127.0.0.1:{port}/secret"), ("/to-private", "http://10.0.0.1/admin"),
     ("/to-metadata", "http://169.254.169.254/latest/meta-data/"), ("/to-rebound-name", "http://internal.test/")],
)
def test_redirects_to_internal_addresses_are_refused_with_a_reason(hostile, path, target):
    target = target.format(port=hostile["port"])
    result = hostile["results"][path]
    assert result.error == "blocked_address" and result.status is None and result.final_url == target
    reasons = [payload for kind, uri, _, payload in hostile["warc"] if kind == "metadata" and uri == target]
    assert len(reasons) == 1 and b"veritas-error: blocked_address" in reasons[0]


def test_non_http_redirect_and_wrong_content_type(hostile):
    assert hostile["results"]["/to-file"].error == "bad_scheme"
    image = hostile["results"]["/image-not-html"]
    assert image.error == "bad_content_type" and image.error_detail == "image/png" and image.content == b""


def test_truncations_are_recorded_in_the_warc(hostile):
    truncated = {uri.rsplit("/", 1)[1]: flag for kind, uri, flag, _ in hostile["warc"] if kind == "response" and flag}
    assert truncated == {"bomb": "length", "huge": "length", "huge-chunked": "length", "drip": "time",
                         "image-not-html": "unspecified"}


def test_the_packet_guard_catches_a_broken_resource_guard(tmp_path, monkeypatch):
    """With all three of the resource's own checks switched off, the guard still stops the connection."""

    async def no_check(self, url):
        return None

    async def connect_anywhere(self, host, port, timeout=None, local_address=None, socket_options=None):
        return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)

    monkeypatch.setattr(WebResource, "_check_target", no_check)
    monkeypatch.setattr(WebResource, "_peer_refused", lambda self, host, peer: False)
    monkeypatch.setattr(web_module._GuardedBackend, "connect_tcp", connect_anywhere)
    with PacketGuard({"internal.test": "10.0.0.1"}) as g:
        web = _web(tmp_path, max_retries=0, robots="never")
        try:
            direct = web.fetch("http://10.0.0.1:9/admin")
            named = web.fetch("http://internal.test:9/")
            metadata = web.fetch("http://169.254.169.254/latest/meta-data/")
        finally:
            web.close()
    assert direct.error == named.error == metadata.error == "connect_error"
    assert g.violations == ["connect 10.0.0.1:9", "connect 10.0.0.1:9", "connect 169.254.169.254:80"]


def test_robots_txt_is_fetched_once_per_host_and_obeyed(tmp_path, guard):
    robots = b"User-agent: *\nDisallow: /private\nCrawl-delay: 1\n"

    async def handle(req: Request) -> Reply:
        if req.path == "/robots.txt":
            return Reply(200, {"Content-Type": "text/plain"}, robots)
        return Reply(200, {"Content-Type": "text/html"}, b"<html>ok</html>")

    with LoopbackServer(handle) as srv:
        base = f"http://{NEWS}:{srv.port}"
        web = _web(tmp_path, robots="always")
        try:
            results = web.fetch_many([base + "/public/1", base + "/private/2", base + "/public/3"])
        finally:
            web.close()
        paths = [r.path for r in srv.requests]
        agents = {r.headers.get("user-agent") for r in srv.requests}
    assert [r.ok for r in results] == [True, False, True]
    assert results[1].error == "robots_disallowed"
    assert paths.count("/robots.txt") == 1 and "/private/2" not in paths
    # Crawl-delay raised the host's delay from 0 to 1 s (a lower bound on spacing, not a speed figure)
    pages = [r.at for r in srv.requests if r.path.startswith("/public")]
    assert len(pages) == 2 and pages[1] - pages[0] >= 0.99
    assert len(agents) == 1 and next(iter(agents)).startswith("veritas-benchmark/")


def test_gzip_page_round_trips_through_live_and_replay(tmp_path, guard):
    page = _page(7) * 30

    async def handle(req: Request) -> Reply:
        return Reply(200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, gzip.compress(page))

    with LoopbackServer(handle) as srv:
        web = _web(tmp_path)
        try:
            live = web.fetch(f"http://{NEWS}:{srv.port}/gz")
        finally:
            web.close()
    replay = WebResource(mode="replay", warc_paths=[str(tmp_path)])
    again = replay.fetch(f"http://{NEWS}:{srv.port}/gz")
    assert live.ok and again.ok and live.content == again.content == page


def test_range_header_gets_a_partial_answer_that_never_stands_for_the_url(tmp_path, guard):
    body = bytes(range(256)) * 40

    async def handle(req: Request) -> Reply:
        wanted = req.headers.get("range", "")
        if wanted.startswith("bytes="):
            start, _, end = wanted[6:].partition("-")
            part = body[int(start) : int(end) + 1 if end else None]
            return Reply(206, {"Content-Type": "application/octet-stream",
                               "Content-Range": f"bytes {start}-{int(start) + len(part) - 1}/{len(body)}"}, part)
        return Reply(200, {"Content-Type": "application/octet-stream"}, body)

    with LoopbackServer(handle) as srv:
        url = f"http://{NEWS}:{srv.port}/feed.bin"
        web = _web(tmp_path)
        try:
            tail = web.fetch(url, {"Range": "bytes=10000-"}, reuse=True)
            whole = web.fetch(url, reuse=True)  # the 206 in the archive must not be served for a plain GET
            again = web.fetch(url, reuse=True)  # but the 200 now is
        finally:
            web.close()
        ranges = [r.headers.get("range") for r in srv.requests]
    assert (tail.status, tail.content) == (206, body[10000:])
    assert (whole.status, whole.content, whole.from_archive) == (200, body, False)
    assert (again.content, again.from_archive) == (body, True)
    assert ranges == ["bytes=10000-", None]


def test_a_name_that_rebinds_after_the_check_is_refused_at_connect(tmp_path, monkeypatch):
    """The pre-hop check saw a public answer; the connect-time lookup gets 10.0.0.1 and is refused there."""

    async def first_answer_was_public(self, url):
        return None

    monkeypatch.setattr(WebResource, "_check_target", first_answer_was_public)
    with PacketGuard({"rebind.test": "10.0.0.1"}) as g:
        web = _web(tmp_path, max_retries=0, robots="never")
        try:
            result = web.fetch("http://rebind.test:9/admin")
        finally:
            web.close()
    assert result.error == "blocked_address" and "rebind.test -> 10.0.0.1" in result.error_detail
    assert g.violations == [] and g.connects == []


def test_a_url_listed_twice_is_fetched_once(tmp_path, guard):
    async def handle(req: Request) -> Reply:
        return Reply(200, {"Content-Type": "text/html"}, b"<html>same</html>")

    with LoopbackServer(handle) as srv:
        url = f"http://{NEWS}:{srv.port}/dup"
        web = _web(tmp_path)
        try:
            results = web.fetch_many([url, f"http://{NEWS}:{srv.port}/other", url])
        finally:
            web.close()
        paths = sorted(r.path for r in srv.requests)
    assert paths == ["/dup", "/other"]
    assert results[0].content == results[2].content == b"<html>same</html>" and results[0] is not results[2]


def test_post_is_archived_by_method_and_body_and_replayed(tmp_path, guard):
    async def handle(req: Request) -> Reply:
        if req.path == "/api" and req.method == "POST":
            return Reply(200, {"Content-Type": "application/json"}, b'{"echo": ' + req.body + b"}")
        if req.path == "/form" and req.method == "POST":
            return Reply(303, {"Location": "/done"})
        return Reply(200, {"Content-Type": "text/plain"}, f"{req.method} {req.path}".encode())

    with LoopbackServer(handle) as srv:
        base = f"http://{NEWS}:{srv.port}"
        web = _web(tmp_path)
        try:
            one = web.fetch(base + "/api", {"Content-Type": "application/json"}, method="POST", data=b'{"q": 1}')
            two = web.fetch(base + "/api", {"Content-Type": "application/json"}, method="POST", data=b'{"q": 2}')
            again = web.fetch(base + "/api", method="POST", data=b'{"q": 1}', reuse=True)  # from the archive
            form = web.fetch(base + "/form", method="POST", data=b"a=b")  # 303: the next hop is a GET
        finally:
            web.close()
        seen = [(r.method, r.path, r.body) for r in srv.requests]
    assert (one.content, two.content) == (b'{"echo": {"q": 1}}', b'{"echo": {"q": 2}}')
    assert again.from_archive and again.content == one.content
    assert form.ok and form.content == b"GET /done" and form.redirects == [base + "/form"]
    assert seen == [("POST", "/api", b'{"q": 1}'), ("POST", "/api", b'{"q": 2}'), ("POST", "/form", b"a=b"),
                    ("GET", "/done", b"")]
    replay = WebResource(mode="replay", warc_paths=[str(tmp_path)])
    assert replay.fetch(base + "/api", method="POST", data=b'{"q": 2}').content == b'{"echo": {"q": 2}}'
    assert replay.fetch(base + "/api").error == "not_archived"  # a GET is not answered with a POST's reply
