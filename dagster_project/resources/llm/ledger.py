"""The resource's use of the cost ledger: the quarter label its rows carry, and ``LedgerMixin``, the part of
``LLMResource`` that records each call (ledger row, raw answers, cache entry in one transaction), reads the ledger
back (raw outputs, summaries, ``veritas costs`` reports, the quarter's spend) and enforces ``llm.budget_usd``. The
ledger's sums and report live in ``dagster_project/core/cost_ledger.py``."""

import json
import time

from dagster_project.core.cost_ledger import SUMS as _SUMS
from dagster_project.core.cost_ledger import ledger_report
from dagster_project.core.cost_ledger import pack as _pack
from dagster_project.resources.llm.answers import LLMAnswer
from dagster_project.resources.llm.cache import _CACHE_INSERT
from dagster_project.resources.llm.errors import BudgetExceeded
from dagster_project.resources.llm.shared_limits import SHARED_PREFIX, SharedSpend


def _quarter_label(value: str) -> str:
    """``2025-10`` or ``2025Q4`` as ``2025Q4``; anything else (no partition) as ''."""
    if not value:
        return ""
    from dagster_project.partitions import to_label

    try:
        return to_label(value)
    except ValueError:
        return ""


class LedgerMixin:
    """``LLMResource``'s ledger reads and writes (methods only). Private attributes: ``_run_id`` and ``_quarter`` (the
    labels of its rows); config: ``budget_usd``; connections through ``_db`` (``CacheMixin``)."""

    def _ledger_add(self, *, stage: str, template_id: str, key: str, attempts: int, ans: LLMAnswer,
                    call_id: str | None = None, outputs: list[tuple] = (), requested_model: str = "",
                    cache_row: tuple | None = None) -> None:
        """One ledger row per call, every raw answer it got, and its cache entry, in one transaction."""
        with self._db() as conn, conn:
            conn.execute("BEGIN")
            if cache_row is not None:
                conn.execute(_CACHE_INSERT, cache_row)
            conn.execute(
                "INSERT INTO llm_ledger (ts, run_id, stage, member, model, template_id, cache_key, attempts,"
                " prompt_tokens, completion_tokens, cost_usd, latency_s, cache_hit, error, quarter, call_id,"
                " requested_model) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (time.time(), self._run_id, stage, ans.member, ans.model, template_id, key, attempts,
                 ans.prompt_tokens, ans.completion_tokens, ans.cost_usd, ans.latency_s, int(ans.cache_hit), ans.error,
                 self._quarter, call_id, requested_model or ans.model),
            )
            conn.executemany(
                "INSERT INTO llm_outputs (call_id, attempt, ts, raw, reasoning, refusal, error) VALUES (?,?,?,?,?,?,?)",
                [(call_id, *row) for row in outputs],
            )
        shared = self._shared_client() if ans.cost_usd and not ans.cache_hit else None
        if shared is not None:  # what budget_usd holds every process to
            SharedSpend(shared, SHARED_PREFIX).add(self._quarter, ans.cost_usd)

    def raw_outputs(self, stage: str, run_id: str) -> list[dict]:
        """Every call of one stage in one run with its raw answer(s) and reasoning; cache hits give the cached ones."""
        with self._db() as conn:
            calls = conn.execute(
                # a cache hit shows the answers of the call that filled the cache
                "SELECT l.id, l.member, l.model, l.template_id, l.cache_key, l.cache_hit, l.attempts, l.error,"
                " CASE WHEN l.cache_hit = 0 THEN l.call_id ELSE (SELECT o.call_id FROM llm_ledger o"
                "  WHERE o.cache_key = l.cache_key AND o.cache_hit = 0 AND o.call_id IS NOT NULL"
                "  ORDER BY o.id DESC LIMIT 1) END, c.raw, c.reasoning"
                " FROM llm_ledger l LEFT JOIN llm_cache c ON c.key = l.cache_key"
                " WHERE l.stage=? AND l.run_id=? ORDER BY l.id", (stage, run_id),
            ).fetchall()
            attempts: dict[str, list] = {}
            ids = [c[8] for c in calls if c[8]]
            for chunk in range(0, len(ids), 500):
                part = ids[chunk:chunk + 500]
                rows = conn.execute(
                    f"SELECT call_id, attempt, raw, reasoning, refusal, error FROM llm_outputs WHERE call_id IN"
                    f" ({','.join('?' * len(part))}) ORDER BY call_id, attempt", part,
                ).fetchall()
                for r in rows:
                    attempts.setdefault(r[0], []).append(
                        {"attempt": r[1], "raw": r[2], "reasoning": r[3], "refusal": r[4], "error": r[5]})
        out = []
        for (_, member, model, template_id, key, hit, n, error, call_id, cached_raw, cached_reasoning) in calls:
            tried = attempts.get(call_id or "", [])
            last = tried[-1] if tried else {}
            out.append({
                "member": member, "model": model, "template_id": template_id, "cache_key": key,
                "cache_hit": bool(hit), "attempts": int(n), "error": error or "",
                "raw": cached_raw if hit else last.get("raw", ""),
                "reasoning": (cached_reasoning if hit else last.get("reasoning")) or "",
                "attempts_json": json.dumps(tried, ensure_ascii=False),
            })
        return out

    def ledger_summary(self, stage: str | None = None, run_id: str | None = None) -> dict:
        """Totals over the ledger, optionally for one stage and/or run, plus a per-member breakdown."""
        where, args = [], []
        if stage is not None:
            where.append("stage=?"); args.append(stage)
        if run_id is not None:
            where.append("run_id=?"); args.append(run_id)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        with self._db() as conn:
            total = _pack(conn.execute(f"SELECT {_SUMS} FROM llm_ledger{clause}", args).fetchone())
            rows = conn.execute(f"SELECT member, {_SUMS} FROM llm_ledger{clause} GROUP BY member", args).fetchall()
        total["by_member"] = {r[0]: _pack(r[1:]) for r in rows}
        return total

    def ledger_report(self, quarter: str | None = None) -> dict:
        """The ledger of one quarter (or all of it): totals, by model and by stage; for ``veritas costs``."""
        with self._db() as conn:
            return ledger_report(conn, _quarter_label(quarter) if quarter else None)

    def quarter_spend(self) -> float:
        """What the ledger says this resource's quarter has cost so far, every stage and run together."""
        with self._db() as conn:
            return float(conn.execute("SELECT COALESCE(SUM(cost_usd),0) FROM llm_ledger WHERE quarter=?",
                                      (self._quarter,)).fetchone()[0])

    def _check_budget(self) -> None:
        if self.budget_usd is None:
            return
        spent = self.quarter_spend()
        shared = self._shared_client()
        if shared is not None:  # every process's spend, this machine's ledger or not
            spent = max(spent, SharedSpend(shared, SHARED_PREFIX).total(self._quarter))
        if spent >= self.budget_usd:
            raise BudgetExceeded(
                f"LLM budget reached: quarter {self._quarter or '(none)'} has spent ${spent:.4f} of llm.budget_usd="
                f"${self.budget_usd:.4f}; raise llm.budget_usd in the config and run again (answers so far are cached)")
