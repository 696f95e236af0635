"""Issue 51, section 5: a release is never built on a missing or stale earlier release without saying so.

A quarter's release reads every earlier release (the claims that recur), so it may not be built while an earlier
quarter with reviews has no release, or has a stale one; the first release of a store has none before it. Three
simulated quarters (2025Q1 to Q3, made from the same real records, so the later ones repeat claims of the earlier),
in one data dir, through the real CLI and the real release asset:

- ``veritas run`` of 2025Q3 on the fresh store: the store's first release, built;
- ``veritas run`` of 2025Q1: built, and the run says that 2025Q3's release is stale now, and how to rebuild it;
- 2025Q3 again: ``veritas run`` and ``veritas backfill`` refuse before anything runs, naming 2025Q2 (reviews, no
  release), and the release asset refuses too when launched alone (as the UI or the schedule launch it), so LATEST
  still points at the first build;
- ``veritas run --allow-missing-earlier`` builds it: LATEST, and its manifest and card name what it lacks;
- ``veritas backfill`` of 2025Q2 builds it, then rebuilds 2025Q3's release, stale again: no stale release is LATEST,
  and 2025Q3's release reads both earlier ones.

Before the fix every one of these builds succeeded silently: the release of 2025Q3 marked no claim recurring, and
stayed LATEST."""

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from assets.release.chain import (
    ALLOW_TAG,
    chain_gaps,
    gap_message,
    later_stale,
    reads_another,
)
from dagster_project.cli import main
from dagster_project.config import PROJECT_ROOT
from dagster_project.simulation.run import latest_release

QUARTERS = ["2025Q1", "2025Q2", "2025Q3"]
REVIEWS, RELEASE = 40, 6


def rel(content: str, read: str | None) -> dict:
    return {"version": f"v-{content}", "content_id": content, "previous_release": read}


def test_the_chain_rules_without_a_pipeline():
    releases = {"2025Q1": rel("a", ""), "2025Q3": rel("c", "a")}
    # the store's first release has nothing before it, whatever the sources hold
    assert chain_gaps(releases, {"2024Q4", "2025Q1"}, "2025Q1") == ([], [])
    assert chain_gaps({}, {"2025Q1", "2025Q2"}, "2025Q3") == ([], [])
    # a quarter with reviews between the first release and this one, without a release: missing
    assert chain_gaps(releases, {"2025Q1", "2025Q2"}, "2025Q4") == (["2025Q2"], [])
    # quarters without reviews are passed over: 2025Q3 read 2025Q1's release, the nearest one
    assert chain_gaps(releases, {"2025Q1"}, "2025Q4") == ([], []) and not reads_another(releases, "2025Q3")
    # 2025Q2 released since: 2025Q3 read another release than the one before it now, and every later one is stale
    releases["2025Q2"] = rel("b", "a")
    releases["2025Q4"] = rel("d", "c")
    assert reads_another(releases, "2025Q3") and not reads_another(releases, "2025Q4")
    assert chain_gaps(releases, set(), "2026Q1") == ([], ["2025Q3"])
    assert later_stale(releases, "2025Q2") == ["2025Q3", "2025Q4"] and later_stale(releases, "2025Q4") == []
    # a release that did not record what it read (built before releases named it) is taken as current
    assert not reads_another({"2025Q1": rel("a", ""), "2025Q2": rel("b", None)}, "2025Q2")
    line = gap_message("2025Q4", ["2025Q2"], ["2025Q3"], "pass --allow-missing-earlier")
    assert "\n" not in line and "2025Q2 has reviews but no release" in line and "2025Q3 is stale" in line
    assert "`veritas backfill --from 2025Q2 --to 2025Q4`" in line and "pass --allow-missing-earlier" in line


def run_cli(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, err.getvalue()


def veritas_backfill(config: str, *args: str) -> tuple[int, str]:
    """``veritas backfill`` in a process of its own, on the config's instance (``<data_dir>/dagster``)."""
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}
    proc = subprocess.run([sys.executable, "-m", "dagster_project.cli", "--config", config, "backfill", "--no-bars",
                           *args], cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=1200)
    return proc.returncode, proc.stdout + proc.stderr


