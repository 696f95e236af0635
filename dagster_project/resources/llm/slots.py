"""Admission of a member's calls: ``SlotsMixin``, the part of ``LLMResource`` that keeps each member's rate limiter
and its semaphore of ``max_parallel`` slots, times how long each stage's calls hold those slots, and reports the
slots' busy share per stage."""

import threading
import time
from contextlib import contextmanager

from dagster_project.resources.llm.members import EnsembleMember
from dagster_project.resources.llm.rate_limit import RateLimiter
from dagster_project.resources.llm.shared_limits import SHARED_PREFIX, SharedRateLimiter, SharedSlots, connect


def _key(m: EnsembleMember) -> str:
    return f"{SHARED_PREFIX}:member:{m.name}"


class SlotsMixin:
    """``LLMResource``'s per-member limits and slot timing (methods only). Private attributes: ``_limiters`` and
    ``_semaphores`` (member name -> its RateLimiter, its Semaphore), ``_held`` ((run, stage, member) -> slot seconds),
    ``_run_id`` and ``_lock`` (through ``_state_lock``); members through ``member()``."""

    def _limiter(self, m: EnsembleMember) -> "RateLimiter | SharedRateLimiter":
        """The member's rpm/tpm limiter: this process's, or the one every process shares (``shared_limits_url``)."""
        with self._state_lock():
            if self._limiters is None:
                self._limiters = {}
            limiter = self._limiters.get(m.name)
            if limiter is None:
                shared = self._shared_client()
                limiter = self._limiters[m.name] = (
                    SharedRateLimiter(shared, _key(m), m.rpm, m.tpm) if shared is not None
                    else RateLimiter(rpm=m.rpm, tpm=m.tpm))
            return limiter

    def _semaphore(self, m: EnsembleMember):
        """A context manager that holds one of the member's ``max_parallel`` slots (shared across processes with
        ``shared_limits_url``: leased for longer than a call with all its retries may take)."""
        with self._state_lock():
            if self._semaphores is None:
                self._semaphores = {}
            sem = self._semaphores.get(m.name)
            if sem is None:
                shared = self._shared_client()
                lease = 2 * self.timeout_s * (self.num_retries + 1) + 60
                sem = self._semaphores[m.name] = (
                    SharedSlots(shared, _key(m), m.max_parallel, lease) if shared is not None
                    else threading.Semaphore(max(1, m.max_parallel)))
            return sem.held() if isinstance(sem, SharedSlots) else sem

    def _shared_client(self):
        """The shared-limits server's client (made once, checked at once), or None without ``shared_limits_url``."""
        if not self.shared_limits_url:
            return None
        if self._shared is None:
            self._shared = connect(self.shared_limits_url)
        return self._shared

    @contextmanager
    def _holding(self, stage: str, m: EnsembleMember):
        """Time a slot of ``m`` held for ``stage`` (see slot_busy)."""
        began = time.monotonic()
        try:
            yield
        finally:
            ended = time.monotonic()
            with self._state_lock():
                if self._held is None:
                    self._held = {}
                held = self._held.setdefault((self._run_id, stage, m.name), [0.0, began, ended])
                held[0] += ended - began
                held[1], held[2] = min(held[1], began), max(held[2], ended)

    def slot_busy(self, stage: str) -> dict[str, float]:
        """Per member, the share of its max_parallel slots that this run's calls for ``stage`` held (in this process),
        from the stage's first call to its last. A claim asks each question of every member at once, so the member
        near 1.0 paces the stage: the others wait for it (more max_parallel there, where the provider allows it)."""
        with self._state_lock():
            held = {name: list(v) for (run, st, name), v in (self._held or {}).items()
                    if run == self._run_id and st == stage}
        if not held:
            return {}
        span = max(v[2] for v in held.values()) - min(v[1] for v in held.values())
        if span <= 0:
            return {}
        return {name: round(v[0] / (span * max(1, self.member(name).max_parallel)), 3) for name, v in held.items()}
