"""WebResource: live fetches against a loopback server, WARC archiving, and offline replay."""

import gzip
import io
import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import httpx
import pytest
from PIL import Image
from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dagster_project.resources.web import FetchResult, WebResource, normalize_url
from tests.loopback_web import PacketGuard

MAX_BYTES = 4096
READ_TIMEOUT_S = 2.0  # generous: a loaded 2-core machine must not turn a normal answer into a timeout

PAGE = (
    "<!doctype html><html><head><title>Claim page</title></head>"
    "<body><h1>Fact check</h1><p>Ünïcödé text — 100% checked.</p></body></html>"
).encode()
LATIN1_PAGE = "<html><body><p>Café crème à la française</p></body></html>".encode("latin-1")
META_LATIN1_PAGE = (
    '<html><head><meta charset="iso-8859-1"></head><body><p>Señor Müller</p></body></html>'
).encode("latin-1")
BIG_BODY = b"x" * (MAX_BYTES * 5)
ZEROS = b"\0" * (MAX_BYTES * 200)  # compresses to ~1 KB, decompresses far past the cap


def _jpeg_bytes() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 16), (200, 30, 30)).save(buffer, format="JPEG")
    return buffer.getvalue()


JPEG = _jpeg_bytes()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # needed for the chunked endpoint; every reply sets its length

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body=b"", headers=None):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, status, location):
        self._send(status, b"moved", {"Location": location, "Content-Type": "text/plain"})

    def do_GET(self):
        path = self.path
        port = self.server.server_address[1]
        html = {"Content-Type": "text/html; charset=utf-8"}
        try:
            if path == "/page.html":
                self._send(200, PAGE, html)
            elif path == "/image.jpg":
                self._send(200, JPEG, {"Content-Type": "image/jpeg"})
            elif path == "/r1":
                self._redirect(301, "/r2")
            elif path == "/r2":
                self._redirect(301, "r3")  # relative Location, resolved against /r2
            elif path == "/r3":
                self._redirect(302, f"http://127.0.0.1:{port}/page.html#section")
            elif path == "/loop-a":
                self._redirect(302, "/loop-b")
            elif path == "/loop-b":
                self._redirect(302, "/loop-a")
            elif path.startswith("/deep/"):
                self._redirect(302, f"/deep/{int(path.rsplit('/', 1)[1]) + 1}")
            elif path == "/to-file":
                self._redirect(302, "file:///etc/passwd")
            elif path == "/to-private":
                self._redirect(302, f"http://127.0.0.2:{port}/page.html")
            elif path == "/missing":
                self._send(404, b"not here", {"Content-Type": "text/plain"})
            elif path == "/error":
                self._send(500, b"server broke", {"Content-Type": "text/plain"})
            elif path == "/big":
                self._send(200, BIG_BODY, {"Content-Type": "text/plain"})
            elif path == "/big-chunked":
                self._send_chunked(BIG_BODY)
            elif path == "/chunked.html":
                self._send_chunked(PAGE, html)
            elif path == "/gzip.html":
                self._send(200, gzip.compress(PAGE), {**html, "Content-Encoding": "gzip"})
            elif path == "/bomb":
                self._send(200, gzip.compress(ZEROS), {"Content-Type": "text/plain", "Content-Encoding": "gzip"})
            elif path == "/latin1.html":
                self._send(200, LATIN1_PAGE, {"Content-Type": "text/html; charset=ISO-8859-1"})
            elif path == "/meta-latin1.html":
                self._send(200, META_LATIN1_PAGE, {"Content-Type": "text/html"})
            elif path == "/slow":
                time.sleep(READ_TIMEOUT_S * 4)
                self._send(200, b"too late", {"Content-Type": "text/plain"})
            else:
                self._send(404, b"unknown", {"Content-Type": "text/plain"})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout / size cap); nothing to do

    def _send_chunked(self, body, headers=None):
        self.send_response(200)
        for key, value in (headers or {"Content-Type": "text/plain"}).items():
            self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for start in range(0, len(body), 1000):
            piece = body[start : start + 1000]
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        self.wfile.write(b"0\r\n\r\n")


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # aborted connections from timeout tests are expected


