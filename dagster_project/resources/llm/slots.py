"""Admission of a member's calls: ``SlotsMixin``, the part of ``LLMResource`` that keeps each member's rate limiter
and its semaphore of ``max_parallel`` slots, times how long each stage's calls hold those slots, and reports the
slots' busy share per stage."""

import threading
import time
from contextlib import contextmanager

from dagster_project.resources.llm.members import EnsembleMember
from dagster_project.resources.llm.rate_limit import RateLimiter


class SlotsMixin:
    """``LLMResource``'s per-member limits and slot timing (methods only). Private attributes: ``_limiters`` and
    ``_semaphores`` (member name -> its RateLimiter, its Semaphore), ``_held`` ((run, stage, member) -> slot seconds),
    ``_run_id`` and ``_lock`` (through ``_state_lock``); members through ``member()``."""

    def _limiter(self, m: EnsembleMember) -> "RateLimiter":
        with self._state_lock():
            if self._limiters is None:
                self._limiters = {}
            limiter = self._limiters.get(m.name)
            if limiter is None:
                limiter = self._limiters[m.name] = RateLimiter(rpm=m.rpm, tpm=m.tpm)
            return limiter

    def _semaphore(self, m: EnsembleMember) -> threading.Semaphore:
        with self._state_lock():
            if self._semaphores is None:
                self._semaphores = {}
            sem = self._semaphores.get(m.name)
            if sem is None:
                sem = self._semaphores[m.name] = threading.Semaphore(max(1, m.max_parallel))
            return sem

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
