"""Stable ids, without importing Dagster: every stage and stage 1's range processes use them."""

import hashlib


def stable_id(*parts: str, length: int = 16) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:length]
