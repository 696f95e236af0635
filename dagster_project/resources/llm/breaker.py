"""The circuit breaker: a member whose endpoint is dead (nothing listens, or the embedded server process ended) stops
the stage instead of dropping one claim after another. Holds the TCP probe of an endpoint and ``BreakerMixin``, the
part of ``LLMResource`` that counts consecutive dead-endpoint failures, opens the breaker, refuses calls once the
process is stopping, and checks a stage before it writes its table."""

import socket

from dagster_project.resources.llm.errors import (
    ModelUnavailable,
    RunStopped,
    stop_requested,
)
from dagster_project.resources.llm.members import EnsembleMember


def _refused(api_base: str) -> str:
    """'' when a TCP connection to the endpoint opens, else why not (connection refused, no route...)."""
    import httpx

    url = httpx.URL(api_base)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.host, port), timeout=3):
            return ""
    except OSError as err:
        return f"{type(err).__name__}: {err.strerror or err}"


class BreakerMixin:
    """``LLMResource``'s circuit breaker (methods only). Private attributes: ``_unreachable`` (member -> consecutive
    calls that found its endpoint dead), ``_dead`` (member -> why its breaker opened), ``_server`` (the embedded server)
    and ``_lock`` (through ``_state_lock``); config: ``breaker_failures``; the ledger through ``ledger_summary`` and
    ``_db``."""

    # ---- circuit breaker: a dead endpoint stops the stage, it is not a per-claim drop -----------------
    def _endpoint(self, m: EnsembleMember) -> str:
        if m.is_embedded:
            return self._server.api_base if self._server is not None and self._server.port else "the embedded server"
        return m.api_base or f"{m.model.split('/')[0]}'s default endpoint"

    def _open_breaker(self, m: EnsembleMember, cause: str) -> ModelUnavailable:
        message = (f"ensemble member {m.name!r} (model {m.model}, endpoint {self._endpoint(m)}) is unreachable: "
                   f"{cause}")
        with self._state_lock():
            if self._dead is None:
                self._dead = {}
            self._dead.setdefault(m.name, message)
        return ModelUnavailable(message)

    def _check_open(self) -> None:
        """Raise before any work once the process is stopping or a member's breaker has opened."""
        reason = stop_requested()
        if reason:
            raise RunStopped(f"no more model calls: {reason}")
        dead = self._dead
        if dead:
            raise ModelUnavailable(next(iter(dead.values())))

    def _dead_cause(self, m: EnsembleMember) -> tuple[str, bool]:
        """After a failed call: why the member's endpoint is dead ('' when it is alive, so the failure is per-call),
        and whether that is certain at once (the embedded process ended) rather than after a few calls."""
        if m.is_embedded:
            server = self._server
            if server is not None and not server.running:
                return str(server.died("during the run")), True
            return "", False
        if m.api_base:
            refused = _refused(m.api_base)
            return (f"{refused} (nothing listens there)" if refused else ""), False
        return "", False

    def _note_call(self, m: EnsembleMember, transport_error: Exception | None) -> None:
        """Count consecutive calls that found the member's endpoint dead; raise ModelUnavailable when the breaker opens."""
        with self._state_lock():
            if self._unreachable is None:
                self._unreachable = {}
        if transport_error is None:
            self._unreachable[m.name] = 0
            return
        self._check_open()  # stopping on a signal kills the server: that is not the member's fault
        cause, certain = self._dead_cause(m)
        if not cause:
            return  # the endpoint accepts connections: a rate limit, 5xx or timeout stays this call's matter
        with self._state_lock():
            n = self._unreachable[m.name] = self._unreachable.get(m.name, 0) + 1
        if certain or n >= self.breaker_failures:
            raise self._open_breaker(m, f"{cause}; {n} call(s) in a row failed, last: {str(transport_error)[:300]}")

    def check_stage(self, stage: str, run_id: str) -> None:
        """Before a model stage writes its table: raise when the run is stopping, a member's endpoint died, or none
        of the stage's calls in this run got an answer (its output would be fallbacks and drops only)."""
        self._check_open()
        summary = self.ledger_summary(stage=stage, run_id=run_id)
        if summary["calls"] and summary["transport_errors"] == summary["calls"]:
            with self._db() as conn:
                last = conn.execute("SELECT member, model, error FROM llm_ledger WHERE stage=? AND run_id=?"
                                    " ORDER BY id DESC LIMIT 1", (stage, run_id)).fetchone()
            raise ModelUnavailable(f"{stage}: none of its {summary['calls']} model calls got an answer; last: member "
                                   f"{last[0]!r} (model {last[1]}): {last[2]}")