PATHS = [
    "/page.html",
    "/image.jpg",
    "/r1",
    "/loop-a",
    "/deep/0",
    "/to-file",
    "/to-private",
    "/missing",
    "/error",
    "/big",
    "/big-chunked",
    "/chunked.html",
    "/gzip.html",
    "/bomb",
    "/latin1.html",
    "/meta-latin1.html",
    "/slow",
]


@pytest.fixture(scope="module")
def live_run(tmp_path_factory):
    """Fetch every endpoint once, live, then stop the server; replay tests run against what was archived."""
    archive_dir = tmp_path_factory.mktemp("warc")
    server = _QuietServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    web = WebResource(
        mode="live",
        archive_dir=str(archive_dir),
        allow_private_hosts=["127.0.0.1"],
        max_bytes=MAX_BYTES,
        read_timeout_s=READ_TIMEOUT_S,
        connect_timeout_s=2.0,
        per_host_delay_s=0.0,
        max_retries=0,
    )
    try:
        with PacketGuard() as guard:
            results = {path: web.fetch(base + path) for path in PATHS}
        assert guard.violations == []
        log = web.fetch_log()
        warc_path = web.warc_path
    finally:
        web.close()
        server.shutdown()
        server.server_close()
    return {"base": base, "results": results, "log": log, "warc_path": warc_path, "archive_dir": archive_dir}


def test_live_html_page(live_run):
    res = live_run["results"]["/page.html"]
    assert res.ok and res.status == 200 and res.error is None
    assert res.content == PAGE
    assert res.content_type == "text/html"
    assert res.headers["content-type"] == "text/html; charset=utf-8"
    assert all(key == key.lower() for key in res.headers)
    assert "Ünïcödé text — 100% checked." in res.text()
    assert res.final_url == live_run["base"] + "/page.html" and res.redirects == []
    assert res.warc_path == live_run["warc_path"]


def test_live_jpeg(live_run):
    res = live_run["results"]["/image.jpg"]
    assert res.ok and res.content == JPEG and res.content_type == "image/jpeg"
    assert Image.open(io.BytesIO(res.content)).size == (16, 16)


def test_live_redirect_chain(live_run):
    base = live_run["base"]
    res = live_run["results"]["/r1"]
    assert res.ok and res.status == 200
    assert res.redirects == [base + "/r1", base + "/r2", base + "/r3"]
    assert res.final_url == base + "/page.html"  # fragment from Location dropped
    assert res.content == PAGE


def test_live_redirect_loop_and_limit(live_run):
    base = live_run["base"]
    loop = live_run["results"]["/loop-a"]
    assert loop.error == "redirect_loop" and loop.status == 302 and not loop.ok
    assert loop.redirects == [base + "/loop-a"] and loop.final_url == base + "/loop-b"
    deep = live_run["results"]["/deep/0"]
    assert deep.error == "too_many_redirects"
    assert deep.redirects == [f"{base}/deep/{i}" for i in range(5)]
    assert deep.final_url == base + "/deep/5"


def test_live_redirect_hops_are_checked(live_run):
    to_file = live_run["results"]["/to-file"]
    assert to_file.error == "bad_scheme" and to_file.final_url == "file:///etc/passwd"
    to_private = live_run["results"]["/to-private"]
    assert to_private.error == "blocked_address" and to_private.status is None
    assert to_private.redirects == [live_run["base"] + "/to-private"]


def test_live_error_statuses(live_run):
    missing = live_run["results"]["/missing"]
    assert missing.status == 404 and missing.error is None and not missing.ok
    assert missing.content == b"not here"
    broken = live_run["results"]["/error"]
    assert broken.status == 500 and not broken.ok and broken.content == b"server broke"


