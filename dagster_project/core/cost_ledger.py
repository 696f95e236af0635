"""Sums over the LLM ledger (SQLite), shared by the llm resource and ``veritas costs``, which reads the ledger
without importing Dagster or litellm."""

import sqlite3
from contextlib import closing
from pathlib import Path

SUMS = ("COUNT(*), COALESCE(SUM(cache_hit),0), COALESCE(SUM(prompt_tokens),0),"
        " COALESCE(SUM(completion_tokens),0), COALESCE(SUM(cost_usd),0),"
        " COALESCE(SUM(error IS NOT NULL),0), COALESCE(SUM(latency_s),0), COALESCE(SUM(attempts),0),"
        " COALESCE(SUM(error LIKE 'transport:%'),0)")
# a call's tokens where no tokenizer is shipped (``veritas plan``, the simulated panel's usage): rough and
# model-independent, since tokenizers are not shipped for every provider
CHARS_PER_TOKEN = 4
IMAGE_TOKENS = 1000  # what one image costs a vision member, roughly (providers price 85-1,600 per image)
# columns added after the first release of the ledger; the llm resource adds them to old files on open
LEDGER_ADDED = {"quarter": "TEXT NOT NULL DEFAULT ''", "call_id": "TEXT", "requested_model": "TEXT"}


def pack(r) -> dict:
    calls, hits = int(r[0]), int(r[1])
    return {"calls": calls, "cache_hits": hits, "model_calls": calls - hits,
            "hit_rate": (hits / calls) if calls else 0.0, "prompt_tokens": int(r[2]), "completion_tokens": int(r[3]),
            "cost_usd": float(r[4]), "errors": int(r[5]), "latency_s": float(r[6]), "answers_received": int(r[7]),
            "transport_errors": int(r[8])}


def ledger_report(conn: sqlite3.Connection, quarter: str | None = None) -> dict:
    """The ledger of one quarter label (or all of it): totals, by model, by stage and by member."""
    clause, args = ("", []) if quarter is None else (" WHERE quarter=?", [quarter])
    total = pack(conn.execute(f"SELECT {SUMS} FROM llm_ledger{clause}", args).fetchone())
    by = {
        group: {r[0]: pack(r[1:]) for r in conn.execute(
            f"SELECT {column}, {SUMS} FROM llm_ledger{clause} GROUP BY {column} ORDER BY {column}", args)}
        for group, column in (("by_model", "model"), ("by_stage", "stage"), ("by_member", "member"))
    }
    quarters = [r[0] for r in conn.execute("SELECT DISTINCT quarter FROM llm_ledger ORDER BY quarter")]
    return {"quarter": quarter, **total, **by, "quarters_in_ledger": quarters}


def read_report(path: Path, quarter: str | None = None) -> dict | None:
    """``ledger_report`` of a ledger file opened read-only; None when the file predates the current columns (the
    llm resource then upgrades it)."""
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as conn:
        columns = {r[1] for r in conn.execute("PRAGMA table_info(llm_ledger)")}
        return ledger_report(conn, quarter) if set(LEDGER_ADDED) <= columns else None
