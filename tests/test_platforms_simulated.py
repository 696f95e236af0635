"""Issue 26: a simulated quarter whose X posts are shells, whose Instagram posts are behind a login wall and some of
whose videos are YouTube posts behind a consent page (dagster_project/simulation/quarter.py, ``walled_share``):
stages 1-4 run by Dagster from its WARC, once with the ways in of stage 4 and once without them, and the media
yield by platform of both runs is compared (``veritas yields`` prints the same figures)."""

import os

import pytest
import yaml

from dagster_project.config import PROJECT_ROOT
from dagster_project.core.dashboard import media_yield, way_table
from dagster_project.quarter_run import run_quarter
from dagster_project.yield_report import collect_yields, format_funnel

QUARTER = "2025Q3"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records

    folder = tmp_path_factory.mktemp("walled")
    truth = generate(folder / "quarter", QuarterConfig(quarter=QUARTER, reviews=60, video_share=0.0, archive_share=0.0,
                                                       walled_share=1.0, youtube_share=0.3),
                     load_records(prefer_shared=False))
    out = {"truth": truth}
    for name, enabled in (("with", True), ("without", False)):
        cfg = yaml.safe_load((PROJECT_ROOT / "veritas.yaml").read_text())
        cfg["data_dir"] = str(folder / name / "data")
        cfg["sources"] = [{"kind": "datafeed", "path": str(folder / "quarter" / "feed.json")}]
        cfg["web"] = {"mode": "replay", "warc_paths": [str(folder / "quarter" / "pages.warc.gz")]}
        cfg["stages"]["platforms"] = {"enabled": enabled}
        path = folder / name / "veritas.yaml"
        path.parent.mkdir(parents=True)
        path.write_text(yaml.safe_dump(cfg))
        old = os.environ.get("DAGSTER_HOME")
        os.environ["DAGSTER_HOME"] = str(folder / name / "dagster_home")
        try:
            assert run_quarter(str(path), QUARTER, until="appearances")
            out[name] = collect_yields(str(path), QUARTER)
        finally:
            if old is None:
                os.environ.pop("DAGSTER_HOME", None)
            else:
                os.environ["DAGSTER_HOME"] = old
    return out


def test_the_walled_posts_give_their_media_only_through_a_way_in(runs):
    counts = runs["truth"]["counts"]
    assert counts["walled_twitter"] and counts["walled_instagram"] and counts["walled_youtube"]
    with_ways, without = media_yield(runs["with"]), media_yield(runs["without"])
    print("\nmedia yield by platform, with the ways in:", with_ways, "\nwithout them:", without)
    print(format_funnel(runs["with"]))
    for platform in ("x", "instagram", "youtube"):
        assert with_ways[platform]["appearances"] == without[platform]["appearances"] > 0
        assert with_ways[platform]["with_media"] > without[platform]["with_media"], platform
    # every walled page is a dead end on its own: an X shell and a consent page have no media, a login wall no post
    assert without["x"]["with_media"] == without["youtube"]["with_media"] == without["instagram"]["with_media"] == 0
    ways = way_table(runs["with"]["stages"]["appearances"]["extras"])
    # each walled post with media got it through its way in ("served" also counts the text-only answers that a post
    # without media kept)
    assert ways[("x", "x_syndication")]["served"] >= with_ways["x"]["with_media"]
    assert ways[("instagram", "instagram_embed")]["served"] >= with_ways["instagram"]["with_media"]
    assert ways[("youtube", "youtube_oembed")]["served"] >= with_ways["youtube"]["with_media"]
    assert ways[("youtube", "ytdlp")]["failed"]  # the video itself is not in the quarter's WARC: oEmbed's thumbnail
    # an Instagram post with no image is lost behind its wall: the login page is no appearance (without the ways in
    # it was taken for one, with no media)
    drops = runs["with"]["stages"]["appearances"]["drops"]
    assert drops.get("appearances_unreachable", 0) > runs["without"]["stages"]["appearances"]["drops"].get(
        "appearances_unreachable", 0)