def test_live_size_caps(live_run):
    declared = live_run["results"]["/big"]  # Content-Length over the cap: body never downloaded
    assert declared.status == 200 and declared.error == "too_large" and declared.content == b""
    streamed = live_run["results"]["/big-chunked"]  # no Content-Length: cut while streaming
    assert streamed.error == "too_large" and streamed.content == BIG_BODY[:MAX_BYTES]
    bomb = live_run["results"]["/bomb"]  # small on the wire, huge once decompressed
    assert bomb.error == "too_large" and bomb.content == ZEROS[:MAX_BYTES]


def test_live_encodings(live_run):
    gz = live_run["results"]["/gzip.html"]
    assert gz.ok and gz.content == PAGE and gz.headers["content-encoding"] == "gzip"
    chunked = live_run["results"]["/chunked.html"]
    assert chunked.ok and chunked.content == PAGE


def test_live_timeout(live_run):
    slow = live_run["results"]["/slow"]
    assert slow.error == "timeout" and slow.status is None and slow.content == b""


def test_text_decoding_latin1(live_run):
    header = live_run["results"]["/latin1.html"]
    assert header.content == LATIN1_PAGE
    assert "Café crème à la française" in header.text()
    meta = live_run["results"]["/meta-latin1.html"]
    assert "Señor Müller" in meta.text()
    assert FetchResult(url="u", final_url="u", status=200, content=b"caf\xe9").text() == "caf\ufffd"
    bad_charset = FetchResult(
        url="u", final_url="u", status=200, headers={"content-type": "text/html; charset=nonsense"}, content=b"ok"
    )
    assert bad_charset.text() == "ok"


def test_fetch_log(live_run):
    log = live_run["log"]
    assert len(log) == len(PATHS)
    first = log[0]
    assert set(first) == {
        "url", "final_url", "status", "bytes", "elapsed_s", "at", "error", "mode", "attempts", "from_archive"}
    assert first["status"] == 200 and first["bytes"] == len(PAGE) and first["mode"] == "live"
    assert first["attempts"] == 1 and first["from_archive"] is False
    assert log[PATHS.index("/slow")]["error"] == "timeout"


def test_live_warc_contents(live_run):
    base = live_run["base"]
    records = []
    with open(live_run["warc_path"], "rb") as handle:
        for record in ArchiveIterator(handle):
            records.append(
                (
                    record.rec_type,
                    record.rec_headers.get_header("WARC-Target-URI"),
                    record.rec_headers.get_header("WARC-Truncated"),
                    record.http_headers,
                    record.raw_stream.read(),
                )
            )
    types = [r[0] for r in records]
    assert types[0] == "warcinfo"
    # /r1 is four hops (r1, r2, r3, page) and each hop is archived as request + response.
    assert sum(1 for r in records if r[0] == "request" and r[1] in {f"{base}/r{i}" for i in (1, 2, 3)}) == 3
    gz = next(r for r in records if r[0] == "response" and r[1] == base + "/gzip.html")
    assert gz[4][:2] == b"\x1f\x8b"  # stored as it came over the wire
    chunked = next(r for r in records if r[0] == "response" and r[1] == base + "/chunked.html")
    assert chunked[3].get_header("Transfer-Encoding") is None and chunked[4] == PAGE
    big = next(r for r in records if r[0] == "response" and r[1] == base + "/big-chunked")
    assert big[2] == "length" and len(big[4]) == MAX_BYTES
    failures = {r[1]: r[4] for r in records if r[0] == "metadata"}
    assert b"veritas-error: timeout" in failures[base + "/slow"]
    assert b"veritas-error: blocked_address" in failures["http://127.0.0.2:" + base.rsplit(":", 1)[1] + "/page.html"]


def test_blocked_without_allowlist_and_bad_scheme(tmp_path):
    # the packet guard stands behind the resource's own check: nothing may leave loopback even if it broke
    with PacketGuard() as guard:
        _fetch_blocked(tmp_path)
    assert guard.violations == []
    assert len(list(tmp_path.glob("veritas-*.warc.gz"))) == 1


