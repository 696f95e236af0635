"""Stage-yield dashboard: range funnels, JSON, the self-contained HTML page and the yield-band checks.

The instance data comes from real runs of the non-model stages on the demo snapshot (2020Q2, 2020Q3, 2026Q2).
"""

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import lxml.html
import pytest

from dagster_project.checks import (
    CHECKS,
    YIELD_CHECKS,
    previous_quarter,
    review_volume_result,
    scrape_success_result,
)
from dagster_project.cli import main
from dagster_project.config import PROJECT_ROOT
from dagster_project.core.dashboard import (
    drop_table,
    media_yield,
    quarter_summary,
    render_html,
    write_html,
)
from dagster_project.quarter_run import run_quarter
from dagster_project.yield_report import collect_range, collect_yields, format_range
from tests.conftest import write_demo_config

SCRAPING_STAGES = ["reviews", "trusted_reviews", "articles", "appearances"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """The demo config in a temp data dir and its own Dagster home; three quarters up to appearances (no model)."""
    folder = tmp_path_factory.mktemp("dashboard")
    path = write_demo_config(folder)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(folder / "dagster"))
        # 2020Q3 after 2020Q2: the demo feed has 20 records in 2020Q2 and none in 2020Q3, so its volume check warns
        for quarter in ["2020Q2", "2020Q3", "2026Q2"]:
            assert run_quarter(str(path), quarter, until="appearances")  # a WARN check never fails the run
        yield str(path)


def test_range_collects_every_quarter_in_order(data):
    reports = collect_range(data, "2020Q1", "2026-04")
    assert [r["quarter"] for r in reports][:4] == ["2020Q1", "2020Q2", "2020Q3", "2020Q4"]
    assert len(reports) == 26 and reports[-1]["quarter"] == "2026Q2"
    by_q = {r["quarter"]: r for r in reports}
    assert by_q["2020Q1"]["stages"] == {} and by_q["2025Q4"]["stages"] == {}
    q2 = by_q["2020Q2"]["stages"]
    assert list(q2) == SCRAPING_STAGES
    assert (q2["reviews"]["rows_in"], q2["reviews"]["rows_out"], q2["reviews"]["dropped"]) == (20, 16, 4)
    assert q2["articles"]["drops"] == {"bot_wall": 1, "fetch_failed:not_archived": 1}
    assert q2["articles"]["extras"]["fetch_success_rate"] == 0.875 and q2["articles"]["extras"]["fetches"] == 16
    assert q2["appearances"]["extras"]["platform/facebook"] == 7
    assert {k: v["rows_out"] for k, v in by_q["2020Q3"]["stages"].items()} == dict.fromkeys(SCRAPING_STAGES, 0)
    assert by_q["2026Q2"]["stages"]["trusted_reviews"]["drops"] == {"unknown_publisher": 1}
    assert collect_yields(data, "2020-04") == by_q["2020Q2"]


def test_text_funnel_for_a_range(data):
    text = format_range(collect_range(data, "2020Q1", "2020Q4"))
    assert text.index("Stage yields for 2020Q2:") < text.index("Stage yields for 2020Q3:")
    assert "bot_wall=1" in text and "fetch success 87.5%" in text
    assert "WARN reviews_volume: 0 reviews against 16 in 2020Q2" in text
    assert text.endswith("Nothing materialized for: 2020Q1, 2020Q4")


def test_yield_checks_are_wired_and_non_blocking():
    names = {key.name for c in CHECKS for key in c.check_keys}
    assert {"reviews_volume", "articles_scrape_success", "scored_claims_quality", "release_format"} <= names
    for check_def in YIELD_CHECKS:
        (spec,) = check_def.check_specs
        assert not spec.blocking
    assert previous_quarter("2021Q1") == "2020Q4" and previous_quarter("2020Q3") == "2020Q2"


