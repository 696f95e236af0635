"""Nothing about a claim's label may be read from its place in a release.

The release numbers its claims and its media in a random order, seeded from the release's content, so that a
rebuild gives the same bytes (``release_seed``, ``shuffled``). ``order_problems`` checks a published release: along
the order of claims.json, of the claim ids and of the media ids, Spearman's rho between position and integrity and
the share of neighbours with the same 3-bin label must look like a random order, within ``MAX_Z`` standard
deviations of a shuffle. Plain functions, no Dagster.
"""

import hashlib
import random

import numpy as np
from scipy.stats import spearmanr

MAX_Z = 3.5  # "within about 3.5 standard deviations of a shuffle": a random order fails one of 6 statistics ~0.3% of the time
NULL_SHUFFLES = 500  # shuffles that measure the neighbour statistic's spread under a random order
MIN_CLAIMS = 8  # below this no order statistic means anything: the check reports it and passes


def release_seed(keys: list[str]) -> int:
    """A seed from the release's content (its claims' ids and texts, in any order): same content, same seed."""
    digest = hashlib.sha256("\n".join(sorted(keys)).encode()).digest()
    return int.from_bytes(digest[:8], "big")


def shuffled(items: list, seed: int) -> list:
    """``items`` in a random order drawn from ``seed`` (a new list)."""
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


def _neighbour_share(labels: np.ndarray) -> float:
    return float(np.mean(labels[1:] == labels[:-1]))


def order_statistics(scores: list[float], labels: list[str], seed: int = 0) -> dict:
    """How far an order of claims (``scores`` and their 3-bin ``labels``, in that order) is from a random one:
    Spearman's rho between position and score and its z (a shuffle's rho has standard deviation 1/sqrt(n-1)), and
    the share of adjacent pairs with the same label against ``NULL_SHUFFLES`` shuffles of the same labels."""
    n = len(scores)
    out: dict = {"n": n}
    if n < MIN_CLAIMS or len(set(labels)) < 2:
        return {**out, "skipped": f"{n} items with {len(set(labels))} label(s): no order to test"}
    rho = spearmanr(np.arange(n), np.asarray(scores, dtype=float)).statistic
    rho = 0.0 if np.isnan(rho) else float(rho)
    codes = np.unique(np.asarray(labels), return_inverse=True)[1]
    rng = np.random.default_rng(seed)
    null = np.array([_neighbour_share(rng.permutation(codes)) for _ in range(NULL_SHUFFLES)])
    share = _neighbour_share(codes)
    counts = np.bincount(codes)
    expected = float((counts * (counts - 1)).sum() / (n * (n - 1)))  # exact mean of a shuffle's share
    spread = max(float(null.std()), 1e-9)
    return {**out, "spearman_rho": round(rho, 4), "rho_z": round(rho * np.sqrt(n - 1), 2),
            "same_label_neighbours": round(share, 4), "same_label_expected": round(expected, 4),
            "neighbours_z": round((share - expected) / spread, 2)}


def release_orders(claims: list[dict], bin3) -> dict:
    """The three orders of a release's claims.json records (VeriTaS format) that could carry the label: the file's
    own order, the claim ids' order and the media ids' order (each medium carries its claim's score)."""
    def stats(rows: list[tuple[float, str]]) -> dict:
        return order_statistics([s for s, _ in rows], [lab for _, lab in rows])

    scored = [(c["integrity"]["score"], bin3(c["integrity"]["score"])) for c in claims]
    by_id = sorted(zip((c["id"] for c in claims), scored))
    media = sorted((m["id"], scored[i]) for i, c in enumerate(claims) for m in c.get("media", []))
    return {"file_order": stats(scored), "claim_ids": stats([s for _, s in by_id]),
            "media_ids": stats([s for _, s in media])}


def order_problems(orders: dict) -> list[str]:
    """The statistics of ``release_orders`` that a random order would not give."""
    problems = []
    for name, s in orders.items():
        for stat, value in (("spearman_rho", "rho_z"), ("same_label_neighbours", "neighbours_z")):
            if "skipped" not in s and abs(s[value]) > MAX_Z:
                problems.append(f"{name}: {stat} {s[stat]} is {s[value]:+.1f} standard deviations from a random "
                                f"order (limit {MAX_Z}): the label can be read from the position")
    return problems
