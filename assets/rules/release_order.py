"""Nothing about a claim's label may be read from its place in a release.

The release numbers its claims and its media in a random order drawn from a secret key that never leaves the
maintainer's store (``order_key``) and the release's content, so that a rebuild with the key gives the same bytes
and nobody without it can redo the draw (``release_seed``, ``shuffled``): an order drawn from public data alone (the
claims sorted by an id that hashes the review URL, with a published seed) gave away which claims were rewritten.
Only a commitment to the seed is published (``seed_commitment``). ``order_problems`` checks a published release: along
the order of claims.json, of the claim ids and of the media ids, Spearman's rho between position and integrity and
the share of neighbours with the same 3-bin label must look like a random order, within ``MAX_Z`` standard
deviations of a shuffle. Plain functions, no Dagster.
"""

import hashlib
import hmac
import os
import random
import secrets

import numpy as np

MAX_Z = 3.5  # "within about 3.5 standard deviations of a shuffle": a random order fails one of 6 statistics ~0.3% of the time
NULL_SHUFFLES = 500  # shuffles that measure the neighbour statistic's spread under a random order
MIN_CLAIMS = 8  # below this no order statistic means anything: the check reports it and passes


KEY_ENV = "VERITAS_RELEASE_KEY"  # the order key as hex, for a maintainer who keeps it outside the store
KEY_REL = "secrets/release_order.key"  # where the store keeps it otherwise (never under releases/, never exported)
KEY_BYTES = 32


class OrderKeyError(RuntimeError):
    """The release order's key is unusable: the message names where it was read and what to do."""


def order_key(store, create: bool = True) -> bytes | None:
    """The secret the release order and the selection are drawn from: $VERITAS_RELEASE_KEY (hex), else the store's
    ``secrets/release_order.key``, made by the first stage that needs it (None when absent and ``create`` is off).
    Keep it: a rebuild without it selects and orders otherwise."""
    if raw := os.environ.get(KEY_ENV, "").strip():
        try:
            key = bytes.fromhex(raw)
        except ValueError:
            raise OrderKeyError(f"${KEY_ENV} is not hex: set it to the {KEY_BYTES * 2} hex digits of the release "
                                "order key, or unset it to use the store's") from None
    else:
        try:
            key = store.get_bytes(KEY_REL)
        except FileNotFoundError:
            if not create:
                return None
            key = _make_key(store)
    if len(key) < 16:
        raise OrderKeyError(f"the release order key ({KEY_ENV} or {store.location}/{KEY_REL}) has {len(key)} bytes, "
                            f"fewer than 16: restore the key the earlier releases were built with")
    return key


def _make_key(store) -> bytes:
    """A new random key in the store; where two releases make one at once, both use the one that landed first."""
    key = secrets.token_bytes(KEY_BYTES)
    if store.is_s3:
        store.put_bytes(KEY_REL, key)
        return store.get_bytes(KEY_REL)
    path = store.base / KEY_REL
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes()
    with os.fdopen(fd, "wb") as fh:
        fh.write(key)
    return key


def keyed(key: bytes, text: str) -> str:
    """HMAC-SHA256 of ``text`` under the order key (hex): an order or a seed nobody without the key can redo."""
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def key_fingerprint(key: bytes) -> str:
    """A short public name of the key (which key a release was drawn with), from which the key cannot be had."""
    return hashlib.sha256(b"veritas release order key\x1f" + key).hexdigest()[:16]


def release_seed(key: bytes, keys: list[str]) -> int:
    """A seed from the secret key and the release's content (its claims' ids and texts, in any order): same key and
    content, same seed; without the key, nothing to compute it from."""
    return int(keyed(key, "\n".join(sorted(keys))), 16)


def seed_commitment(seed: int) -> str:
    """What the manifest publishes of a seed: its hash. The key's holder shows a rebuild is the release by
    recomputing the seed; nobody else can invert the hash of a 256-bit value drawn from a 256-bit key."""
    return hashlib.sha256(f"veritas release order seed {seed}".encode()).hexdigest()


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
    from scipy.stats import (
        spearmanr,  # here: scipy.stats takes a second to import, and only releases use it
    )

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
