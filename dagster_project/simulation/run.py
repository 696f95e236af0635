"""Running a simulated quarter through the real pipeline, and measuring its release against the planted truth.

Shared by bench/rehearsal.py (full size, panel latency on) and tests/test_rehearsal.py (small, zero latency).
"""

import json
from pathlib import Path

import yaml

from dagster_project.simulation.panel import MEDIA_REF, PanelConfig, PanelServer
from dagster_project.simulation.quarter import BIN3, DECISIVE
from dagster_project.simulation.records import claim_key
from dagster_project.simulation.rewrites import rewrite_texts

PLANTED_SCORE = {"intact": 1.0, "compromised": -1.0, "unknown": 0.0}


def client_timeout(config: PanelConfig) -> float:
    """The LLM client's timeout for a panel: 1.5 times its slowest answer."""
    return 1.5 * config.latency_cap_s


def hedge_after(config: PanelConfig) -> float | None:
    """When the client sends a panel's unanswered request again: at 5 times its median latency, which its lognormal
    latency passes once in about 1,500 answers at sigma 0.5 (the hung requests of its timeout faults wait there, not
    for the whole client timeout). None for a panel without latency (the tests'): nothing to hedge."""
    return 5 * config.latency_median_s if config.latency_median_s > 0 else None


def write_config(folder: Path, quarter_dir: Path, server: PanelServer, *, release_size: int, parallel_claims: int = 1,
                 max_parallel: int = 4, timeout_s: float | None = None, stages: dict | None = None,
                 data_dir: Path | None = None, cache_path: Path | None = None) -> str:
    """A veritas.yaml (in ``folder``) for the simulated quarter: its feed, its WARC replayed, the panel as the
    ensemble; the data dir is ``folder``/data unless given, the LLM cache is in it unless given.

    The client's timeout is, unless given, ``client_timeout``: no answer is cut, and a hung request (a timeout fault)
    keeps its member's slot no longer than that; its claim waits ``hedge_after`` for the request sent again."""
    if timeout_s is None:
        timeout_s = client_timeout(server.panel.config)
    cfg = {
        "data_dir": str(data_dir or folder / "data"),
        "sources": [{"kind": "datafeed", "path": str(quarter_dir / "feed.json")}],
        "web": {"mode": "replay", "warc_paths": [str(quarter_dir / "pages.warc.gz")]},
        "llm": {"members": server.llm_members(max_parallel=max_parallel), "parallel_claims": parallel_claims,
                "timeout_s": timeout_s, **({"cache_path": str(cache_path)} if cache_path else {}),
                **({"hedge_after_s": hedge} if (hedge := hedge_after(server.panel.config)) else {})},
        "store": {},
        "stages": {"release_size": release_size, **(stages or {})},
    }
    path = folder / "veritas.yaml"
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text("# simulated quarter: the model panel is dagster_project/simulation/panel.py on loopback\n"
                    + yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False))
    return str(path)


def latest_release(data_dir: Path, quarter: str) -> Path:
    """The quarter's latest release folder under a config's data dir (the store is its data/ folder)."""
    root = Path(data_dir) / "data" / "releases" / quarter
    return root / Path((root / "LATEST").read_text().strip()).name


def planted(claim: dict, truth: dict, by_url: dict) -> tuple[str, str, bool]:
    """(planted 3-bin label, planted decisive property, is a rectified variant) of one released claim: a variant is
    any of the claim's rewrites, whatever its style."""
    t = by_url[claim["review_url"]]
    text = claim_key(MEDIA_REF.sub("", claim["text"]))
    if text != claim_key(t["claim"]) and text in {claim_key(r) for r in rewrite_texts(t).values()}:
        return "intact", DECISIVE["intact"], True
    return BIN3[t["category"]], t["decisive_property"], False


def bin3_of(score: float) -> str:
    from assets.rules.bins import bin3

    return bin3(score)


def agreement(folder: Path, truth: dict) -> dict:
    """3-bin accuracy, category accuracy (3-bin label and decisive property) and MSE of the released integrity
    scores against the planted truth; plus the release's balance."""
    claims = json.loads((folder / "claims.json").read_text())["claims"]
    by_url = {u: t for t in truth["claims"].values() for u in t["review_urls"]}
    rows = []
    for c in claims:
        label, decisive, rectified = planted(c, truth, by_url)
        score = c["integrity"]["score"]
        rows.append({"planted": label, "decisive": decisive, "rectified": rectified, "got": bin3_of(score),
                     "got_decisive": c["integrity"]["decisive_property"], "score": score,
                     "media": bool(c["media"]), "review_url": c["review_url"]})
    n = len(rows) or 1
    labels = [r["got"] for r in rows]
    urls = [r["review_url"] for r in rows]
    return {
        "claims": len(rows),
        "intact": labels.count("intact"), "compromised": labels.count("compromised"), "unknown": labels.count("unknown"),
        "media_share": round(sum(r["media"] for r in rows) / n, 4),
        "rectified": sum(r["rectified"] for r in rows),
        "both_variants": len(urls) - len(set(urls)),
        "accuracy_3bin": round(sum(r["got"] == r["planted"] for r in rows) / n, 4),
        "accuracy_category": round(sum(r["got"] == r["planted"] and r["got_decisive"] == r["decisive"] for r in rows) / n, 4),
        "mse": round(sum((r["score"] - PLANTED_SCORE[r["planted"]]) ** 2 for r in rows) / n, 4),
        "wrong": [r for r in rows if r["got"] != r["planted"] or r["got_decisive"] != r["decisive"]][:5],
    }
