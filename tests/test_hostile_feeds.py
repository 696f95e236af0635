"""Issue 51, section 1: one record's bytes never cost another record, and no feed vanishes with exit 0.

The records are the real ClaimReviews of tests/fixtures (Fact Check Tools answers in Arabic, IFCN rows) in the
shapes publishers serve them: a DataFeed, a bare array, a JSON-LD ``@graph``, one ClaimReview, gzip-compressed,
UTF-16 and UTF-32 with and without a byte order mark. Each shape must give exactly the rows of the plain DataFeed.
A byte-level fuzz (hypothesis, fixed budget) damages one record at a time and checks that every other record comes
out unchanged, and the cases of the issue run through the real ``veritas run`` at the end."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from assets.ingestion.cleaning import parse_date
from assets.ingestion.merging import ingest
from assets.ingestion.sources import FeedFileError, check_unchanged, load_sources, source_digest, stream_datafeed
from assets.ingestion.url_rules import lookalike_host, url_problem
from dagster_project.resources.store import StoreResource
from dagster_project.stage_settings import SourceSpec
from schemas.records import QuarantineRecord
from tests.ingest_shapes import real_claimreviews

ROOT = Path(__file__).resolve().parents[1]
ITEMS = real_claimreviews()  # 153 real ClaimReviews, dated 2016-2025, in Arabic, English and more


def _datafeed(items: list) -> dict:
    return {"@type": "DataFeed", "dataFeedElement": [{"@type": "DataFeedItem", "item": [it]} for it in items]}


def _ingest(path: Path):
    return ingest([("datafeed", path.name, str(path))], None)


def _rows(result) -> list[dict]:
    return [r.model_dump(exclude={"sources"}) for r in result[0]]


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple:
    path = tmp_path_factory.mktemp("reference") / "feed.json"
    path.write_bytes(json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-8"))
    result = _ingest(path)
    assert len(result[0]) > 100
    return result


# ---- the shapes publishers serve -----------------------------------------------------------------------------------

def _utf8(value) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


SHAPES = {
    "bare_array_of_claimreviews": lambda: _utf8(ITEMS),
    "bare_array_of_feed_items": lambda: _utf8(_datafeed(ITEMS)["dataFeedElement"]),
    "json_ld_graph": lambda: _utf8({"@context": "https://schema.org", "@graph": ITEMS}),
    "gzip": lambda: gzip.compress(_utf8(_datafeed(ITEMS))),
    "gzip_of_two_members": lambda: (lambda b: gzip.compress(b[:5000]) + gzip.compress(b[5000:]))(_utf8(_datafeed(ITEMS))),
    "utf8_bom": lambda: b"\xef\xbb\xbf" + _utf8(_datafeed(ITEMS)),
    "utf16_bom": lambda: json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-16"),
    "utf16_be_no_bom": lambda: json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-16-be"),
    "utf32_bom": lambda: json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-32"),
    "utf32_le_no_bom": lambda: json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-32-le"),
    "gzip_of_utf16": lambda: gzip.compress(json.dumps(_datafeed(ITEMS), ensure_ascii=False).encode("utf-16")),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_publishers_serve_gives_the_rows_of_the_datafeed(shape, reference, tmp_path):
    path = tmp_path / f"{shape}.json"
    path.write_bytes(SHAPES[shape]())
    result = _ingest(path)
    # before the fix: "1 in, 0 out", the whole feed quarantined as feed_without_dataFeedElement or malformed_feed_json
    assert _rows(result) == _rows(reference)
    assert Counter(q.reason for q in result[1]) == Counter(q.reason for q in reference[1])


def test_one_claimreview_object_is_a_feed_of_one(tmp_path):
    item = next(it for it in ITEMS if (it.get("itemReviewed") or {}).get("datePublished"))
    path = tmp_path / "one.json"
    path.write_bytes(_utf8(item))
    good, bad, _ = _ingest(path)
    assert [r.review_url for r in good] == [item["url"]] and bad == []


@pytest.mark.parametrize("data, found", [
    (b'"just a string"', "a JSON string at the top"),
    (b"42", "a JSON number at the top"),
    (b'{"@type": "WebPage", "name": "no reviews here"}', "a JSON object with the members '@type', 'name', not a feed"),
    (b"<html><body>a login page</body></html>", "no JSON feed at its start"),
    (b"", "no JSON feed at its start"),
    (b"\x00\x01\x02garbage", "no JSON feed at its start"),
])
def test_a_file_in_no_feed_shape_stops_the_stage_naming_it(data, found, tmp_path):
    path = tmp_path / "served.json"
    path.write_bytes(data)
    with pytest.raises(FeedFileError, match=f"^{path}: {found}"):  # named by the path the user gave
        _ingest(path)


def test_a_truncated_gzip_keeps_what_was_read_and_says_so(reference, tmp_path):
    data = gzip.compress(_utf8(_datafeed(ITEMS)))
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    triples = list(stream_datafeed(path, "cut.json.gz"))
    end = triples[-1]
    assert end[1] == "truncated_feed" and end[2]["error"].startswith("the gzip stream ends early")
    read = end[2]["elements_read"]
    assert 40 < read < len(ITEMS)
    rows = [row for row, reason, _ in triples[:-1]]
    expected = list(stream_datafeed(_write(tmp_path, _datafeed(ITEMS)), "x"))
    assert [r["review_url"] if r else None for r in rows] == [r["review_url"] if r else None for r, _, _ in expected[:read]]


def _write(folder: Path, value, name: str = "feed.json") -> Path:
    path = folder / name
    path.write_bytes(_utf8(value))
    return path


# ---- one record's bytes never cost another record ------------------------------------------------------------------

def test_lone_surrogate_escapes_are_quarantined_and_the_quarantine_is_written(tmp_path):
    items = [dict(it) for it in ITEMS]
    for k in (3, 40, 77):  # a claim, a URL and an author holding a lone surrogate escape (legal JSON)
        field = ("claimReviewed", "url", "name")[k % 3]
        items[k][field] = str(items[k].get(field, "")) + "\ud800"
    path = tmp_path / "feed.json"
    path.write_text(json.dumps(_datafeed(items)), encoding="ascii")  # the escapes as the file holds them: \\ud800
    good, bad, _ = _ingest(path)
    held = [q for q in bad if "\\ud800" in q.record]
    assert len(held) == 3 and {q.reason for q in held} == {"invalid_unicode"}
    store = StoreResource(root=str(tmp_path / "data"))
    store.write_quarantine("reviews", "all", bad)  # before the fix: UnicodeEncodeError, and the quarter failed
    assert store.read_quarantine("reviews", "all").height == len(bad)


def test_the_quarantine_holds_any_text_it_is_given():
    odd = "a\ud800b\udcffc\udfff"  # a JSON escape, a byte that was not UTF-8 (surrogateescape), a low surrogate
    q = QuarantineRecord(stage="s\udc80", quarter="2025Q1", reason="r", source="\ud801", record=odd)
    assert q.record == "a\\ud800b\\udcffc\\udfff" and q.stage == "s\\udc80"
    q.record.encode("utf-8")  # writable


def test_a_stage_that_fails_part_way_leaves_latest_where_it_was(tmp_path, monkeypatch):
    from assets.stage.tables import StageYield, finish_quarter
    from schemas.records import Review

    store = StoreResource(root=str(tmp_path / "data"))
    good, bad, _ = _ingest(_write(tmp_path, _datafeed(ITEMS[:30])))
    finish_quarter(None, store, "reviews", "2025Q2", good, Review, StageYield(), bad)
    before = (store.latest_version("reviews", "2025Q2"), store.latest_version("reviews", "2025Q2", "quarantine"))

    def full_disk(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(StoreResource, "after_stage", full_disk)  # fails after both new versions' files are written
    with pytest.raises(OSError):
        finish_quarter(None, store, "reviews", "2025Q2", good[:5], Review, StageYield(), bad)
    after = (store.latest_version("reviews", "2025Q2"), store.latest_version("reviews", "2025Q2", "quarantine"))
    assert after == before  # before the fix: the table's LATEST named the new version, the quarantine's the old
    assert store.read_table("reviews", "2025Q2").height == len(good)


# ---- shapes that change meaning quietly -----------------------------------------------------------------------------

def _one(item: dict, tmp_path) -> tuple:
    good, bad, _ = _ingest(_write(tmp_path, _datafeed([item])))
    return good, [q.reason for q in bad]


def _dated() -> dict:
    return json.loads(json.dumps(next(it for it in ITEMS if (it.get("itemReviewed") or {}).get("datePublished"))))


def test_schema_org_variants_keep_their_meaning(tmp_path):
    base = _dated()
    day = parse_date(base["itemReviewed"]["datePublished"])
    as_list = dict(base, itemReviewed=[base["itemReviewed"]], reviewRating=[base["reviewRating"]])
    good, reasons = _one(as_list, tmp_path)
    assert reasons == [] and good[0].claim_date == day  # before: the claim's date and author were lost
    assert good[0].rating_text == base["reviewRating"]["alternateName"] and good[0].claim_author
    good, _ = _one(dict(base, reviewRating="Misleading"), tmp_path)
    assert good[0].rating_text == "Misleading"  # before: ""


def test_ambiguous_shapes_are_quarantined_with_their_reason(tmp_path):
    base = _dated()
    other = dict(base["itemReviewed"], datePublished="2019-01-01")
    assert _one(dict(base, itemReviewed=[base["itemReviewed"], other]), tmp_path)[1] == ["ambiguous_itemReviewed"]
    ratings = [{"alternateName": "False"}, {"alternateName": "True"}]
    assert _one(dict(base, reviewRating=ratings), tmp_path)[1] == ["ambiguous_reviewRating"]
    for written in ("12/08/2025", "08.12.2025", "3-4-25"):
        item = dict(base, itemReviewed=dict(base["itemReviewed"], datePublished=written))
        assert _one(item, tmp_path)[1] == ["ambiguous_date"], written
    for written, day in (("13/08/2025", "2025-08-13"), ("08/13/2025", "2025-08-13"), ("2025-08-12", "2025-08-12"),
                         ("12/12/2025", "2025-12-12")):
        assert str(parse_date(written)) == day


# ---- URLs --------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("url, reason", [
    ("https://admin:hunter2@factly.in/fake-claim/", "review_url_with_credentials"),
    ("https://factly.in\\@evil.example/fake-claim/", "review_url_with_credentials"),
    ("https://factly.in@evil.example/fake-claim/", "review_url_with_credentials"),
    ("https://factly.in:99999/fake-claim/", "invalid_review_url_port"),
    ("https://factly.in:http/fake-claim/", "invalid_review_url_port"),
    ("https://f\u0430ctly.in/fake-claim/", "lookalike_review_host"),  # a Cyrillic a
    ("https://\u0440\u0430\u0443\u0440\u0430l.com/x", "lookalike_review_host"),  # Cyrillic letters and one Latin
    ("https://\u0430\u0440\u0440.com/x", "lookalike_review_host"),  # only Cyrillic letters that pass for Latin
])
def test_review_urls_that_are_not_the_publisher_are_quarantined(url, reason, tmp_path):
    item = dict(_dated(), url=url)
    good, reasons = _one(item, tmp_path)
    assert good == [] and reasons == [reason]
    store = StoreResource(root=str(tmp_path / "data"))
    store.write_quarantine("reviews", "all", _ingest(_write(tmp_path, _datafeed([item])))[1])
    for file in (tmp_path / "data").rglob("*"):
        assert not file.is_file() or b"hunter2" not in file.read_bytes()  # a credential is never stored


def test_real_international_hosts_and_ports_are_kept():
    for url in ("https://www.misbar.com/factcheck/2025/04/28/x", "https://factly.in:8443/x", "https://\u0645\u0633\u0628\u0627\u0631.com/x",
                "https://\u043f\u0440\u0438\u043c\u0435\u0440.\u0440\u0444/x", "https://medium.com/@factcheck/post"):
        assert url_problem(url)[1] == "", url
    assert not lookalike_host("bbc.co.uk") and lookalike_host("g\u043e\u043egle.com")


# ---- special files and a feed that changes while it is read ---------------------------------------------------------

def test_special_files_are_refused_not_read_forever(tmp_path):
    fifo = tmp_path / "feed.fifo"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), (Path("/dev/zero"), "a character device"), (tmp_path, "a folder")):
        began = time.monotonic()
        with pytest.raises(FeedFileError, match=f"^{path}: is {kind}"):
            source_digest("datafeed", str(path))
        with pytest.raises(FeedFileError, match=f"{path}: is {kind}"):
            list(stream_datafeed(str(path), path.name))
        with pytest.raises(FeedFileError, match=f"{path}: is {kind}"):  # a claims:search dump is read the same way
            load_sources([SourceSpec(kind="factcheck_api", path=str(path))], None, tmp_path / "state")
        assert time.monotonic() - began < 5


def test_a_feed_replaced_while_it_is_read_is_refused(tmp_path):
    path = _write(tmp_path, _datafeed(ITEMS))
    payloads = [("datafeed", "feed.json", str(path))]
    digest = source_digest("datafeed", str(path))  # the snapshot's label
    _write(tmp_path, _datafeed(ITEMS[:10]))  # replaced before the parse
    _ingest(path)
    with pytest.raises(FeedFileError, match="feed.json: changed while it was read: nothing of this read is kept"):
        check_unchanged(payloads)
    path.write_bytes(_utf8(_datafeed(ITEMS)))  # restored: same bytes, yet another file state
    with pytest.raises(FeedFileError):
        check_unchanged(payloads)
    assert source_digest("datafeed", str(path)) == digest
    check_unchanged(payloads)  # hashed again on the file as it is: unchanged since


# ---- byte-level fuzzing --------------------------------------------------------------------------------------------

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
FEW = ITEMS[:24]
MUTATIONS = ("flip", "invalid_utf8", "surrogate_escape", "delete", "insert_quote")


def _spans(elements: list[bytes], head: bytes, gap: bytes) -> list[tuple[int, int]]:
    spans, at = [], len(head)
    for element in elements:
        spans.append((at, at + len(element)))
        at += len(element) + len(gap)
    return spans


@FUZZ
@given(k=st.integers(0, len(FEW) - 1), mutation=st.sampled_from(MUTATIONS), data=st.data(),
       encoding=st.sampled_from(["plain", "gzip", "utf-16", "utf-32-le"]))
def test_damage_to_one_record_costs_no_other_record(k, mutation, data, encoding, tmp_path_factory):
    """The property of the issue: every record the mutation did not touch comes out unchanged (or, where the damage
    broke the structure between records, is quarantined with the feed's reason, never changed), or the file is
    refused by name."""
    head, gap = b'{"@type": "DataFeed", "dataFeedElement": [', b", "
    elements = [_utf8({"@type": "DataFeedItem", "item": [it]}) for it in FEW]
    start, end = _spans(elements, head, gap)[k]
    body = head + gap.join(elements) + b"]}"
    at = data.draw(st.integers(start + 1, end - 2), label="offset")
    damage = {"flip": lambda b: b[:at] + bytes([b[at] ^ data.draw(st.integers(1, 255))]) + b[at + 1:],
              "invalid_utf8": lambda b: b[:at] + data.draw(st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80"])) + b[at:],
              "surrogate_escape": lambda b: b[:start] + elements[k].replace(b'"claimReviewed": "',
                                                                            b'"claimReviewed": "\\ud834', 1) + b[end:],
              "delete": lambda b: b[:at] + b[at + 1:],
              "insert_quote": lambda b: b[:at] + b'"' + b[at:]}[mutation]
    damaged = damage(body)
    event(f"{mutation}, {encoding}")
    if encoding == "gzip":
        stored = gzip.compress(damaged)
    elif encoding == "plain":
        stored = damaged
    else:  # the text re-encoded: bytes that are not UTF-8 are carried over as they would be decoded
        stored = damaged.decode("utf-8", "replace").encode(encoding if encoding != "utf-16" else "utf-16")
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "feed.json"
    path.write_bytes(stored)
    reference = list(stream_datafeed(_write(folder, _datafeed(FEW), "reference.json"), "feed.json"))
    try:
        triples = list(stream_datafeed(path, "feed.json"))
    except FeedFileError as err:
        assert str(err).startswith("feed.json: ")
        event("refused by name")
        return
    def content(row: dict) -> str:  # a row less its element number (damage that splits an element renumbers)
        return json.dumps({key: value for key, value in row.items() if key != "sources"}, sort_keys=True, default=str)

    touched = next(content(row) for row, _, _ in reference if row and row["sources"][0] == f"feed:feed.json#{k}.0")
    expected = Counter(content(row) for row, _, _ in reference if row) - Counter([touched])
    out = Counter(content(row) for row, _, _ in triples if row)
    assert sum((out - expected).values()) <= 1  # no record changed, but the damaged one
    lost = expected - out
    if lost:  # an untouched record is missing only where the damage broke the structure between records, and said so
        assert {"malformed_feed_json", "truncated_feed"} & {reason for _, reason, _ in triples}, mutation
        event("structure broken: the rest quarantined as one record")
    if mutation in ("invalid_utf8", "surrogate_escape") and encoding == "plain":
        assert not lost  # damage inside a string costs its own record only


# ---- through the real CLI -------------------------------------------------------------------------------------------

def _cli_config(folder: Path, feed: Path) -> Path:
    config = folder / "veritas.yaml"
    config.write_text(f"data_dir: {folder / 'store'}\nsources:\n  - {{kind: datafeed, path: {feed}}}\n"
                      "web: {mode: replay, warc_paths: []}\n"
                      "llm:\n  members:\n    - {name: a, model: local/smollm2}\n", encoding="utf-8")
    return config


def _veritas(config: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dagster_project.cli", "run", "--config", str(config), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=180, **kwargs)


def test_the_cases_of_the_issue_through_the_real_cli(tmp_path):
    items = [json.loads(json.dumps(it)) for it in ITEMS]
    q2 = [it for it in items if str((it.get("itemReviewed") or {}).get("datePublished", "")).startswith("2025-04")]
    q2[0]["claimReviewed"] = "\ud800" + q2[0]["claimReviewed"]
    q2[1]["url"] = "https://admin:hunter2@factly.in/x"
    q2[2]["url"] = "https://f\u0430ctly.in/x"
    q2[3]["itemReviewed"] = [q2[3]["itemReviewed"]]
    feed = tmp_path / "feed.json.gz"
    feed.write_bytes(gzip.compress(json.dumps(items).encode("utf-16")))  # escapes kept: \\ud800 in the text
    done = _veritas(_cli_config(tmp_path, feed), "--quarter", "2025Q2", "--until", "reviews")
    assert done.returncode == 0, done.stderr[-2000:]
    store = StoreResource(root=str(tmp_path / "store" / "data"))
    reasons = Counter(store.read_quarantine("reviews", "2025Q2")["reason"].to_list())
    assert reasons == {"invalid_unicode": 1, "review_url_with_credentials": 1, "lookalike_review_host": 1}
    table = store.read_table("reviews", "2025Q2")
    assert q2[3]["url"] in table["review_url"].to_list() and table.height > 5
    assert not any(b"hunter2" in f.read_bytes() for f in (tmp_path / "store").rglob("*") if f.is_file())
    # a file that is no feed: a non-zero exit naming it, and no reviews table
    (tmp_path / "page.json").write_text("<html>moved</html>")
    second = tmp_path / "second"
    second.mkdir()
    done = _veritas(_cli_config(second, tmp_path / "page.json"), "--quarter", "2025Q2", "--until", "reviews")
    assert done.returncode != 0 and "page.json: no JSON feed at its start" in done.stdout + done.stderr


def _children(pid: int) -> set[int]:
    """Every process under ``pid`` (from /proc: the tree as it is now)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="a feed is read in byte ranges only with two cores")