def _fetch_blocked(tmp_path):
    web = WebResource(mode="live", archive_dir=str(tmp_path))
    try:
        # Port 9 (discard) is never contacted: the address check refuses before any connection.
        assert web.fetch("http://127.0.0.1:9/page.html").error == "blocked_address"
        assert web.fetch("http://localhost:9/").error == "blocked_address"
        assert web.fetch("http://[::1]:9/").error == "blocked_address"
        assert web.fetch("http://10.0.0.1:9/").error == "blocked_address"
        assert web.fetch("http://169.254.169.254/latest/meta-data/").error == "blocked_address"
        passwd = web.fetch("file:///etc/passwd")
        assert passwd.error == "bad_scheme" and passwd.status is None and passwd.content == b""
        assert web.fetch("ftp://127.0.0.1/x").error == "bad_scheme"
    finally:
        web.close()


@pytest.fixture()
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("replay touched the network")

    monkeypatch.setattr(httpx.Client, "send", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_replay_round_trip(live_run, no_network):
    replay = WebResource(mode="replay", warc_paths=[str(live_run["archive_dir"])], max_bytes=MAX_BYTES)
    for path, live in live_run["results"].items():
        again = replay.fetch(live_run["base"] + path)
        assert (again.status, again.error, again.content) == (live.status, live.error, live.content), path
        assert (again.final_url, again.redirects) == (live.final_url, live.redirects), path
        if live.status is not None:
            assert again.headers.get("content-type") == live.headers.get("content-type"), path
    chain = replay.fetch(live_run["base"] + "/r1#top")
    assert chain.ok and chain.content == PAGE and len(chain.redirects) == 3
    assert "Café" in replay.fetch(live_run["base"] + "/latin1.html").text()
    missing = replay.fetch(live_run["base"] + "/never-fetched")
    assert missing.status is None and missing.error == "not_archived"
    assert replay.fetch_log()[-1]["mode"] == "replay"


def _write_handmade_warc(path, gz):
    with open(path, "wb") as handle:
        writer = WARCWriter(handle, gzip=gz)

        def response(uri, status_line, headers, body=b""):
            http_headers = StatusAndHeaders(status_line, headers, protocol="HTTP/1.1")
            writer.write_record(
                writer.create_warc_record(
                    uri, "response", payload=io.BytesIO(body), length=len(body), http_headers=http_headers
                )
            )

        response("https://t.co/AbC123", "301 Moved Permanently", [("Location", "https://example.org/story?id=7")])
        response(
            "https://example.org/story?id=7",
            "200 OK",
            [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(PAGE)))],
            PAGE,
        )
        response("https://t.co/Dangling", "302 Found", [("Location", "/gone")])
        image = writer.create_warc_record(
            "https://example.org/pic.jpg",
            "resource",
            payload=io.BytesIO(JPEG),
            length=len(JPEG),
            warc_content_type="image/jpeg",
        )
        writer.write_record(image)


@pytest.mark.parametrize("gz", [True, False])
def test_replay_handmade_warc(tmp_path, no_network, gz):
    warc = tmp_path / ("handmade.warc.gz" if gz else "handmade.warc")
    _write_handmade_warc(warc, gz)
    replay = WebResource(mode="replay", warc_paths=[str(warc)])
    res = replay.fetch("https://t.co/AbC123")
    assert res.ok and res.content == PAGE and res.status == 200
    assert res.final_url == "https://example.org/story?id=7"
    assert res.redirects == ["https://t.co/AbC123"]
    assert res.warc_path == str(warc)
    # Normalisation: case of host, default port and fragment do not matter; the query does.
    assert replay.fetch("HTTPS://T.CO:443/AbC123#x").content == PAGE
    assert replay.fetch("https://example.org/story?id=8").error == "not_archived"
    dangling = replay.fetch("https://t.co/Dangling")
    assert dangling.error == "not_archived" and dangling.final_url == "https://t.co/gone"
    assert dangling.redirects == ["https://t.co/Dangling"]
    pic = replay.fetch("https://example.org/pic.jpg")
    assert pic.ok and pic.content == JPEG and pic.content_type == "image/jpeg"