def test_review_volume_check_warns_when_a_quarter_halves(data):
    q3 = collect_yields(data, "2020Q3")["checks"]["reviews_volume"]
    assert (q3["passed"], q3["severity"], q3["asset"]) == (False, "WARN", "reviews")
    assert q3["metadata"]["reviews"] == 0 and q3["metadata"]["previous_reviews"] == 16
    assert q3["metadata"]["previous_quarter"] == "2020Q2" and q3["metadata"]["ratio"] == 0.0
    q2 = collect_yields(data, "2020Q2")["checks"]["reviews_volume"]
    assert q2["passed"] and q2["note"] == "no comparison: 2020Q1 was never materialized"
    # 2026Q2 after an unmaterialized 2026Q1 passes with a note, it does not guess
    assert collect_yields(data, "2026Q2")["checks"]["reviews_volume"]["note"] == "no comparison: 2026Q1 was never materialized"


def test_scrape_success_check_reads_the_articles_yield(data):
    q2 = collect_yields(data, "2020Q2")["checks"]["articles_scrape_success"]
    assert q2["passed"] and q2["metadata"]["scrape_success"] == 0.875
    assert (q2["metadata"]["rows_in"], q2["metadata"]["rows_out"]) == (16, 14)
    q3 = collect_yields(data, "2020Q3")["checks"]["articles_scrape_success"]
    assert q3["passed"] and q3["note"] == "no trusted reviews to scrape"


def test_band_edges_of_the_check_functions():
    low = scrape_success_result("2025Q4", {"rows_in": 10, "rows_out": 4, "run_id": "r"})
    assert not low.passed and low.severity.value == "WARN" and low.metadata["scrape_success"].value == 0.4
    assert scrape_success_result("2025Q4", {"rows_in": 10, "rows_out": 5, "run_id": "r"}).passed  # 50 % is in band
    half = review_volume_result("2025Q4", {"rows_out": 5}, {"rows_out": 10})
    assert half.passed and half.metadata["ratio"].value == 0.5
    under = review_volume_result("2025Q4", {"rows_out": 4}, {"rows_out": 10})
    assert not under.passed and under.metadata["previous_quarter"].value == "2025Q3"
    after_empty = review_volume_result("2025Q4", {"rows_out": 3}, {"rows_out": 0})
    assert after_empty.passed and after_empty.metadata["note"].value == "no comparison: 2025Q3 had no reviews"


