"""The code location loads, and every stage materializes on the demo snapshot with the real embedded model."""

import json
from pathlib import Path

import pytest
import yaml

from assets.release.validation import validate_release
from dagster_project.cli import main
from dagster_project.commands.export import export_release
from dagster_project.config import PROJECT_ROOT, load_config
from dagster_project.definitions import ASSET_NAMES, build_definitions
from dagster_project.partitions import quarterly_partitions
from dagster_project.quarter_run import run_quarter
from dagster_project.resources.store import StoreResource
from dagster_project.yield_report import collect_yields, format_funnel
from tests.conftest import write_demo_config


@pytest.fixture(scope="module")
def config_file(tmp_path_factory):
    """The demo config in a temp data dir, slimmed so that the real local model answers in about a minute; the
    stage-4 chooser is on, so the embedded model also orders the AFP article's links."""
    return write_demo_config(tmp_path_factory.mktemp("veritas"), max_candidate_media=2, max_media=2, evidence_tokens_embedded=150,
                             appearance_chooser="smollm2-t0")


def test_definitions_load_with_groups_and_quarter_partitions(config_file):
    defs = build_definitions(config_file)
    graph = defs.resolve_asset_graph()
    keys = {k.to_user_string() for k in graph.get_all_asset_keys()}
    # the sources' snapshot feeds reviews; the leaderboard reads every quarter's evaluation
    audit = {"audit_annotations", "release_audit", "release_errata"}  # issue 50: in no job (people take weeks)
    assert keys == set(ASSET_NAMES) | {"review_snapshot", "leaderboard"} | audit and len(keys) == 15
    groups = {k.to_user_string(): graph.get(k).group_name for k in graph.get_all_asset_keys()}
    assert groups["reviews"] == groups["trusted_reviews"] == "ingestion"
    assert groups["articles"] == groups["appearances"] == "scraping"
    assert groups["normalized_claims"] == groups["scored_claims"] == groups["rectified_claims"] == "claims"
    assert groups["predictions"] == groups["evaluation"] == "evaluation"
    for key in graph.get_all_asset_keys():
        unpartitioned = key.to_user_string() in {"review_snapshot", "leaderboard"}
        assert graph.get(key).partitions_def == (None if unpartitioned else quarterly_partitions)
    assert "2025-10" in quarterly_partitions.get_partition_keys()
    assert {j.name for j in defs.jobs} >= {"quarterly_refresh", "evaluate_release"}


def test_workspace_points_at_the_definitions():
    workspace = yaml.safe_load((PROJECT_ROOT / "workspace.yaml").read_text())
    assert workspace["load_from"][0]["python_module"]["module_name"] == "dagster_project.definitions"


