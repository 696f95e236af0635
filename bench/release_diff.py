"""What a code change did to a quarter's release: the claims of an earlier run's release, followed through a later
run of the same quarter (same records, same model answers: see bench/rehearsal.py --seed-cache).

    .venv/bin/python bench/release_diff.py EARLIER_DATA_DIR LATER_DATA_DIR QUARTER

A data dir is a config's data_dir (a rehearsal's <out>/main/data). For each claim of the earlier release: kept with
the same 3-bin label, kept with another label (its integrity score before and after, unrounded, from the stage-7
tables), or gone from the later pool, and at which stage; then, of those kept, how many the later release left out
in its selection. The labels compared are the stage tables' scores, so a change is the code's and not rounding's.
"""

import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.rules.bins import bin3  # noqa: E402
from assets.rules.length import MEDIA_REF  # noqa: E402
from dagster_project.resources.store import StoreResource  # noqa: E402

STAGES = ("trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims", "rectified_claims")


def run_view(data_dir: Path, quarter: str) -> dict:
    store = StoreResource(root=str(data_dir / "data"))
    ids = {stage: set(store.read_table(stage, quarter)["review_id"].to_list()) for stage in STAGES}
    pool = {(r["review_id"], r["variant"]): r for r in store.read_table("rectified_claims", quarter).to_dicts()}
    reviews = dict(store.read_table("trusted_reviews", quarter).select("review_url", "review_id").iter_rows())
    release = store.latest_release(quarter)
    claims = json.loads((release / "claims.json").read_text())["claims"]
    return {"ids": ids, "pool": pool, "reviews": reviews, "release": claims, "path": release}


def variant_of(claim: dict, pool: dict, review_id: str) -> str:
    """Which variant of its review a release claim is: the pool row with its text (media references aside, since the
    release renumbers them)."""
    text = " ".join(MEDIA_REF.sub(" ", claim["text"]).split())
    for variant in ("original", "rectified"):
        row = pool.get((review_id, variant))
        if row is not None and " ".join(MEDIA_REF.sub(" ", row["text"]).split()) == text:
            return variant
    raise ValueError(f"no pool row shows the release claim {claim['id']} ({claim['review_url']})")


def main() -> int:
    earlier, later, quarter = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    before, after = run_view(earlier, quarter), run_view(later, quarter)
    later_release = {c["review_url"] for c in after["release"]}
    outcome: Counter = Counter()
    changes: list[str] = []
    for claim in before["release"]:
        review_id = before["reviews"][claim["review_url"]]
        variant = variant_of(claim, before["pool"], review_id)
        old = before["pool"][(review_id, variant)]
        new = after["pool"].get((review_id, variant))
        if new is None:
            gone = next((s for s in STAGES if review_id not in after["ids"][s]), "rectified_claims (variant not made)")
            outcome[f"gone at {gone}"] += 1
            changes.append(f"gone at {gone}: {claim['review_url']} ({variant})")
            continue
        was, now = bin3(old["integrity"]["score"]), bin3(new["integrity"]["score"])
        if was != now:
            outcome[f"label {was} -> {now}"] += 1
            changes.append(f"{was} -> {now}: {claim['review_url']} ({variant}) integrity {old['integrity']['score']:+.4f} "
                           f"({old['integrity']['decisive_property']}) -> {new['integrity']['score']:+.4f} "
                           f"({new['integrity']['decisive_property']})")
        else:
            outcome["same label"] += 1
        if claim["review_url"] not in later_release:
            outcome["kept in the pool, not in the later release"] += 1
    print(f"{len(before['release'])} claims in the earlier release ({before['path']}), followed into {after['path']}:")
    for key, n in sorted(outcome.items()):
        print(f"  {key}: {n}")
    for line in changes[:40]:
        print(f"  - {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
