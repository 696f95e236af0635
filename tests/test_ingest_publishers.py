"""Issue 3: the publisher registry and ``veritas publishers refresh``.

The signatory pages here are synthetic (written below, in the layout registry/signatory_sources.yaml expects); they
are served by a loopback server (live mode, archived to WARC) and then replayed from that WARC and from a WARC
written directly, and every way gives the same registry."""

import csv
import io
import shutil
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from assets.ingestion.publisher_registry import (
    load_sources_spec,
    parse_signatory_page,
    read_registry_rows,
    refresh_registry,
    slug,
    status_of,
)
from assets.ingestion.publishers import PublisherIndex, load_registry, registered_domain
from dagster_project.cli import main
from dagster_project.config import PROJECT_ROOT
from dagster_project.resources.web import WebResource
from schemas.records import Review

REGISTRY = PROJECT_ROOT / "registry" / "publishers.csv"

IFCN_PAGE = """<html><body><h1>Verified signatories</h1>
<div class="signatory card"><h3>Full Fact</h3><a href="https://fullfact.org/">fullfact.org</a>
  <span class="country">United Kingdom</span><span class="status">Active</span><span class="date">2025-03-12</span></div>
<div class="signatory card"><h3>Misbar</h3><a href="https://misbar.com/en">misbar.com</a>
  <span class="country">Qatar</span><span class="status">Expired</span><span class="date">14 January 2024</span></div>
<div class="signatory card"><h3>Yoop Yup</h3><a href="https://www.yoopyup.com/">yoopyup.com</a>
  <span class="country">Lebanon</span><span class="status">Verified signatory</span><span class="date">2025-06-01</span></div>
<div class="signatory card"><h3>Checks Example</h3><a href="https://news.checks-example.co.uk/fact">site</a>
  <span class="country">United Kingdom</span><span class="status">Under review</span><span class="date"></span></div>
<div class="signatory-list-footer"><h3>Not an entry</h3></div>
</body></html>"""

EFCSN_PAGE = """<html><body><ul>
<li class="member"><h2>Maldita</h2><a href="https://maldita.es/">web</a><p class="country">Spain</p>
  <p class="status">Member</p><p class="date">2023-11-09</p></li>
<li class="member"><h2>Faktencheck AFP</h2><a href="https://efcsn.com/about">about</a><a href="https://factuel.afp.com/">web</a>
  <p class="country">France</p><p class="status">Member</p><p class="date">2023-11-09</p></li>
</ul></body></html>"""

IFCN_URL = "https://ifcncodeofprinciples.poynter.org/signatories"
EFCSN_URL = "https://efcsn.com/members/"


@pytest.fixture(scope="module")
def spec():
    return load_sources_spec()


def test_parse_signatory_pages(spec):
    ifcn = parse_signatory_page(IFCN_PAGE, spec[0], IFCN_URL)
    assert [(s.name, s.website, s.country, s.status, s.date) for s in ifcn] == [
        ("Full Fact", "https://fullfact.org/", "United Kingdom", "active", "2025-03-12"),
        ("Misbar", "https://misbar.com/en", "Qatar", "expired", "2024-01-14"),
        ("Yoop Yup", "https://www.yoopyup.com/", "Lebanon", "active", "2025-06-01"),
        ("Checks Example", "https://news.checks-example.co.uk/fact", "United Kingdom", "under_review", ""),
    ]
    efcsn = parse_signatory_page(EFCSN_PAGE, spec[1], EFCSN_URL)
    assert [(s.name, s.website) for s in efcsn] == [("Maldita", "https://maldita.es/"),
                                                     ("Faktencheck AFP", "https://factuel.afp.com/")]
    assert status_of("  Signatory — ACTIVE ") == "active" and status_of("Withdrawn") == "withdrawn"
    assert slug("Les Décodeurs (Le Monde)") == "les-décodeurs-le-monde"


def _warc(path: Path, pages: dict[str, str]) -> None:
    with open(path, "wb") as fh:
        writer = WARCWriter(fh, gzip=True)
        for url, body in pages.items():
            data = body.encode("utf-8")
            headers = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                                  ("Content-Length", str(len(data)))], protocol="HTTP/1.1")
            writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(data),
                                                          http_headers=headers))