@pytest.fixture(scope="module")
def demo_run(config_file, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("DAGSTER_HOME", str(tmp_path_factory.mktemp("dagster_home")))
    assert run_quarter(config_file, "2026Q2")
    return config_file


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_every_stage_reports_a_consistent_funnel(demo_run):
    report = collect_yields(demo_run, "2026-04")  # the Dagster key is accepted and shown as the label
    assert report["quarter"] == "2026Q2"
    stages = report["stages"]
    assert list(stages) == ASSET_NAMES
    # the 2026Q2 part of the demo feed: the real AFP review and a non-fact-checker (the malformed records are 2020Q2's)
    assert stages["reviews"]["rows_in"] == 2 and stages["reviews"]["rows_out"] == 2
    assert stages["reviews"]["drops"] == {"duplicate": 0}
    assert stages["trusted_reviews"]["drops"] == {"unknown_publisher": 1}
    for upstream, downstream in zip(ASSET_NAMES[:4], ASSET_NAMES[1:5]):
        assert stages[upstream]["rows_out"] == stages[downstream]["rows_in"]
    assert stages["articles"]["rows_out"] == 1 and stages["appearances"]["rows_out"] == 1
    # the chooser asked the real model once; whatever it named outside the article was refused, not fetched
    chooser = stages["appearances"]["extras"]
    assert chooser["llm/calls"] == 1 and chooser["llm/errors"] == 0 and chooser["llm/raw_outputs"] == 1
    # what it named that is not literally one of the article's links, media or the review's appearances is refused
    import sqlite3

    config = load_config(demo_run)
    (answer,) = sqlite3.connect(config["llm"]["cache_path"]).execute(
        "select parsed_json from llm_cache where template_id = 'choose_appearance'").fetchone()
    store = StoreResource(**config["store"])
    (article,) = store.read_table("articles", "2026Q2").to_dicts()
    (review,) = store.read_table("trusted_reviews", "2026Q2").to_dicts()
    literal = {*article["links"], *article["video_urls"], *(i["src"] for i in article["images"]), *review["appearance_urls"]}
    refused = [u for u in json.loads(answer)["urls"] if u.strip() not in literal]
    assert chooser["chooser/refused_urls"] == len(refused)
    assert chooser["chooser/claims_with_refusals"] == int(bool(refused))
    text = format_funnel(report)
    assert "reviews" in text and "unknown_publisher=1" in text


def test_release_is_valid_and_exportable(demo_run, tmp_path):
    config = load_config(demo_run)
    root = Path(config["store"]["root"])
    release_dir = Path((root / "releases/2026Q2/LATEST").read_text().strip())
    folder = root / "releases/2026Q2" / release_dir.name
    assert validate_release(folder) == []
    manifest = json.loads((folder / "manifest.json").read_text())
    assert [m["name"] for m in manifest["models"]] == ["smollm2-t0", "smollm2-t6", "smollm2-t9"]
    assert manifest["model_diversity"]["distinct_models"] == 1  # the demo's raters are one model (issue 14)
    assert set(manifest["prompt_versions"]) >= {"rate_claim", "rate_media", "normalize_claim", "media_filter"}
    # every count agrees with claims.json and with the funnel: the release holds what selection kept of the scored
    # and rectified claims. NOTE: with the slimmed embedded model the demo quarter's one claim is dropped at scoring
    # (two of its three raters fail to answer), so this release is empty today; a non-empty one is not asserted.
    claims = json.loads((folder / "claims.json").read_text())["claims"]
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["claim_counts"]["total"] == len(claims) == manifest["counts"]["claim_counts"]["total"]
    store = StoreResource(**config["store"])
    scored = store.read_table("scored_claims", "2026Q2").height
    rectified = store.read_table("rectified_claims", "2026Q2").height
    selection = manifest["selection"]
    available, selected = selection["available"], selection["selected"]
    assert available["intact"] + available["compromised"] + available["unknown"] == scored
    assert available["rectified"] == rectified
    assert len(claims) == sum(selected.values()) == selection["feasible_size"] <= scored + rectified
    assert (selected["intact"], selected["unknown"], selected["compromised"]) == tuple(
        meta["claim_counts"][k] for k in ("intact", "nei", "compromised"))
    assert sum(meta["claim_counts"][k] for k in ("intact", "nei", "compromised")) == len(claims)
    assert len({c["id"] for c in claims}) == len(claims)
    # the export is a byte-for-byte copy of the release: the same files with the same content
    out = export_release(demo_run, "2026Q2", str(tmp_path / "export"))
    released = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
    exported = {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
    assert set(released) >= {"claims.json", "meta.json", "manifest.json", "claims.parquet"}
    assert exported == released
    evaluation = json.loads((root / "reports/2026Q2/evaluation.json").read_text())
    assert evaluation["quarter"] == "2026Q2"
    # an empty quarantine is still a typed, versioned table: QuarantineRecord's columns and dtypes, no rows
    import polars as pl

    from schemas.frames import polars_schema
    from schemas.records import QuarantineRecord

    quarantine_dir = root / "quarantine/reviews/2026Q2"
    table = pl.read_parquet(quarantine_dir / f"{(quarantine_dir / 'LATEST').read_text().strip()}.parquet")
    assert dict(table.schema) == polars_schema(QuarantineRecord)
    assert list(table.columns) == ["stage", "quarter", "reason", "source", "record"]
    assert table.height == 0


def test_a_rerun_pays_nothing_twice(demo_run):
    """No answered call is paid for again. A call that failed in transport (a timeout on a loaded machine) is not
    cached, so a re-run asks it again, and everything downstream of its fallback then has new prompts: only when the
    first run had no transport failure must the re-run make no call at all."""
    import sqlite3

    config = load_config(demo_run)
    db = sqlite3.connect(config["llm"]["cache_path"])
    first = db.execute("select max(id) from llm_ledger").fetchone()[0]
    answered = {k for (k,) in db.execute("select cache_key from llm_ledger where cache_hit = 0 and "
                                         "(error is null or error not like 'transport%')")}
    transport = db.execute("select count(*) from llm_ledger where error like 'transport%'").fetchone()[0]
    assert answered
    assert run_quarter(demo_run, "2026Q2", until="scored_claims")
    again = [k for (k,) in db.execute("select cache_key from llm_ledger where id > ? and cache_hit = 0", (first,))]
    hits = db.execute("select count(*) from llm_ledger where id > ? and cache_hit = 1", (first,)).fetchone()[0]
    assert not set(again) & answered
    assert hits > 0
    if transport == 0:
        assert again == []


def test_cli_rejects_bad_input(demo_run, capsys):
    assert main(["--config", demo_run, "yields", "--quarter", "2025Q7"]) == 2
    assert "not a quarter" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--config", demo_run, "run", "--quarter", "2026Q2", "--until", "nonsense"])


def test_malformed_records_are_quarantined_in_their_own_quarter(demo_run):
    import polars as pl

    assert run_quarter(demo_run, "2020Q2", until="trusted_reviews")
    stages = collect_yields(demo_run, "2020Q2")["stages"]
    assert (stages["reviews"]["rows_in"], stages["reviews"]["rows_out"]) == (20, 16)
    assert stages["reviews"]["drops"] == {
        "claim_date_after_review_date": 1, "duplicate": 1,
        "quarantined:element_without_items": 1, "quarantined:missing_review_url": 1,
    }
    root = Path(load_config(demo_run)["store"]["root"])
    folder = root / "quarantine/reviews/2020Q2"
    table = pl.read_parquet(folder / f"{(folder / 'LATEST').read_text().strip()}.parquet")
    assert sorted(table["reason"].to_list()) == ["element_without_items", "missing_review_url"]
    assert set(table["stage"].to_list()) == {"reviews"} and set(table["quarter"].to_list()) == {"2020Q2"}


def test_dashboard_shows_the_model_stages_of_the_demo_run(demo_run, tmp_path):
    import lxml.html

    from dagster_project.core.dashboard import quarter_summary, write_html
    from dagster_project.yield_report import collect_range

    (report,) = collect_range(demo_run, "2026Q2", "2026Q2")
    calls = {name: s["extras"]["llm/calls"] for name, s in report["stages"].items() if "llm/calls" in s["extras"]}
    assert set(calls) == {"appearances", "normalized_claims", "scored_claims", "rectified_claims", "predictions"}
    llm = quarter_summary(report)["llm"]
    assert llm["calls"] == sum(calls.values()) > 0 and llm["cost_usd"] == 0.0  # the embedded model costs nothing
    assert report["checks"]["reviews_volume"]["passed"] and report["checks"]["articles_scrape_success"]["passed"]
    doc = lxml.html.parse(str(write_html([report], tmp_path / "yields.html"))).getroot()
    assert [f.get("id") for f in doc.xpath("//figure")] == ["chart-funnel", "chart-scraping", "chart-media-yield", "chart-llm-cost",
                                                          "chart-llm-cache"]
    cells = {c.get("data-field"): c.text for c in doc.xpath("//table[@id='llm-table']//td[@data-field]")}
    assert int(cells["calls"]) == llm["calls"]
