"""The SQLite file behind the resource and its answer cache: the schema (cache, ledger and raw-output tables, with the
columns added since), and ``CacheMixin``, the part of ``LLMResource`` that opens and lends connections to that file,
computes cache keys, and reads and writes cached answers."""

import hashlib
import json
import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path

from dagster_project.core.cost_ledger import LEDGER_ADDED as _LEDGER_ADDED
from dagster_project.resources.llm.members import EnsembleMember
from dagster_project.resources.llm.messages import canonical_json

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS llm_cache (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    member TEXT NOT NULL,
    template_id TEXT NOT NULL,
    template_hash TEXT NOT NULL,
    raw TEXT NOT NULL,
    reasoning TEXT,
    parsed_json TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    created_ts REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS llm_ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    run_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    member TEXT NOT NULL,
    model TEXT NOT NULL,
    template_id TEXT NOT NULL,
    cache_key TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_usd REAL NOT NULL,
    latency_s REAL NOT NULL,
    cache_hit INTEGER NOT NULL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS llm_ledger_stage ON llm_ledger(stage);
CREATE INDEX IF NOT EXISTS llm_ledger_run ON llm_ledger(run_id);
CREATE INDEX IF NOT EXISTS llm_ledger_key ON llm_ledger(cache_key);
CREATE TABLE IF NOT EXISTS llm_outputs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    call_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    ts REAL NOT NULL,
    raw TEXT NOT NULL,
    reasoning TEXT,
    refusal TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS llm_outputs_call ON llm_outputs(call_id);
"""
_CACHE_INSERT = (
    "INSERT OR REPLACE INTO llm_cache (key, model, member, template_id, template_hash, raw, reasoning, parsed_json,"
    " prompt_tokens, completion_tokens, cost_usd, created_ts, error) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
)
_CACHE_ADDED = {"error": "TEXT"}  # a model's settled failure (refusal, invalid answer after the re-ask)


class CacheMixin:
    """``LLMResource``'s database connections and answer cache (methods only). Private attributes: ``_conns`` (free
    and opened connections), ``_db_ready`` (schema created) and ``_lock`` (through ``_state_lock``); config:
    ``cache_path``, ``retry_failed``."""

    # ---- storage ---------------------------------------------------------------------------
    @contextmanager
    def _db(self):
        """A connection for this block, taken from the free ones (or opened) and given back after: a thread that ends
        leaves none behind, and connections stay open because closing the last one checkpoints the WAL (slow)."""
        with self._state_lock():
            if self._conns is None:
                self._conns = [], []  # free, all opened
            free, opened = self._conns
            conn = free.pop() if free else None
            if conn is None:  # under the lock: the first connection switches to WAL and creates the schema
                conn = self._connect()
                opened.append(conn)
        try:
            yield conn
        finally:
            with self._state_lock():
                if self._conns is not None and self._conns[1] is opened:
                    free.append(conn)

    def _close_db(self) -> None:
        conns, self._conns = self._conns, None
        for conn in conns[1] if conns else []:
            conn.close()

    def _connect(self) -> sqlite3.Connection:
        path = Path(self.cache_path)
        if not self._db_ready:
            path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout=30000")
        conn.execute("PRAGMA synchronous=NORMAL")  # WAL stays consistent; a power cut may lose the last few rows
        if not self._db_ready:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA_SQL)
            for table, added in (("llm_ledger", _LEDGER_ADDED), ("llm_cache", _CACHE_ADDED)):
                have = {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}
                for column, decl in added.items():
                    if column not in have:
                        try:
                            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
                        except sqlite3.OperationalError:  # another process added it first
                            pass
            conn.execute("CREATE INDEX IF NOT EXISTS llm_ledger_quarter ON llm_ledger(quarter)")
            self._db_ready = True
        return conn

    @staticmethod
    def cache_key(m: EnsembleMember, messages: list[dict], schema: dict, template_id: str, template_hash: str,
                  media_hashes: list[str]) -> str:
        payload = {
            "member": m.name,  # two members on one model name may be different deployments: never share answers
            "model": m.model,
            "temperature": m.temperature,
            "seed": m.seed,
            "template_id": template_id,
            "template_hash": template_hash,
            "messages": messages,
            "media": sorted(media_hashes),
            "schema": schema,
        }
        return hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()

    def _cache_get(self, key: str) -> tuple[str, dict | None, str | None, str] | None:
        """(raw, parsed, error, model that answered) of a settled call; a cached failure counts only while
        retry_failed is off."""
        with self._db() as conn:
            row = conn.execute("SELECT raw, parsed_json, error, model FROM llm_cache WHERE key=?", (key,)).fetchone()
        if row is None or (row[2] and self.retry_failed):
            return None
        return row[0], json.loads(row[1]), row[2], row[3]

    @staticmethod
    def _cache_row(key: str, m: EnsembleMember, template_id: str, template_hash: str, raw: str,
                   reasoning: str | None, parsed: dict | None, pt: int, ct: int, cost: float,
                   error: str | None = None) -> tuple:
        return (key, m.model, m.name, template_id, template_hash, raw, reasoning, canonical_json(parsed),
                pt, ct, cost, time.time(), error)

    def _cache_put(self, *args, **kwargs) -> None:
        with self._db() as conn:
            conn.execute(_CACHE_INSERT, self._cache_row(*args, **kwargs))