def test_json_for_a_range_and_for_one_quarter(data, capsys):
    assert main(["--config", data, "yields", "--from", "2020-04", "--to", "2020Q3", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert (payload["from"], payload["to"]) == ("2020Q2", "2020Q3")
    assert [q["quarter"] for q in payload["quarters"]] == ["2020Q2", "2020Q3"]
    assert payload["quarters"][0]["stages"]["reviews"]["drops"]["duplicate"] == 1
    assert payload["quarters"][1]["checks"]["reviews_volume"]["passed"] is False
    assert main(["--config", data, "yields", "--quarter", "2026Q2", "--json"]) == 0
    single = json.loads(capsys.readouterr().out)
    assert single["quarter"] == "2026Q2" and single["stages"]["articles"]["rows_out"] == 1


def test_cli_rejects_ambiguous_ranges(data, capsys):
    assert main(["--config", data, "yields", "--quarter", "2026Q2", "--from", "2020Q1"]) == 2
    assert main(["--config", data, "yields", "--to", "2020Q1"]) == 2
    assert main(["--config", data, "yields", "--from", "2021Q1", "--to", "2020Q1"]) == 2
    assert "empty quarter range" in capsys.readouterr().err


@pytest.fixture(scope="module")
def page(data, tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "yields.html"
    assert main(["--config", data, "yields", "--from", "2020Q1", "--to", "2026Q2", "--html", str(out)]) == 0
    return out


def test_html_is_self_contained(page):
    text = page.read_text(encoding="utf-8")
    doc = lxml.html.fromstring(text)
    assert doc.xpath("//script") == [] and doc.xpath("//link") == [] and doc.xpath("//iframe") == []
    refs = doc.xpath("//@src | //@href | //@xlink:href", namespaces={"xlink": "http://www.w3.org/1999/xlink"})
    assert refs == []  # nothing to fetch at all, so no http(s) URL either
    assert not re.search(r"https?://", text) and "url(" not in text and "@import" not in text
    assert len(doc.xpath("//style")) == 1


def test_html_has_one_svg_per_chart_and_the_yields(page, data):
    doc = lxml.html.parse(str(page)).getroot()
    figures = doc.xpath("//figure[@class='chart']")
    # no model stage ran: no LLM charts; stage 4 ran: its media yield by platform
    assert [f.get("id") for f in figures] == ["chart-funnel", "chart-scraping", "chart-media-yield"]
    assert all(len(f.xpath(".//svg")) == 1 for f in figures) and len(doc.xpath("//svg")) == len(figures)
    assert doc.get_element_by_id("no-llm") is not None
    funnel = doc.get_element_by_id("chart-funnel")
    assert [p.get("data-quarter") for p in funnel.xpath(".//g[@class='panel']")] == ["2020Q2", "2020Q3", "2026Q2"]
    assert set(SCRAPING_STAGES) <= {t.text for t in funnel.xpath(".//text")}
    reports = {r["quarter"]: r for r in collect_range(data, "2020Q1", "2026Q2") if r["stages"]}
    bars = funnel.xpath(".//rect[@class='bar']")
    assert len(bars) == 3 * len(SCRAPING_STAGES)
    for bar in bars:
        assert int(bar.get("data-rows-out")) == reports[bar.get("data-quarter")]["stages"][bar.get("data-stage")]["rows_out"]
    cells = doc.xpath("//table[@id='funnel-table']//td[@data-field]")
    assert len(cells) == 3 * len(SCRAPING_STAGES) * 2
    for cell in cells:
        assert int(cell.text) == reports[cell.get("data-quarter")]["stages"][cell.get("data-stage")][cell.get("data-field")]
    drops = {
        (row[0].text, row[1].text): int(row[2].text) for row in doc.xpath("//table[@id='drop-table']/tbody/tr")
    }
    assert drops == {
        ("reviews", "claim_date_after_review_date"): 1, ("reviews", "duplicate"): 1,
        ("reviews", "quarantined:element_without_items"): 1, ("reviews", "quarantined:missing_review_url"): 1,
        ("trusted_reviews", "unknown_publisher"): 1,
        ("articles", "bot_wall"): 1, ("articles", "fetch_failed:not_archived"): 1,
    }
    assert list(drops) == [(r["stage"], r["reason"]) for r in drop_table(list(reports.values()))]
    scraping = {(c.get("data-quarter"), c.get("data-field")): c.text for c in doc.xpath("//table[@id='scraping-table']//td[@data-field]")}
    assert scraping[("2020Q2", "fetch_success_rate")] == "87.5%" and scraping[("2026Q2", "scrape_success")] == "100.0%"
    assert scraping[("2020Q3", "fetch_success_rate")] == "n/a"  # nothing to fetch is not a 0 % success
    warn_rows = doc.xpath("//table[@id='check-table']//tr[@class='warn']")
    assert [[td.text for td in tr][:3] for tr in warn_rows] == [["2020Q3", "reviews_volume", "WARN"]]
    assert "2020Q1" in doc.get_element_by_id("empty-quarters").text
    media = {(c.get("data-platform"), c.get("data-quarter")): c.text
             for c in doc.xpath("//table[@id='media-yield-table']//td[@data-field='media_yield']")}
    expected = {(p, q): f"{row['with_media']}/{row['appearances']}" for q, r in reports.items()
                for p, row in media_yield(r).items()}
    assert expected and {k: media[k].split(" ")[0] for k in expected} == expected
    ways = {(c.get("data-platform"), c.get("data-way")): int(c.text)
            for c in doc.xpath("//table[@id='ways-table']//td[@data-field='served']")}
    assert ways[("x", "page")] >= 1  # the demo's X post is served by its page (replay has no syndication answer)


def _model_report() -> dict:
    """A quarter as the model stages report it (their metadata keys), without running a model."""
    llm = lambda calls, hits, cost: {  # noqa: E731
        "llm/calls": calls, "llm/cache_hits": hits, "llm/hit_rate": hits / calls, "llm/cost_usd": cost, "llm/errors": 0,
    }
    return {
        "quarter": "2025Q4",
        "checks": {},
        "stages": {
            "articles": {"rows_in": 10, "rows_out": 4, "dropped": 6, "drops": {"paywall": 6},
                         "extras": {"fetches": 10, "fetch_success_rate": 0.6}},
            "normalized_claims": {"rows_in": 4, "rows_out": 4, "dropped": 0, "drops": {}, "extras": llm(8, 2, 0.25)},
            "scored_claims": {"rows_in": 4, "rows_out": 3, "dropped": 1, "drops": {"rater_disagreement": 1},
                              "extras": llm(12, 8, 0.5)},
            "evaluation": {"rows_in": 3, "rows_out": 3, "dropped": 0, "drops": {}, "extras": {"integrity_mse": float("nan")}},
        },
    }


def test_llm_cost_and_cache_charts_when_model_stages_ran(tmp_path):
    report = _model_report()
    summary = quarter_summary(report)
    assert summary["llm"]["calls"] == 20 and summary["llm"]["cache_hits"] == 10 and summary["llm"]["hit_rate"] == 0.5
    assert summary["llm"]["cost_usd"] == 0.75 and summary["scrape_success"] == 0.4 and summary["fetch_success_rate"] == 0.6
    doc = lxml.html.parse(str(write_html([report], tmp_path / "p.html"))).getroot()
    assert [f.get("id") for f in doc.xpath("//figure")] == ["chart-funnel", "chart-scraping", "chart-llm-cost", "chart-llm-cache"]
    assert len(doc.xpath("//svg")) == 4
    cost_bar = doc.xpath("//figure[@id='chart-llm-cost']//rect[@class='bar']")
    assert [(b.get("data-quarter"), float(b.get("data-value"))) for b in cost_bar] == [("2025Q4", 0.75)]
    hit_bar = doc.xpath("//figure[@id='chart-llm-cache']//rect[@class='bar']")
    assert float(hit_bar[0].get("data-value")) == 0.5
    llm = {c.get("data-field"): c.text for c in doc.xpath("//table[@id='llm-table']//td[@data-field]")}
    assert llm == {"calls": "20", "cache_hits": "10", "hit_rate": "50.0%", "cost_usd": "0.7500", "errors": "0"}
    # the scrape-success bar sits under the dashed 50 % floor line
    scrape = doc.xpath("//figure[@id='chart-scraping']//rect[@data-series='scrape success']")
    assert float(scrape[0].get("data-value")) == 0.4


def test_text_from_data_is_escaped():
    report = _model_report()
    report["stages"]["articles"]["drops"] = {'<script>alert("x")</script>': 6}
    report["checks"] = {"reviews_volume": {"passed": False, "severity": "WARN", "note": "<img src=x onerror=alert(1)>"}}
    html_text = render_html([report])
    doc = lxml.html.fromstring(html_text)
    assert doc.xpath("//script") == [] and doc.xpath("//img") == []
    assert '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;' in html_text
    assert doc.xpath("//table[@id='drop-table']//td[contains(@class,'reason')]")[0].text == '<script>alert("x")</script>'


def test_an_empty_range_renders_a_note():
    doc = lxml.html.fromstring(render_html([{"quarter": "2019Q1", "stages": {}, "checks": {}}]))
    assert doc.xpath("//svg") == [] and "No stage has been materialized" in doc.text_content()


CHROMIUM = shutil.which("chromium")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed (`chromium` not on PATH); "
                    "the page is checked structurally by the other tests")
def test_chromium_renders_the_page(page, tmp_path):
    from PIL import Image

    shot = tmp_path / "yields.png"
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2000",
         page.resolve().as_uri()],
        check=True, timeout=120, capture_output=True,
    )
    with Image.open(shot) as image:
        assert image.size == (1280, 2000)
        colors = image.convert("RGB").getcolors(maxcolors=1280 * 2000)
    # the dark "rows out" bars are drawn (within a little colour-management slack): not a blank or text-only page
    near_bar = sum(n for n, (r, g, b) in colors if abs(r - 0x2F) + abs(g - 0x5D) + abs(b - 0x9E) <= 12)
    assert near_bar > 500
    # kept with the test artifacts (build/ is git-ignored; CI can upload the folder)
    artifacts = Path(os.environ.get("VERITAS_TEST_ARTIFACTS") or PROJECT_ROOT / "build" / "test-artifacts") / "dashboard"
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(page, artifacts / "yields.html")
    shutil.copy(shot, artifacts / "yields.png")
    assert (artifacts / "yields.png").stat().st_size == shot.stat().st_size