def test_the_replay_index_is_kept_beside_each_warc_and_rebuilt_when_the_warc_changes(tmp_path, no_network,
                                                                                       monkeypatch):
    import dagster_project.resources.web.replay as web_module

    warc = tmp_path / "handmade.warc.gz"
    _write_handmade_warc(warc, True)
    sidecar = tmp_path / ("handmade.warc.gz" + web_module.INDEX_SUFFIX)
    first = WebResource(mode="replay", warc_paths=[str(warc)])
    assert first.fetch("https://t.co/AbC123").content == PAGE and sidecar.is_file()

    scans = []
    real_iterator = web_module.ArchiveIterator
    monkeypatch.setattr(web_module, "ArchiveIterator", lambda fh, *a, **kw: scans.append(fh) or real_iterator(fh, *a, **kw))
    second = WebResource(mode="replay", warc_paths=[str(warc)])
    second.load_replay_index()
    assert scans == []  # the index came from the file beside the WARC
    assert second.fetch("https://t.co/AbC123").content == PAGE and len(scans) == 2  # the redirect and the page

    _write_handmade_warc(warc, True)  # rewritten: a new mtime (and the stamp no longer matches)
    with open(warc, "ab") as fh:  # and one more record, so the size differs too
        writer = WARCWriter(fh, gzip=True)
        writer.write_record(writer.create_warc_record("https://example.org/late", "resource", payload=io.BytesIO(b"late"),
                                                      length=4, warc_content_type="text/plain"))
    scans.clear()
    third = WebResource(mode="replay", warc_paths=[str(warc)])
    assert third.fetch("https://example.org/late").content == b"late" and len(scans) == 2  # re-indexed, then read
    sidecar.write_text("{not json")  # a damaged index file is ignored and replaced
    assert WebResource(mode="replay", warc_paths=[str(warc)]).fetch("https://example.org/late").content == b"late"
    assert json.loads(sidecar.read_text())["size"] == warc.stat().st_size

    # a WARC cut short by a crash: the records before the cut are served, the cut one is never served as whole
    cut = tmp_path / "cut.warc.gz"
    cut.write_bytes(warc.read_bytes()[: warc.stat().st_size - 20])
    damaged = WebResource(mode="replay", warc_paths=[str(cut)])
    assert damaged.fetch("https://t.co/AbC123").content == PAGE
    late = damaged.fetch("https://example.org/late")
    assert (late.error, late.content) == (web_module.DAMAGED, b"")
    # bytes that are no WARC record after good ones: the good ones count, and the file gets no index file
    garbage = tmp_path / "garbage.warc.gz"
    garbage.write_bytes(warc.read_bytes() + b"this is not a WARC record\r\n" * 4)
    assert WebResource(mode="replay", warc_paths=[str(garbage)]).fetch("https://example.org/late").content == b"late"
    assert not (tmp_path / ("garbage.warc.gz" + web_module.INDEX_SUFFIX)).exists()
    with pytest.raises(FileNotFoundError, match="check web.warc_paths"):
        WebResource(mode="replay", warc_paths=[str(tmp_path / "typo.warc.gz")]).load_replay_index()


def test_normalize_url():
    assert normalize_url("HTTP://Example.COM:80/a b?x=1#frag") == "http://example.com/a%20b?x=1"
    assert normalize_url("https://t.co") == "https://t.co/"
    assert normalize_url("https://t.co?x=1") == "https://t.co/?x=1"
    assert normalize_url("<https://example.org:8443/p>") == "https://example.org:8443/p"


def test_inside_dagster(tmp_path, no_network):
    warc = tmp_path / "handmade.warc.gz"
    _write_handmade_warc(warc, True)
    with dg.build_resources({"web": WebResource(mode="replay", warc_paths=[str(warc)])}) as resources:
        res = resources.web.fetch("https://t.co/AbC123")
        assert res.ok and res.content == PAGE
        assert resources.web.fetch_log()[0]["final_url"] == "https://example.org/story?id=7"
