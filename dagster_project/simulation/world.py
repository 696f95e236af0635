"""A simulated world of many quarters (VeriTaS's 25, 2020Q1 to 2026Q1, by default): one feed and one WARC per
quarter (dagster_project/simulation/quarter.py), a planted truth over all of them, a systems registry of simulated
verifiers with knowledge cut-offs, and the config that one command runs from the reviews to the leaderboard:
``veritas backfill --from 2020Q1 --to 2026Q1 --until leaderboard``.

    .venv/bin/python -m dagster_project.simulation.world --quarters 2020Q1:2026Q1 --reviews-per-quarter 40 --out DIR

generates the world in DIR, starts the simulated model panel on loopback, writes DIR/veritas.yaml for it, prints the
backfill command and serves until Ctrl-C (``--generate-only``: stop after generating).

What the world takes from real data, and how (measured once from ../shared/data with ``measure_profile`` and
``measure_recurring``; the results are committed, so tests run without ../shared):

- **Reviews per quarter** follow ``world_profile.csv``. The Data Commons ClaimReview feed, whose dates the issue
  asks for, is not available offline (../shared/data/SOURCES.md says so), so the profile is the time profile of
  the dated real fact-check records that are: 5Pils's fact-check publication dates (1,676 records, 2019-2023;
  factly, pesacheck, 211org) and the Fact Check Tools reviews' dates (1,290 review URLs, 2023-2025). Per quarter,
  the source with the most records there gives the weight, its count over that source's mean per covered quarter;
  quarters neither covers with 10 records or more (2024Q1, 2025Q3 to 2026Q1) are flat (weight 1.0) and say so.
  A quarter's reviews are the mean times its weight, the weight clipped to [0.4, 2.0].
- **Recurring claims**: a claim of an earlier quarter is reviewed again, by the same publisher with probability
  ``SAME_PUBLISHER_SHARE`` (else by another publisher active then), at ``RECURRING_SHARE`` of a quarter's reviews.
  The measure: the share of real reviews whose claim text is a near-duplicate (rapidfuzz token_set_ratio >= 90 on
  whitespace-normalised, casefolded text, the release's own measure) of a claim reviewed at least 30 days earlier.
  5Pils: 18 of 1,676 (1.07%), all 18 by the same publisher; Fact Check Tools: 0 of 1,290 (7 at a ratio >= 80, 5 of
  them by the same publisher). Pooled: 18 of 2,966 = 0.61%, 23 of 25 by the same publisher (0.92). The IFCN
  CoronavirusFacts sample reads 48.6% but was drawn by claim cluster, so it is left out. A test can ask for more
  (``--recurring-share``) so that a small world has some.
- **Publishers come and go**: each publisher the quarter generator may credit (quarter.FALLBACK_PUBLISHERS, all
  registered) is active over a span of consecutive quarters drawn from the seed; every quarter keeps at least two
  per language.
- **Claims**: the real records (records.py), each quarter its own slice of them (no claim in two quarters but the
  recurring ones). The real records that fit are ~2,000 (440 in the committed excerpt): a world asking for more
  reviews than that reviews each of a quarter's claims several times (by other publishers, as quarter.py does),
  so a quarter's distinct claims, and with them its release, are bounded by the pool (``World.claims_per_quarter``).

The simulated systems: one closed-book verifier per panel member (``stages.verifier_members``), each with a
knowledge cut-off (``CUTOFFS``); rating from memory (no evidence in the prompt: the closed-book verifier) a claim
first shown after it, the member is less sure and wrong more often (panel.MemberSpec.cutoff), as VeriTaS's models
are on claims newer than their training data. With the article as evidence (stage 5) the cut-off does not matter,
so the releases' labels do not depend on it.
"""

import argparse
import csv
import dataclasses
import json
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from dagster_project.core.quarters import quarter_range, to_label
from dagster_project.simulation.panel import DEFAULT_MEMBERS, PanelConfig, PanelServer
from dagster_project.simulation.quarter import (
    FALLBACK_PUBLISHERS,
    QuarterConfig,
    fits,
    generate,
)
from dagster_project.simulation.records import SHARED_DATA, claim_key, load_records
from dagster_project.simulation.run import write_config

