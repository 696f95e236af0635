"""Issue 33, item 1: nothing published tells which claims were rewritten.

The release order was drawn from a seed the manifest published, starting from the claims sorted by internal id, and
the internal id hashes the review id (public: the review URL and the ClaimReview claim text) with "original" or
"rectified". Anyone could redo the draw and read every claim's variant off its place. The order is now drawn from a
key kept in the maintainer's store, and only a commitment to the seed is published. ``rank_attack`` is that attack,
written with the project's own id and shuffle functions; it is run against everything a release publishes."""

import json
import random
import re
from math import sqrt

from assets.release.numbering import ordered_release
from assets.release.writing import write_release
from assets.rules.bins import bin3
from assets.rules.ids import stable_id
from assets.rules.release_order import (
    KEY_REL,
    order_key,
    release_orders,
    seed_commitment,
    shuffled,
)
from dagster_project.resources.store import StoreResource
from tests.test_release import ORDER_KEY, claim
from tests.test_release_order import REAL_CLAIMS

N, RECTIFIED = 200, 0.4


def published_pool():
    """200 claims from real AVeriTeC texts, 40% of them rectified variants (Intact), the rest originals of every
    label; each keyed, as the pipeline keys them, by its review id and its variant."""
    rng = random.Random(5)
    claims, truth = [], {}
    for i in range(N):
        review_id = stable_id(f"https://factcheck.example/{i}", REAL_CLAIMS[i])
        rectified = rng.random() < RECTIFIED
        variant = "rectified" if rectified else "original"
        score = 0.7778 if rectified else rng.choice([0.7778, -0.7778, -0.7778, 0.0])
        c = claim(f"{i}-x", score, REAL_CLAIMS[i], variant=variant)
        claims.append(c.model_copy(update={"claim_id": stable_id(review_id, variant), "review_id": review_id,
                                           "review_url": f"https://factcheck.example/{i}"}))
        truth[review_id] = rectified
    return claims, truth


def rank_attack(review_ids_in_order: list[str], seed: int) -> dict[str, bool]:
    """Guess each claim's variant from its place: if the order is ``shuffled(claims sorted by id, seed)``, the
    place gives the rank of the claim's id, and of its two possible ids (original, rectified) the one that keeps
    the ids ascending along the ranks is the real one (greedy: the smallest candidate above the previous id)."""
    perm = shuffled(list(range(len(review_ids_in_order))), seed)
    rank = {rid: perm[i] for i, rid in enumerate(review_ids_in_order)}
    guesses, last = {}, ""
    for rid in sorted(review_ids_in_order, key=rank.get):
        options = sorted((stable_id(rid, v), v) for v in ("original", "rectified"))
        above = [o for o in options if o[0] > last] or options[-1:]
        last, variant = above[0]
        guesses[rid] = variant == "rectified"
    return guesses


def accuracy(guesses: dict, truth: dict) -> float:
    return sum(guesses[k] == truth[k] for k in guesses) / len(guesses)


def chance_ceiling(n: int) -> float:
    """The best a guess without information reaches (the majority variant), plus 3.5 binomial standard deviations."""
    return max(RECTIFIED, 1 - RECTIFIED) + 3.5 * sqrt(RECTIFIED * (1 - RECTIFIED) / n)


def test_the_attack_works_on_the_old_scheme_a_published_seed_over_claims_sorted_by_id():
    claims, truth = published_pool()
    seed = 123456789  # what the manifest published
    ordered = shuffled(sorted(claims, key=lambda c: c.claim_id), seed)
    assert accuracy(rank_attack([c.review_id for c in ordered], seed), truth) > 0.95


def test_nothing_a_release_publishes_lets_the_attack_beat_chance(tmp_path):
    claims, truth = published_pool()
    ordered, release_claims, files, order = ordered_release(claims, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    store = StoreResource(root=str(tmp_path / "data"))
    write_release(folder, "2025Q3", release_claims, files, store.media_store(), {"version": "t", "order": order})
    by_url = {c.review_url: c.review_id for c in claims}  # the public ClaimReview records: URL -> review id
    published = json.loads((folder / "claims.json").read_text())["claims"]
    in_order = [by_url[c["review_url"]] for c in published]
    assert "seed" not in order and order["seed_commitment"]
    # every number and hex string anywhere in what is published is tried as the seed
    text = " ".join(p.read_text(errors="ignore") for p in folder.rglob("*") if p.suffix in (".json", ".md"))
    candidates = {int(x) for x in re.findall(r"\b\d{1,40}\b", text)} | {int(x, 16) for x in re.findall(r"\b[0-9a-f]{8,64}\b", text)}
    assert len(candidates) > 50
    best = max(accuracy(rank_attack(in_order, s), truth) for s in sorted(candidates)[:400])
    assert best <= chance_ceiling(N), f"the order tells the variant: {best:.3f}"
    # the holder of the key redraws the same order and can show it is the one committed to
    again = ordered_release(list(reversed(claims)), ORDER_KEY)[3]
    assert again["seed_commitment"] == order["seed_commitment"] and len(order["seed_commitment"]) == 64
    assert release_orders(published, bin3)["claim_ids"]["n"] == N


def test_the_order_key_is_made_once_kept_in_the_store_and_never_published(tmp_path, monkeypatch):
    monkeypatch.delenv("VERITAS_RELEASE_KEY", raising=False)
    store = StoreResource(root=str(tmp_path / "data"))
    key = order_key(store)
    assert len(key) == 32 and order_key(store) == key  # made on the first release, read back after
    assert (tmp_path / "data" / KEY_REL).stat().st_mode & 0o077 == 0  # readable by its owner only
    assert not str(tmp_path / "data" / KEY_REL).startswith(str(tmp_path / "data" / "releases"))
    monkeypatch.setenv("VERITAS_RELEASE_KEY", "ab" * 32)  # a key kept outside the store wins
    assert order_key(store) == bytes.fromhex("ab" * 32)
    assert seed_commitment(1) != seed_commitment(2)


def test_no_other_published_field_tells_a_rewrite_from_a_natural_claim(tmp_path):
    """Date, language, publisher, media, text length: each alone, among the Intact claims of a release made from
    real texts, is at chance; a field that differs (rewrites dated apart) is found, which shows the test can see."""
    from datetime import date

    from assets.selection.shortcut_audit import (
        RECTIFIED_FIELDS,
        audit_markdown,
        release_rows,
        shortcut_audit,
    )

    claims, truth = published_pool()
    ordered, release_claims, _, _ = ordered_release(claims, ORDER_KEY)
    report = shortcut_audit(release_rows(release_claims, [c.variant for c in ordered]), [], seed=3)
    fields = report["rectified_fields"]
    assert set(fields) == set(RECTIFIED_FIELDS)
    assert not [n for n, f in fields.items() if f["above_chance"]], fields
    dated = [c.model_copy(update={"claim_date": date(2021, 1, 1)}) if c.variant == "rectified" else c for c in claims]
    ordered, release_claims, _, _ = ordered_release(dated, ORDER_KEY)
    leaky = shortcut_audit(release_rows(release_claims, [c.variant for c in ordered]), [], seed=3)
    assert leaky["rectified_fields"]["date"]["above_chance"] and "above chance: date" in audit_markdown(leaky)
