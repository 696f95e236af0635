"""``RateLimiter``: a member's blocking requests-per-minute and tokens-per-minute limits over a sliding window,
enforced before each request."""

import threading
import time
from collections import deque


class RateLimiter:
    """Blocking requests-per-minute and tokens-per-minute limits over a sliding 60 s window."""

    def __init__(self, rpm: int | None = None, tpm: int | None = None, clock=time.monotonic, sleep=time.sleep,
                 window_s: float = 60.0):
        self.rpm, self.tpm, self.window = rpm, tpm, window_s
        self._clock, self._sleep = clock, sleep
        self._starts: deque[float] = deque()
        self._tokens: deque[tuple[float, int]] = deque()
        self._lock = threading.Lock()

    def wait_time(self) -> float:
        """Seconds until one more request fits both limits (0 when it fits now)."""
        now = self._clock()
        while self._starts and self._starts[0] <= now - self.window:
            self._starts.popleft()
        while self._tokens and self._tokens[0][0] <= now - self.window:
            self._tokens.popleft()
        waits = [0.0]
        if self.rpm and len(self._starts) >= self.rpm:
            waits.append(self._starts[len(self._starts) - self.rpm] + self.window - now)
        if self.tpm and self._tokens and sum(n for _, n in self._tokens) >= self.tpm:
            spent, budget = 0, sum(n for _, n in self._tokens) - self.tpm
            for ts, n in self._tokens:  # wait until enough of the oldest usage leaves the window
                spent += n
                if spent > budget:
                    waits.append(ts + self.window - now)
                    break
        return max(waits)

    def acquire(self) -> float:
        """Block until a request may start; returns the seconds waited."""
        waited = 0.0
        if not (self.rpm or self.tpm):
            return waited
        while True:
            with self._lock:
                delay = self.wait_time()
                if delay <= 0:
                    self._starts.append(self._clock())
                    return waited
            self._sleep(delay)
            waited += delay

    def used(self, tokens: int) -> None:
        if self.tpm and tokens:
            with self._lock:
                self._tokens.append((self._clock(), tokens))
