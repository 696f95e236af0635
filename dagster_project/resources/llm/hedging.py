"""Hedged requests: ``_RequestThreads``, the daemon threads they run on, and ``HedgingMixin``, the part of
``LLMResource`` that sends a request again beside itself once it has gone unanswered for ``hedge_after_s`` and counts
those re-sends."""

import threading
from collections import Counter
from typing import Any

from dagster_project.resources.llm.members import EnsembleMember


class _RequestThreads:
    """The threads hedged requests run on (``LLMResource._send``): daemon threads, so that a request that lost its
    race, whose answer nobody waits for, does not hold up the process's exit until it times out (a thread pool's
    threads are joined at exit: a stage's process lingered 8 s after its run for a hung request)."""

    def __init__(self, size: int):
        import queue

        self._jobs: Any = queue.SimpleQueue()
        self._size = size
        for i in range(size):
            threading.Thread(target=self._work, name=f"llm-hedge-{i}", daemon=True).start()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            future, fn = job
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as err:  # noqa: BLE001 - the caller reads it from the future
                    future.set_exception(err)

    def submit(self, fn):
        from concurrent.futures import Future

        future: Future = Future()
        self._jobs.put((future, fn))
        return future

    def shutdown(self) -> None:
        """Each thread ends once its request (if any) has: the requests still queued run first."""
        for _ in range(self._size):
            self._jobs.put(None)


class HedgingMixin:
    """``LLMResource``'s hedged sending (methods only). Private attributes: ``_hedging`` (the request threads and the
    re-send counts per (run, stage, member)), ``_run_id`` and ``_lock`` (through ``_state_lock``); config:
    ``hedge_after_s``, ``members``."""

    def _send(self, stage: str, m: EnsembleMember, request):
        """``request()`` (one completion through the member's client), hedged after ``hedge_after_s``: when no answer
        has come by then, the same request again beside it; the first answer wins, and when both fail, the first's
        error is raised. Without hedge_after_s, in this thread."""
        if not self.hedge_after_s:
            return request()
        from concurrent.futures import FIRST_COMPLETED, wait

        with self._state_lock():
            if self._hedging is None:
                # room for every member's slots twice over: a request and its re-send
                slots = sum(max(1, x.max_parallel) for x in self.members)
                self._hedging = _RequestThreads(2 * slots + 2), Counter()
            pool, hedged = self._hedging
        first = pool.submit(request)
        done, _ = wait([first], timeout=self.hedge_after_s)
        if done:
            return first.result()
        with self._state_lock():
            hedged[(self._run_id, stage, m.name)] += 1
        sent = [first, pool.submit(request)]
        while sent:
            done, _ = wait(sent, return_when=FIRST_COMPLETED)
            for f in done:
                if f.exception() is None:
                    return f.result()
                sent.remove(f)
        return first.result()  # both failed: the first request's error

    def hedged(self, stage: str) -> dict[str, int]:
        """Per member, the requests of this run's calls for ``stage`` that were sent again (see hedge_after_s)."""
        with self._state_lock():
            counts = self._hedging[1] if self._hedging else {}
            return {name: n for (run, st, name), n in counts.items() if run == self._run_id and st == stage}
