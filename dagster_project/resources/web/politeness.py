"""Politeness of the web resource's live mode: the per-host state (a concurrency limit and a delay between the
requests to one host, pushed back when the server asks for it) and robots.txt, fetched once per origin through the
same guard and archive as any page, with its Crawl-delay applied to the host. ``PolitenessMixin`` holds these methods
of ``WebResource``.
"""

import asyncio
import urllib.robotparser

from dagster_project.resources.crawl_guard import literal_ip

ROBOTS_AGENT = "veritas-benchmark"


class _HostState:
    """Per-host politeness, created and used on the loop thread only."""

    def __init__(self, concurrency: int, delay_s: float):
        self.slots = asyncio.Semaphore(max(1, concurrency))
        self.lock = asyncio.Lock()
        self.delay_s = delay_s
        self.next_start = 0.0  # loop time before which no request to this host may start
        self.active = 0  # requests in flight (their client must not be closed)

    async def turn(self) -> None:
        """Wait until this host may get its next request, then book the following slot."""
        loop = asyncio.get_running_loop()
        async with self.lock:
            # re-read after each sleep: an exchange that ended meanwhile may have pushed the slot back
            while (wait := self.next_start - loop.time()) > 0:
                await asyncio.sleep(wait)
            self.next_start = loop.time() + self.delay_s

    def answered(self) -> None:
        """The exchange is over, so the server has read the request: the next one starts a full delay later, and
        however late this request left or was read, the server never sees two closer than the delay."""
        self.next_start = max(self.next_start, asyncio.get_running_loop().time() + self.delay_s)

    def push_back(self, seconds: float) -> None:
        """The server asked the whole host to slow down (429/503 with Retry-After)."""
        self.next_start = max(self.next_start, asyncio.get_running_loop().time() + seconds)


class PolitenessMixin:
    """The politeness side of ``WebResource``: per-host state and robots.txt.

    Reads the fields ``per_host_concurrency``, ``per_host_delay_s``, ``robots``, ``max_crawl_delay_s`` and
    ``reuse_archive``, and the private attributes ``_hosts``, ``_robots`` and ``_robots_locks``; asks
    ``_allowlist`` and fetches robots.txt with ``_ahop`` (``TransportMixin``) and ``_start_chain``/``_step``
    (``RedirectMixin``).
    """

    def _host_state(self, origin: str, delay_s: float | None = None) -> _HostState:
        state = self._hosts.get(origin)
        if state is None:
            state = self._hosts[origin] = _HostState(self.per_host_concurrency, self.per_host_delay_s)
        if delay_s is not None:
            state.delay_s = max(state.delay_s, delay_s)
        return state

    def _robots_apply(self, host: str) -> bool:
        if self.robots == "never":
            return False
        if self.robots == "always":
            return True
        allow = self._allowlist()
        ip = literal_ip(host)
        return not (allow.name_allowed(host) or (ip is not None and allow.address_allowed(ip)))

    async def _robots_for(self, origin: str):
        """The origin's parsed robots.txt, fetched once per resource (through the same guard and archive)."""
        if origin in self._robots:
            return self._robots[origin]
        lock = self._robots_locks.setdefault(origin, asyncio.Lock())
        async with lock:
            if origin in self._robots:
                return self._robots[origin]
            parser = urllib.robotparser.RobotFileParser(origin + "/robots.txt")
            current, seen, redirects = self._start_chain(origin + "/robots.txt")
            while True:
                hop = await self._ahop(current, {}, None, 512 * 1024, self.reuse_archive, robots=False)
                target, result = self._step(current, current, hop, seen, redirects, None)
                if target is None:
                    break
                current = target
            if result.status is not None and 400 <= result.status < 500:
                parser.allow_all = True  # RFC 9309: no robots.txt means no restriction
            elif not (result.status is not None and 200 <= result.status < 300 and result.error in (None, "too_large")):
                parser.disallow_all = True  # RFC 9309: unreachable robots.txt means full disallow
            else:  # an oversized file is read up to the cap (RFC 9309 asks for at least 500 KiB)
                parser.parse(result.text().splitlines())
                delay = parser.crawl_delay(ROBOTS_AGENT)
                if delay:
                    self._host_state(origin, min(float(delay), self.max_crawl_delay_s))
            self._robots[origin] = parser
            return parser