def _check_refreshed(path: Path) -> None:
    rows = {r["publisher_id"]: r for r in read_registry_rows(path)}
    assert len(rows) == 115  # one organisation was new
    assert (rows["full-fact"]["ifcn_status"], rows["full-fact"]["ifcn_date"]) == ("active", "2025-03-12")
    assert (rows["misbar"]["ifcn_status"], rows["misbar"]["ifcn_date"]) == ("expired", "2024-01-14")
    assert rows["yoop-yup"]["ifcn_status"] == "active"
    assert (rows["maldita-es"]["efcsn_status"], rows["maldita-es"]["efcsn_date"]) == ("active", "2023-11-09")
    assert rows["afp-fact-check"]["efcsn_date"] == "2023-11-09"  # matched by factuel.afp.com -> afp.com
    new = rows["checks-example"]
    assert (new["name"], new["domains"], new["country"], new["ifcn_status"]) == (
        "Checks Example", "checks-example.co.uk", "United Kingdom", "under_review")
    assert new["source"].endswith("/signatories")  # the page it was read from
    assert rows["maldita-es"]["source"].endswith("/members/")  # now the EFCSN page that listed it
    assert rows["the-conversation-factcheck"]["source"].startswith("https://ifcncodeofprinciples")  # not listed: kept
    # aliases and domains of existing rows survive; the registry still loads and matches
    assert rows["afp-fact-check"]["aliases"].startswith("AFP;AFP Factuel")
    publishers = load_registry(str(path))
    misbar = next(p for p in publishers if p.publisher_id == "misbar")
    assert not misbar.trusted and misbar.ifcn_date == "2024-01-14"
    index = PublisherIndex(publishers)
    review = Review(review_id="x", review_url="https://www.checks-example.co.uk/a", claim_text="c", quarter="2025Q1")
    assert index.match(review)[0].publisher_id == "checks-example"


def test_refresh_live_from_loopback_then_replayed(spec, tmp_path):
    pages = {"/signatories": IFCN_PAGE, "/members/": EFCSN_PAGE}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # http.server names it so
            body = pages.get(self.path, "").encode("utf-8")
            self.send_response(200 if body else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    local = [dict(spec[0], url=base + "/signatories"), dict(spec[1], url=base + "/members/")]
    registry = tmp_path / "publishers.csv"
    shutil.copy(REGISTRY, registry)
    web = WebResource(mode="live", archive_dir=str(tmp_path / "warc"), allow_private_hosts=["127.0.0.1"])
    try:
        report = refresh_registry(web, registry, local)
    finally:
        web.close()
        server.shutdown()
        server.server_close()
    assert report.per_page == {base + "/signatories": 4, base + "/members/": 2}
    assert report.added == ["checks-example"]
    assert sorted(report.updated) == ["afp-fact-check", "full-fact", "maldita-es", "misbar", "yoop-yup"]
    assert report.unchanged == 114 - 5  # every registry row but the 5 updated
    # IFCN rows (101 active, Medical Dialogues among them since issue 25; 1 expired) the page did not list (Full Fact,
    # Misbar were listed)
    assert len(report.unlisted["ifcn"]) == 102 - 2
    _check_refreshed(registry)
    # the same pages replayed from the WARC that the live refresh wrote
    replayed = tmp_path / "replayed.csv"
    warcs = [str(p) for p in (tmp_path / "warc").glob("*.warc.gz")]
    web = WebResource(mode="replay", warc_paths=warcs)
    refresh_registry(web, REGISTRY, local, out_path=replayed)
    assert replayed.read_text(encoding="utf-8") == registry.read_text(encoding="utf-8")


def test_cli_refresh_from_warc(tmp_path, capsys):
    warc = tmp_path / "signatories.warc.gz"
    _warc(warc, {IFCN_URL: IFCN_PAGE, EFCSN_URL: EFCSN_PAGE})
    config = tmp_path / "veritas.yaml"
    config.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"), "web": {"mode": "replay",
                                                                                   "warc_paths": [str(warc)]}}))
    out = tmp_path / "refreshed.csv"
    assert main(["--config", str(config), "publishers", "refresh", "--registry", str(REGISTRY), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{IFCN_URL}: 4 signatories" in printed and "1 added, 5 updated, 109 unchanged" in printed
    _check_refreshed(out)
    # a page that lists nobody (a redesign) stops the refresh and writes nothing
    _warc(warc, {IFCN_URL: "<html><body><p>New layout</p></body></html>", EFCSN_URL: EFCSN_PAGE})
    out.unlink()
    assert main(["--config", str(config), "publishers", "refresh", "--registry", str(REGISTRY), "--out", str(out)]) == 1
    assert "no signatory found" in capsys.readouterr().out and not out.exists()


def test_registry_fields_and_registered_domains():
    with open(REGISTRY, newline="", encoding="utf-8") as fh:
        header = next(csv.reader(fh))
    assert header == ["publisher_id", "name", "aliases", "domains", "country", "ifcn_status", "efcsn_status",
                      "signatory_since", "ifcn_date", "efcsn_date", "source"]
    assert registered_domain("factuel.afp.com") == "afp.com"
    assert registered_domain("politica.estadao.com.br") == "estadao.com.br"
    assert registered_domain("hindi.boomlive.in") == "boomlive.in"
    assert registered_domain("someone.blogspot.com") == "someone.blogspot.com"  # a private suffix: the blog is the site
    assert registered_domain("127.0.0.1") == "127.0.0.1"
