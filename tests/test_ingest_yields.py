"""Issue 3: the reviews and trusted_reviews assets report top publishers, the language mix and unknown publishers
as Dagster metadata, in ``veritas yields --json`` and (unknown publishers) in a report file."""

import csv
import json
from pathlib import Path

import pytest
import yaml

from dagster_project.quarter_run import run_quarter
from dagster_project.yield_report import collect_yields
from tests.conftest import write_demo_config
from tests.ingest_shapes import FIXTURES, feed, ifcn_feed_items


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("veritas_yields")
    config = write_demo_config(folder)
    with open(FIXTURES / "ifcn_excerpt.csv", newline="", encoding="utf-8") as fh:
        ifcn = feed(ifcn_feed_items(list(csv.DictReader(fh))))
    (folder / "ifcn_feed.json").write_text(json.dumps(ifcn), encoding="utf-8")
    cfg = yaml.safe_load(Path(config).read_text())
    cfg["sources"].append({"kind": "datafeed", "path": str(folder / "ifcn_feed.json")})
    with open(config, "w") as fh:
        yaml.safe_dump(cfg, fh)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(folder / "dagster_home"))
        assert run_quarter(config, "2026Q2", until="trusted_reviews")
        assert run_quarter(config, "2020Q2", until="trusted_reviews")
        yield config, folder, {q: collect_yields(config, q) for q in ("2026Q2", "2020Q2")}


def test_unknown_publishers_in_metadata_and_report(run):
    _, folder, reports = run
    stages = reports["2026Q2"]["stages"]
    assert (stages["reviews"]["rows_out"], stages["trusted_reviews"]["rows_out"]) == (2, 1)
    assert stages["trusted_reviews"]["drops"] == {"unknown_publisher": 1}
    extras = stages["trusted_reviews"]["extras"]
    assert extras["unknown_publishers_distinct"] == 1
    assert extras["publisher/afp-fact-check"] == 1
    report = folder / "data" / "data" / "reports" / "trusted_reviews" / "2026Q2" / "unknown_publishers.csv"
    assert report.read_text(encoding="utf-8") == "publisher,reviews\nmorningbuzz-news.com,1\n"
    # the review stage names publishers by registered domain, unknown ones included
    assert stages["reviews"]["extras"]["publisher/morningbuzz-news.com"] == 1
    assert stages["reviews"]["extras"]["publisher/afp.com"] == 1


def test_top_publishers_and_language_mix(run):
    _, _, reports = run
    stages = reports["2020Q2"]["stages"]
    reviews, trusted = stages["reviews"]["extras"], stages["trusted_reviews"]["extras"]
    # demo feed 2020Q2: 16 reviews with inLanguage; IFCN rows from April to June 2020: 55, languages detected
    assert stages["reviews"]["rows_out"] == 16 + 55
    assert reviews["languages_detected"] == 55
    # the IFCN claim texts are English explanations: all 55 detected as en; the demo feed names its 16
    assert {k: v for k, v in reviews.items() if k.startswith("language/")} == {
        "language/en": 55 + 10, "language/es": 2, "language/fr": 2, "language/it": 1, "language/tr": 1}
    assert sum(v for k, v in trusted.items() if k.startswith("language/")) == stages["trusted_reviews"]["rows_out"]
    top = {k: v for k, v in trusted.items() if k.startswith("publisher/")}
    assert len([k for k in top if k != "publisher/other"]) == 10
    assert sum(top.values()) == stages["trusted_reviews"]["rows_out"]
    assert top["publisher/politifact"] == max(v for k, v in top.items() if k != "publisher/other") == 7