def test_sigterm_during_a_ranged_read_stops_the_workers_and_removes_the_scratch_folder(tmp_path):
    feed = tmp_path / "big.json"
    element = json.dumps({"@type": "DataFeedItem", "item": [ITEMS[5]]}, ensure_ascii=False).encode()
    # 260 MB: read in byte ranges (two of at least 48 MB), for longer than the 5 s a stop waits for the run to end
    with open(feed, "wb") as fh:
        fh.write(b'{"@type": "DataFeed", "dataFeedElement": [')
        block = b", ".join(element.replace(b'"url": "', f'"url": "https://example.org/{i}/'.encode(), 1)
                           for i in range(2000))
        for n in range(260 * 2**20 // len(block) + 1):
            fh.write((b", " if n else b"") + block)
        fh.write(b"]}")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    process = subprocess.Popen([sys.executable, "-m", "dagster_project.cli", "run", "--config",
                                str(_cli_config(tmp_path, feed)), "--quarter", "2025Q2", "--until", "reviews"],
                               cwd=ROOT, env={**os.environ, "TMPDIR": str(scratch)}, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while not any(scratch.glob("veritas-feed-ranges-*/*.arrow")) and time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode()[-2000:]
        time.sleep(0.1)
    workers = _children(process.pid)
    assert len(workers) >= 2  # the range readers (and the language detector) are running
    process.send_signal(signal.SIGTERM)
    out = process.communicate(timeout=60)[0].decode()
    assert process.returncode == 128 + signal.SIGTERM, out[-2000:]
    time.sleep(0.5)
    assert not [pid for pid in workers if _alive(pid)]  # before the fix: three workers and the resource tracker
    assert not list(scratch.glob("veritas-feed-ranges-*"))  # before the fix: a 124 MB folder left behind


def test_a_broken_brace_costs_its_own_record_not_the_next(tmp_path):
    """Found by the fuzz above: a record whose closing brace is lost was skipped by counting brackets, which ran on
    through the next record; both went as one quarantined record. The reader now resyncs at the next entry."""
    elements = [_utf8({"@type": "DataFeedItem", "item": [it]}) for it in FEW]
    elements[14] = elements[14][:-1]  # "...}]}" -> "...}]"
    two_items = _utf8({"@type": "DataFeedItem", "item": [FEW[3], dict(FEW[4], url="x", name=["a"])]})
    elements[3] = two_items.replace(b'"url": "x"', b'"url" "x"', 1)  # broken in its second item of two
    path = tmp_path / "feed.json"
    path.write_bytes(b'{"@type": "DataFeed", "dataFeedElement": [' + b", ".join(elements) + b"]}")
    triples = list(stream_datafeed(path, "feed.json"))
    assert [reason for _, reason, _ in triples].count("malformed_record_json") == 2
    urls = [row["review_url"] for row, _, _ in triples if row]
    assert urls == [it["url"] for i, it in enumerate(FEW) if i not in (3, 14)]


# ---- the recorded fact-check page, fuzzed ------------------------------------------------------------------------

AFP_PAGE = gzip.decompress((ROOT / "tests" / "fixtures" / "afp_B2LA2G3.html.gz").read_bytes())
AFP_URL = "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), mutation=st.sampled_from(["flip", "invalid_utf8", "delete", "truncate"]))
def test_damage_to_the_recorded_page_outside_its_markup_leaves_its_claimreview(data, mutation):
    """The real AFP page (tests/fixtures): damage anywhere never raises; damage outside its JSON-LD block leaves
    the ClaimReview read from it unchanged."""
    from assets.ingestion.sources import claimreviews_from_page

    expected = claimreviews_from_page(AFP_PAGE, AFP_URL)
    assert len(expected) == 1
    block = AFP_PAGE.index(b'application/ld+json')
    block_end = AFP_PAGE.index(b"</script>", block)
    outside = data.draw(st.booleans(), label="outside the markup")
    at = data.draw(st.integers(block_end + 10, len(AFP_PAGE) - 2) if outside else st.integers(0, len(AFP_PAGE) - 2))
    page = {"flip": lambda: AFP_PAGE[:at] + bytes([AFP_PAGE[at] ^ 0x55]) + AFP_PAGE[at + 1:],
            "invalid_utf8": lambda: AFP_PAGE[:at] + b"\xff\xfe" + AFP_PAGE[at:],
            "delete": lambda: AFP_PAGE[:at] + AFP_PAGE[at + 1:],
            "truncate": lambda: AFP_PAGE[:at]}[mutation]()
    found = claimreviews_from_page(page, AFP_URL)  # never an exception
    if outside and mutation != "truncate":
        event("outside the markup")
        assert found == expected


@pytest.mark.parametrize("encode", [lambda b: b, gzip.compress, lambda b: b.decode().encode("utf-16"),
                                    lambda b: gzip.compress(b.decode().encode("utf-32"))])
def test_a_feed_file_read_whole_is_every_byte_of_it(encode, tmp_path):
    from assets.ingestion.sources.feed_files import open_feed

    text = _utf8(_datafeed(ITEMS))
    (tmp_path / "f").write_bytes(encode(text))
    stream, _ = open_feed(tmp_path / "f")
    whole = stream.read()
    assert whole.removeprefix(b"\xef\xbb\xbf") == text