PROFILE = Path(__file__).with_name("world_profile.csv")
RECURRING_SHARE = 0.0061  # measured (see the module docstring): 18 of 2,966 real reviews
SAME_PUBLISHER_SHARE = 0.92  # measured: 23 of 25 recurring reviews by the publisher of the earlier review
WEIGHT_CLIP = (0.4, 2.0)
# the simulated systems' knowledge cut-offs, one per panel member: the longitudinal view has quarters on both sides
CUTOFFS = {"sim-alpha": "2024Q2", "sim-beta": "2023Q2", "sim-gamma": "2022Q2", "sim-delta": "2021Q2"}
FLIP_AFTER, SHIFT_AFTER = 0.12, 0.9  # after its cut-off: chance of the opposite category, of being less sure


# ------------------------------------------------------------------------------ measured once, committed
def _quarter(day: str) -> str | None:
    try:
        return f"{int(day[:4])}Q{(int(day[5:7]) - 1) // 3 + 1}"
    except (ValueError, IndexError):
        return None


def _dated_reviews(data: Path = SHARED_DATA) -> dict[str, list[dict]]:
    """The dated real fact-check reviews at hand: 5Pils (publication date) and Fact Check Tools (review date, one
    per review URL); each {"text", "day", "publisher"}."""
    pils = []
    for split in ("train", "val", "test"):
        for r in json.loads((data / f"image_text/5pils_{split}.json").read_text(encoding="utf-8")):
            if r.get("publication_date"):
                pils.append({"text": claim_key(r["claim"]), "day": r["publication_date"][:10], "publisher": r.get("org", "")})
    gfc, seen = [], set()
    for c in json.loads((data / "claimreview/gfc_claims_search_ar_2023-2025.json").read_text(encoding="utf-8")):
        for r in c.get("claimReview") or []:
            if r.get("reviewDate") and r.get("url") not in seen:
                seen.add(r.get("url"))
                gfc.append({"text": claim_key(c.get("text", "")), "day": r["reviewDate"][:10],
                            "publisher": (r.get("publisher") or {}).get("site", "")})
    return {"5pils": pils, "fact_check_tools": gfc}


def measure_profile(first: str = "2020Q1", last: str = "2026Q1", data: Path = SHARED_DATA) -> list[dict]:
    """The per-quarter profile (see the module docstring); written to world_profile.csv by ``--measure``."""
    counts = {name: Counter(_quarter(r["day"]) for r in rows) for name, rows in _dated_reviews(data).items()}
    quarters = quarter_range(first, last)
    means = {name: sum(c[q] for q in quarters if c[q] >= 10) / max(1, sum(c[q] >= 10 for q in quarters))
             for name, c in counts.items()}
    out = []
    for q in quarters:
        name = max(counts, key=lambda n: counts[n][q])
        if counts[name][q] >= 10:
            out.append({"quarter": q, "weight": round(counts[name][q] / means[name], 4), "source": name,
                        "records": counts[name][q]})
        else:
            out.append({"quarter": q, "weight": 1.0, "source": "none (flat)", "records": 0})
    return out


def measure_recurring(data: Path = SHARED_DATA, similarity: float = 90.0, gap_days: int = 30) -> dict:
    """Per source: reviews, those whose claim is a near-duplicate of one reviewed ``gap_days`` or more earlier, and
    how many of those the same publisher reviewed (see the module docstring)."""
    from datetime import date

    from rapidfuzz import fuzz, process

    out = {}
    for name, rows in _dated_reviews(data).items():
        rows = sorted(rows, key=lambda r: r["day"])
        hits = same = 0
        for i, r in enumerate(rows):
            day = date.fromisoformat(r["day"])
            earlier = [j for j in range(i) if (day - date.fromisoformat(rows[j]["day"])).days >= gap_days]
            best = process.extractOne(r["text"], [rows[j]["text"] for j in earlier], scorer=fuzz.token_set_ratio,
                                      score_cutoff=similarity) if earlier else None
            if best:
                hits += 1
                same += rows[earlier[best[2]]]["publisher"] == r["publisher"]
        out[name] = {"reviews": len(rows), "recurring": hits, "same_publisher": same}
    return out


