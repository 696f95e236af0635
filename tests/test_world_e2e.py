"""Issue 36, section 2, small: a simulated world of 25 quarters (2020Q1 to 2026Q1, ~40 reviews each, releases of 6)
through one ``veritas backfill --from 2020Q1 --to 2026Q1 --until leaderboard``: the releases, the predictions of the
four simulated systems, the evaluation and the leaderboard, with its longitudinal cut-off view.

The backfill runs in a process of its own with its runs in that process (``--launch here``); it is interrupted
(SIGINT, as Ctrl-C) once a few releases exist, and ``veritas backfill --retry ID`` finishes it. The world asks for
15% recurring reviews (the measured share, 0.61%, would give a world of 1,000 reviews about six) so that later
quarters' releases mark some claims recurring, and the view has some to leave out and count.

Without the changes it covers: no backfill reached the leaderboard (``--until`` named the partitioned stages only),
the predictions held one system, and there was no longitudinal view."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dagster_project.config import PROJECT_ROOT
from dagster_project.core.quarters import quarter_range
from dagster_project.simulation.run import latest_release

QUARTERS = quarter_range("2020Q1", "2026Q1")
REVIEWS, RELEASE, RECURRING = 40, 6, 0.15


def backfill(config: str, *args: str, stop_after_releases: int = 0) -> tuple[int, str]:
    """``veritas backfill`` in a process of its own; SIGINT once ``stop_after_releases`` releases were published."""
    env = {k: v for k, v in os.environ.items()}
    cmd = [sys.executable, "-m", "dagster_project.cli", "--config", config, "backfill", "--no-bars", *args]
    log = Path(config).with_name(f"backfill-{time.monotonic_ns()}.log")
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
        releases = Path(config).parent / "data" / "data" / "releases"
        deadline = time.monotonic() + 1500
        while proc.poll() is None and time.monotonic() < deadline:
            if stop_after_releases and len(list(releases.glob("*/LATEST"))) >= stop_after_releases:
                proc.send_signal(signal.SIGINT)
                stop_after_releases = 0
            time.sleep(0.5)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
    return proc.returncode, log.read_text()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from dagster_project.simulation.panel import PanelServer
    from dagster_project.simulation.records import load_records
    from dagster_project.simulation.world import (
        WorldConfig,
        build_world,
        panel_config,
        world_truth,
        write_world_config,
    )
    from tests.ops_support import fast_router_backoff

    folder = tmp_path_factory.mktemp("world")
    out = {"folder": folder, "world": build_world(folder, WorldConfig(reviews_per_quarter=REVIEWS,
                                                                      recurring_share=RECURRING, label_mix="balanced"),
                                                  load_records(prefer_shared=False))}
    panel = panel_config(latency_median_s=0.0, retry_after_s=0.0, faults={})
    with PanelServer(world_truth(folder), panel) as server, pytest.MonkeyPatch.context() as mp, fast_router_backoff():
        mp.setenv("VERITAS_SIM_KEY", "sk-simulated")
        mp.setenv("VERITAS_RELEASE_KEY", "5eed" * 8)
        mp.setenv("DAGSTER_HOME", str(folder / "data" / "dagster"))
        config = write_world_config(folder, server, release_size=RELEASE, parallel_claims=4)
        out["config"] = config
        out["first"] = backfill(config, "--from", QUARTERS[0], "--to", QUARTERS[-1], "--until", "leaderboard",
                                "--launch", "here", stop_after_releases=3)
        backfill_id = next(line.split()[1].rstrip(":") for line in out["first"][1].splitlines()
                           if line.startswith("[backfill] ") and "quarters, stages" in line)
        out["retry"] = backfill(config, "--retry", backfill_id, "--launch", "here")
        board = folder / "data" / "data" / "reports" / "leaderboard"
        out["board"] = json.loads((board / "leaderboard.json").read_text())["board"] if (
            board / "leaderboard.json").exists() else None
        out["longitudinal"] = json.loads((board / "longitudinal.json").read_text()) if (
            board / "longitudinal.json").exists() else None
        out["board_dir"] = board
    return out


def test_a_world_plan_at_full_size_recurs_at_the_measured_share_and_keeps_quarters_apart():
    """No generation: which record each of 25 x 1,000 reviews is about. Only the recurring reviews share a claim
    with an earlier quarter; they are the measured share of the reviews after the first quarter, most of them by
    the publisher that reviewed the claim first."""
    from dagster_project.simulation.records import claim_key, load_records
    from dagster_project.simulation.world import (
        RECURRING_SHARE,
        WorldConfig,
        plan_world,
        reviews_per_quarter,
    )

    config = WorldConfig(reviews_per_quarter=1000)
    plan = plan_world(load_records(prefer_shared=False), config)["quarters"]
    assert {q: len(v) for q, v in plan.items()} == reviews_per_quarter(config)
    seen: dict[str, str] = {}
    recurring = 0
    for q, reviews in plan.items():
        for r in reviews:
            earlier = seen.get(claim_key(r["claim"]))
            assert (earlier is not None and earlier < q) == bool(r["recurring_from"]), (q, r["claim"])
            recurring += bool(r["recurring_from"])
        for r in reviews:
            seen.setdefault(claim_key(r["claim"]), q)
    later = sum(len(v) for q, v in plan.items() if q != "2020Q1")
    assert 0.5 * RECURRING_SHARE < recurring / later < 1.5 * RECURRING_SHARE, recurring


def test_the_world_follows_the_profile_with_publishers_and_recurring_claims(world):
    w = world["world"]
    assert list(w["quarters"]) == QUARTERS
    reviews = {q: v["reviews"] for q, v in w["quarters"].items()}
    # the profile: 2022Q4 (1.72 x the mean in 5Pils) against 2020Q2 (0.55 x)
    assert reviews["2022Q4"] > 2 * reviews["2020Q2"], reviews
    assert w["quarters"]["2020Q1"]["recurring_reviews"] == 0
    assert sum(v["recurring_reviews"] for v in w["quarters"].values()) > 0.1 * sum(reviews.values())
    spans = w["spans"]
    assert any(first > QUARTERS[0] for first, _ in spans.values()) and any(last < QUARTERS[-1] for _, last in spans.values())


def test_one_backfill_interrupted_then_retried_releases_every_quarter(world):
    code, log = world["first"]
    # Ctrl-C: the run under way stops at its step (Dagster hears the signal: "interrupted"), the backfill is cancelled
    assert code != 0 and ": cancelling " in log and "veritas backfill --retry" in log, log[-3000:]
    code, log = world["retry"]
    assert code == 0, log[-3000:]
    data = world["folder"] / "data"
    manifests = {q: json.loads((latest_release(data, q) / "manifest.json").read_text()) for q in QUARTERS}
    assert len(manifests) == 25
    marked = {q: m["recurring"]["count"] for q, m in manifests.items()}
    assert marked["2020Q1"] == 0 and sum(marked.values()) > 0, marked
    # each release read the releases of every quarter before it
    assert manifests["2026Q1"]["recurring"]["earlier_quarters"] == QUARTERS[:-1]


def test_the_leaderboard_ranks_the_simulated_systems_over_25_quarters(world):
    board = world["board"]
    assert board is not None, "no leaderboard: the backfill did not reach it"
    assert board["all_quarters"] == QUARTERS
    systems = {s["name"]: s for s in board["systems"]}
    assert set(systems) == {"sim-alpha-closed-book", "sim-beta-closed-book", "sim-gamma-closed-book",
                            "sim-delta-closed-book"}
    assert sorted(s["rank"] for s in board["systems"]) == [1, 2, 3, 4]
    mses = [s["windows"]["all"]["mse"] for s in board["systems"]]
    assert mses == sorted(mses)  # ranked by MSE


def test_the_longitudinal_view_has_both_sides_of_each_cutoff_with_recurring_left_out_and_counted(world):
    view = world["longitudinal"]
    assert view is not None
    assert len(view["by_quarter"]) == 4 * 25
    recurring = {r["quarter"]: r["recurring"] for r in view["by_quarter"] if r["system"] == "sim-alpha-closed-book"}
    for s in view["summary"]:
        assert s["before_n"] > 0 and s["after_n"] > 0 and s["before_mse"] is not None and s["after_mse"] is not None
        after = [r for r in view["by_quarter"] if r["system"] == s["system"] and r["relation"] == "after"]
        assert s["recurring_left_out"] == sum(r["recurring"] for r in after)
        assert all(r["fresh"] == r["claims"] - r["recurring"] for r in after)
    # sim-delta's cut-off (2021Q2) is early: most recurring marks fall after it, and are left out and counted
    delta = next(s for s in view["summary"] if s["system"] == "sim-delta-closed-book")
    assert delta["recurring_left_out"] > 0 and delta["recurring_left_out"] == sum(
        n for q, n in recurring.items() if q > "2021Q2")
    # the simulated members know less after their cut-off: pooled over the four, the after side is worse
    before = sum(s["before_mse"] * s["before_n"] for s in view["summary"]) / sum(s["before_n"] for s in view["summary"])
    after = sum(s["after_mse"] * s["after_n"] for s in view["summary"]) / sum(s["after_n"] for s in view["summary"])
    assert after > before, (before, after)
    assert (world["board_dir"] / "longitudinal.png").stat().st_size > 10_000
    assert "recurring out" in (world["board_dir"] / "longitudinal.txt").read_text()


def test_the_dashboard_shows_all_25_quarters(world, monkeypatch):
    from dagster_project.core.dashboard import render_html
    from dagster_project.yield_report import collect_range

    # the world's instance: an earlier test of the session may have left DAGSTER_HOME on its own (project_instance
    # sets it for the run processes), and the dashboard reads $DAGSTER_HOME first
    monkeypatch.setenv("DAGSTER_HOME", str(world["folder"] / "data" / "dagster"))
    reports = collect_range(world["config"], QUARTERS[0], QUARTERS[-1])
    assert [r["quarter"] for r in reports] == QUARTERS and all(r["stages"] for r in reports)
    page = render_html(reports)
    assert all(f'class="panel" data-quarter="{q}"' in page for q in QUARTERS)
    assert "Nothing materialized for" not in page