def state(folder: Path) -> dict:
    """Each quarter's LATEST release version, and the runs the instance holds."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    releases = folder / "data" / "data" / "releases"
    latest = {q: (releases / q / "LATEST").read_text() for q in QUARTERS if (releases / q / "LATEST").exists()}
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(folder / "data" / "dagster"))) as instance:
        return {"latest": latest, "runs": len(instance.get_run_records())}


def manifest(folder: Path, quarter: str) -> dict:
    return json.loads((latest_release(folder / "data", quarter) / "manifest.json").read_text())


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    from dagster_project.simulation.panel import PanelConfig, PanelServer
    from dagster_project.simulation.quarter import QuarterConfig, generate
    from dagster_project.simulation.records import load_records
    from dagster_project.simulation.run import write_config
    from tests.ops_support import fast_router_backoff

    folder = tmp_path_factory.mktemp("missing_earlier")
    records = load_records(prefer_shared=False)
    truths = {q: generate(folder / q, QuarterConfig(quarter=q, reviews=REVIEWS, video_share=0.0, label_mix="balanced"),
                          records) for q in QUARTERS}
    claims: dict[str, dict] = {}
    for truth in truths.values():  # a claim several quarters share: the panel knows every quarter's pages of it
        for key, claim in truth["claims"].items():
            urls = claims.get(key, {}).get("review_urls", [])
            claims[key] = {**claim, "review_urls": urls + [u for u in claim["review_urls"] if u not in urls]}
    out: dict = {"folder": folder}
    panel = PanelConfig(latency_median_s=0.0, retry_after_s=0.0, faults={})
    with PanelServer({"claims": claims}, panel) as server, pytest.MonkeyPatch.context() as mp, fast_router_backoff():
        mp.setenv("VERITAS_SIM_KEY", "sk-simulated")
        mp.setenv("DAGSTER_HOME", str(folder / "data" / "dagster"))
        mp.delenv("VERITAS_CONFIG", raising=False)  # restored after: `veritas backfill` sets it for its code location
        config = Path(write_config(folder, folder / QUARTERS[0], server, release_size=RELEASE, parallel_claims=4))
        cfg = yaml.safe_load(config.read_text())
        for q in QUARTERS[1:]:
            cfg["sources"].append({"kind": "datafeed", "path": str(folder / q / "feed.json")})
            cfg["web"]["warc_paths"].append(str(folder / q / "pages.warc.gz"))
        config.write_text(yaml.safe_dump(cfg, sort_keys=False))
        config = str(config)
        out["config"] = config
        out["newest"] = run_cli("--config", config, "run", "--quarter", "2025Q3")
        out["newest_manifest"] = manifest(folder, "2025Q3")
        out["oldest"] = run_cli("--config", config, "run", "--quarter", "2025Q1")
        out["before_refusals"] = state(folder)
        out["run_refused"] = run_cli("--config", config, "run", "--quarter", "2025Q3")
        out["backfill_refused"] = run_cli("--config", config, "backfill", "--from", "2025Q3", "--to", "2025Q3",
                                          "--until", "release", "--no-bars")
        out["asset_refused"] = release_alone(config, "2025Q3")
        out["after_refusals"] = state(folder)
        out["allowed"] = run_cli("--config", config, "run", "--quarter", "2025Q3", "--until", "release",
                                 "--allow-missing-earlier")
        out["allowed_manifest"] = manifest(folder, "2025Q3")
        out["allowed_card"] = (latest_release(folder / "data", "2025Q3") / "README.md").read_text()
        out["allowed_state"] = state(folder)
        out["backfill"] = veritas_backfill(config, "--from", "2025Q2", "--to", "2025Q2", "--until", "release",
                                           "--launch", "here")
        out["final"] = state(folder)
    return out


def release_alone(config: str, quarter: str) -> tuple[bool, str]:
    """The release asset of one quarter launched alone, as the UI or a schedule launches it: (success, why not)."""
    import dagster as dg

    from dagster_project.checks import CHECKS
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.definitions import ALL_ASSETS, build_resources
    from dagster_project.partitions import to_key
    from dagster_project.quarter_run import failure_reason

    loaded = load_config(config)
    result = dg.materialize([*ALL_ASSETS, *CHECKS], selection=["release"], partition_key=to_key(quarter),
                            resources=build_resources(loaded), instance=project_instance(loaded), raise_on_error=False)
    return result.success, "" if result.success else failure_reason(result)


def test_a_single_quarter_on_a_fresh_store_is_built(builds):
    code, err = builds["newest"]
    assert code == 0, err
    assert builds["newest_manifest"]["recurring"]["earlier_quarters"] == []


def test_an_older_quarter_built_later_says_the_later_release_is_stale(builds):
    code, err = builds["oldest"]
    assert code == 0, err
    (notice,) = [line for line in err.splitlines() if line.startswith("veritas run: ")]
    assert "the later releases 2025Q3 were built before this release of 2025Q1 and are stale now" in notice
    assert "`veritas backfill --stale --from 2025Q3 --until release`" in notice


def test_run_and_backfill_refuse_before_anything_runs_naming_the_missing_quarter(builds):
    code, err = builds["run_refused"]
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("veritas run: the release of 2025Q3 reads every earlier release")
    assert "2025Q2 has reviews but no release" in err
    assert "`veritas backfill --from 2025Q2 --to 2025Q3`" in err and "pass --allow-missing-earlier" in err
    code, err = builds["backfill_refused"]
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("veritas: no backfill was created: the release of 2025Q3 reads every earlier release")
    assert "2025Q2 has reviews but no release" in err


def test_the_release_asset_refuses_when_launched_alone(builds):
    ok, reason = builds["asset_refused"]
    assert not ok and reason.startswith("release: ") and "2025Q2 has reviews but no release" in reason, reason
    assert f"launch the run with the tag {ALLOW_TAG}=true" in reason
    before, after = builds["before_refusals"], builds["after_refusals"]
    assert after["latest"] == before["latest"]  # LATEST still the first build's
    assert after["runs"] == before["runs"] + 1  # the asset's own run: the CLI refusals started none


def test_the_override_builds_it_and_says_so(builds):
    code, err = builds["allowed"]
    assert code == 0, err
    assert builds["allowed_state"]["latest"]["2025Q3"] != builds["after_refusals"]["latest"]["2025Q3"]
    recurring = builds["allowed_manifest"]["recurring"]
    assert recurring["built_without"] == ["2025Q2"] and recurring["earlier_quarters"] == ["2025Q1"]
    assert "BUILT WITHOUT the releases of 2025Q2" in builds["allowed_card"]


def test_a_backfill_of_the_missing_quarter_leaves_no_stale_release_latest(builds):
    from assets.release.chain import recorded_releases
    from dagster_project.config import load_config
    from dagster_project.core.instance import project_instance
    from dagster_project.quarter_run import earlier_refusal

    code, out = builds["backfill"]
    assert code == 0, out
    assert "stale now: 2025Q3" in out and "round 1, stale: release 2025Q3" in out, out
    final = manifest(builds["folder"], "2025Q3")
    assert final["recurring"]["earlier_quarters"] == ["2025Q1", "2025Q2"] and "built_without" not in final["recurring"]
    assert builds["final"]["latest"]["2025Q3"] != builds["allowed_state"]["latest"]["2025Q3"]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DAGSTER_HOME", str(builds["folder"] / "data" / "dagster"))
        releases = recorded_releases(project_instance(load_config(builds["config"])))
        assert set(releases) == set(QUARTERS) and not any(reads_another(releases, q) for q in QUARTERS)
        assert earlier_refusal(builds["config"], "2025Q4") == ""