def load_profile(path: Path = PROFILE) -> dict[str, float]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {row["quarter"]: float(row["weight"]) for row in csv.DictReader(
            line for line in fh if not line.startswith("#"))}


# ------------------------------------------------------------------------------ the world
@dataclass
class WorldConfig:
    first: str = "2020Q1"
    last: str = "2026Q1"
    reviews_per_quarter: int = 1000  # the mean; each quarter's follows the profile
    recurring_share: float = RECURRING_SHARE
    same_publisher_share: float = SAME_PUBLISHER_SHARE
    seed: int = 13
    label_mix: str = "real"  # quarter.QuarterConfig.label_mix; "balanced" gives small quarters Intact claims of their own
    video_share: float = 0.08

    @property
    def quarters(self) -> list[str]:
        return quarter_range(to_label(self.first), to_label(self.last))


def reviews_per_quarter(config: WorldConfig, profile: dict[str, float] | None = None) -> dict[str, int]:
    profile = load_profile() if profile is None else profile
    lo, hi = WEIGHT_CLIP
    return {q: max(1, round(config.reviews_per_quarter * min(hi, max(lo, profile.get(q, 1.0)))))
            for q in config.quarters}


def publisher_spans(quarters: list[str], rng: random.Random) -> dict[str, tuple[int, int]]:
    """Publisher host -> (first, last) quarter index it is active in; at least two active per language and quarter."""
    n = len(quarters)
    spans = {}
    for hosts in FALLBACK_PUBLISHERS.values():
        for host in hosts:
            start = rng.randrange(max(1, n // 2))
            length = rng.randint(max(1, n // 3), n)
            spans[host] = (start, min(n - 1, start + length - 1))
        for i in range(n):  # the languages' first two publishers fill any quarter with fewer than two
            active = [h for h in hosts if spans[h][0] <= i <= spans[h][1]]
            for host in hosts[:2]:
                if len(active) >= 2:
                    break
                if host not in active:
                    spans[host] = (min(spans[host][0], i), max(spans[host][1], i))
                    active.append(host)
    return spans


def active(spans: dict, language: str, i: int) -> list[str]:
    return [h for h in FALLBACK_PUBLISHERS[language] if spans[h][0] <= i <= spans[h][1]]


def plan_world(records: list[dict], config: WorldConfig) -> dict:
    """Which record each review of each quarter is about, and who publishes it: {"quarters": {q: [record with its
    publisher as "domain", "recurring_from": quarter or ""]}, "spans", "claims_per_quarter"}."""
    rng = random.Random(config.seed)
    counts = reviews_per_quarter(config)
    pool, seen = [], set()
    for r in records:
        if fits(r["claim"], r["language"]) and r["language"] in FALLBACK_PUBLISHERS and claim_key(r["claim"]) not in seen:
            seen.add(claim_key(r["claim"]))
            pool.append(r)
    rng.shuffle(pool)
    quarters = config.quarters
    total = sum(counts.values())
    if len(pool) < len(quarters):
        raise ValueError(f"{len(pool)} usable records for {len(quarters)} quarters: each quarter needs one at least")
    # each quarter its own slice of the pool, in proportion to its reviews
    sizes = [max(1, math.floor(len(pool) * counts[q] / total)) for q in quarters]
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    spans = publisher_spans(quarters, rng)
    plan, fresh_of, publisher_of = {}, {}, {}
    for i, q in enumerate(quarters):
        mine = pool[bounds[i]:bounds[i + 1]]
        n = counts[q]
        recurring = sum(rng.random() < config.recurring_share for _ in range(n)) if i else 0
        reviews = []
        for k in range(n - recurring):
            rec = mine[k % len(mine)]
            host = publisher_of.get(claim_key(rec["claim"]))
            options = active(spans, rec["language"], i)
            if host is None or host not in options or k >= len(mine):  # a second review: another publisher
                host = options[rng.randrange(len(options))]
            publisher_of.setdefault(claim_key(rec["claim"]), host)
            reviews.append({**rec, "domain": host, "recurring_from": ""})
        fresh_of[q] = mine[:min(len(mine), n - recurring)]
        for _ in range(recurring):  # a claim of an earlier quarter, debunked again
            earlier = quarters[rng.randrange(i)]
            if not fresh_of[earlier]:
                continue
            rec = fresh_of[earlier][rng.randrange(len(fresh_of[earlier]))]
            host, options = publisher_of[claim_key(rec["claim"])], active(spans, rec["language"], i)
            if host not in options or rng.random() >= config.same_publisher_share:
                others = [h for h in options if h != host] or options
                host = others[rng.randrange(len(others))]
            reviews.append({**rec, "domain": host, "recurring_from": earlier})
        rng.shuffle(reviews)
        plan[q] = reviews
    return {"quarters": plan, "spans": {h: [quarters[a], quarters[b]] for h, (a, b) in spans.items()},
            "claims_per_quarter": {q: len({claim_key(r["claim"]) for r in plan[q]}) for q in quarters}}


def build_world(out: Path, config: WorldConfig, records: list[dict] | None = None) -> dict:
    """Generate every quarter into out/<quarter>/ and the world's files (world.json, truth.json, systems/)."""
    out = Path(out)
    records = load_records() if records is None else records
    plan = plan_world(records, config)
    claims: dict[str, dict] = {}
    summary = {"config": dataclasses.asdict(config), "spans": plan["spans"], "quarters": {}}
    for i, (q, picked) in enumerate(plan["quarters"].items()):
        quarter = QuarterConfig(quarter=q, reviews=len(picked), seed=config.seed * 1000 + i, label_mix=config.label_mix,
                                video_share=config.video_share)
        truth = generate(out / q, quarter, records, picked=picked)
        for key, claim in truth["claims"].items():  # the panel's truth: a recurring claim keeps its first quarter's
            if key in claims:  # (its category and rewrites), and the panel knows every quarter's review pages of it
                urls = claims[key]["review_urls"]
                claims[key]["review_urls"] = urls + [u for u in claim["review_urls"] if u not in urls]
            else:
                claims[key] = {**claim, "quarter": q}
        summary["quarters"][q] = {"reviews": len(picked), "claims": plan["claims_per_quarter"][q],
                                  "recurring_reviews": sum(bool(r["recurring_from"]) for r in picked),
                                  "publishers": sorted({r["domain"] for r in picked}), "counts": truth["counts"]}
    (out / "truth.json").write_text(json.dumps({"simulated": True, "claims": claims}, ensure_ascii=False), encoding="utf-8")
    (out / "world.json").write_text(json.dumps(summary, indent=1, ensure_ascii=False), encoding="utf-8")
    write_systems(out / "systems")
    return {"claims": claims, **summary}


def write_systems(folder: Path) -> Path:
    """One closed-book verifier system per panel member, with its knowledge cut-off (the leaderboard's registry)."""
    folder.mkdir(parents=True, exist_ok=True)
    for member, cutoff in CUTOFFS.items():
        (folder / f"{member}-closed-book.yaml").write_text(
            "# simulated: a panel member (dagster_project/simulation/panel.py) rating from memory\n" + yaml.safe_dump({
                "kind": "verifier", "member": member, "mode": "closed_book", "knowledge_cutoff": cutoff,
                "description": f"simulated {member}: less sure and wrong more often on claims after {cutoff}"},
                sort_keys=False))
    return folder


def panel_config(**overrides) -> PanelConfig:
    """The default panel with each member's knowledge cut-off (CUTOFFS)."""
    members = tuple(dataclasses.replace(m, cutoff=CUTOFFS.get(m.name, ""), flip_after=FLIP_AFTER,
                                        shift_after=SHIFT_AFTER) for m in DEFAULT_MEMBERS)
    return PanelConfig(members=members, **overrides)


def world_truth(out: Path) -> dict:
    return json.loads((Path(out) / "truth.json").read_text(encoding="utf-8"))


def write_world_config(out: Path, server: PanelServer, *, release_size: int, parallel_claims: int = 4,
                       max_parallel: int = 4, cache_path: Path | None = None, stages: dict | None = None) -> str:
    """out/veritas.yaml: every quarter's feed and WARC, the panel as the ensemble, the simulated systems."""
    out = Path(out)
    world = json.loads((out / "world.json").read_text(encoding="utf-8"))
    quarters = list(world["quarters"])
    path = Path(write_config(out, out / quarters[0], server, release_size=release_size, parallel_claims=parallel_claims,
                             max_parallel=max_parallel, cache_path=cache_path, stages={
                                 "allow_short_release": True, "systems_dir": str(out / "systems"),
                                 "verifier_members": list(CUTOFFS), "bootstrap_resamples": 200, **(stages or {})}))
    cfg = yaml.safe_load(path.read_text())
    cfg["sources"] = [{"kind": "datafeed", "path": str(out / q / "feed.json")} for q in quarters]
    cfg["web"]["warc_paths"] = [str(out / q / "pages.warc.gz") for q in quarters]
    path.write_text(f"# simulated world of {len(quarters)} quarters (dagster_project/simulation/world.py); the model "
                    "panel is dagster_project/simulation/panel.py on loopback\n"
                    + yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False))
    return str(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quarters", default="2020Q1:2026Q1", help="first:last (default 2020Q1:2026Q1)")
    ap.add_argument("--reviews-per-quarter", type=int, default=1000, help="the mean; the profile shapes each quarter")
    ap.add_argument("--release-size", type=int, default=0, help="stages.release_size (default: a tenth of the mean)")
    ap.add_argument("--recurring-share", type=float, default=RECURRING_SHARE)
    ap.add_argument("--latency", type=float, default=0.5, help="the panel's median latency (s)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--out", required=True)
    ap.add_argument("--generate-only", action="store_true", help="write the world and stop (no panel, no config)")
    ap.add_argument("--measure", action="store_true", help="measure the profile and the recurring share from "
                                                           "../shared/data and write world_profile.csv")
    args = ap.parse_args(argv)
    if args.measure:
        rows = measure_profile()
        with open(PROFILE, "w", newline="", encoding="utf-8") as fh:
            fh.write("# Reviews per quarter, relative to the mean (see dagster_project/simulation/world.py). Measured "
                     "from ../shared/data: 5pils = UKPLab/5pils dataset/*.json @ 02252dc9 (CC-BY-SA-4.0), fact "
                     "check publication dates; fact_check_tools = Ghassan-Dib/Arabic-Fact-Checking "
                     "data/claim_reviews.json @ 7f1cd079, review dates. Counts only, no record text.\n")
            writer = csv.DictWriter(fh, fieldnames=["quarter", "weight", "source", "records"], lineterminator="\n")
            writer.writeheader()
            writer.writerows(rows)
        print(PROFILE)
        print(json.dumps(measure_recurring(), indent=1))
        return 0
    first, _, last = args.quarters.partition(":")
    config = WorldConfig(first=first, last=last or first, reviews_per_quarter=args.reviews_per_quarter,
                         recurring_share=args.recurring_share, seed=args.seed)
    out = Path(args.out)
    t0 = time.monotonic()
    world = build_world(out, config)
    print(f"[world] {len(world['quarters'])} quarters, {sum(q['reviews'] for q in world['quarters'].values())} reviews, "
          f"{sum(q['recurring_reviews'] for q in world['quarters'].values())} recurring, in {time.monotonic() - t0:.0f}s:"
          f" {out}", flush=True)
    if args.generate_only:
        return 0
    with PanelServer(world_truth(out), panel_config(latency_median_s=args.latency)) as server:
        config_path = write_world_config(out, server, release_size=args.release_size or max(
            1, args.reviews_per_quarter // 10))
        print(f"[world] config: {config_path}\n[world] the panel serves on loopback until Ctrl-C; in another shell:\n"
              f"  VERITAS_SIM_KEY=sk-simulated DAGSTER_HOME={out / 'data' / 'dagster'} .venv/bin/veritas --config "
              f"{config_path} backfill --from {world['config']['first']} --to {world['config']['last']} "
              "--until leaderboard --launch processes", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            return 0


if __name__ == "__main__":
    sys.exit(main())
