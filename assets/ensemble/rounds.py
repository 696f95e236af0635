"""The threads of a model stage: a prefetch of every item's answers ahead of the stage's sequential loop, and
rounds of work whose next round is decided while the last one's slowest items still run."""

import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor, as_completed


def prefetch(items: list, fn, workers: int, log=None, stage: str = ""):
    """``fn`` over ``items`` on ``workers`` threads, ahead of the stage's sequential loop; returns a lookup that
    gives each item's result (or raises its exception) in that loop. With one worker, ``fn`` itself (the loop's own
    progress lines then follow the work). With ``log``, a line of progress at most every PREFETCH_PROGRESS_S while
    the threads work."""
    if workers <= 1 or len(items) <= 1:
        return fn
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-stage") as pool:
        futures = {id(item): pool.submit(fn, item) for item in items}
        logged = time.monotonic()
        for done, _ in enumerate(as_completed(futures.values()), 1):  # errors surface per item in the lookup
            if log and time.monotonic() - logged >= PREFETCH_PROGRESS_S and done < len(items):
                log.info(f"{stage}: {done}/{len(items)} worked through on {workers} threads")
                logged = time.monotonic()
    return lambda item: futures[id(item)].result()


PREFETCH_PROGRESS_S = 15.0  # prefetch's progress lines while a model stage's threads work


def overlapped_rounds(first: list, fn, workers: int, decide, log=None, stage: str = "") -> tuple[list[tuple], int]:
    """``fn`` over ``first``, then over each further round ``decide`` asks for, on one pool of ``workers`` threads,
    the results taken in the order the items were given. ``decide(done, pending)`` gets the (item, result) pairs so
    far and the items still unfinished, and returns the next round's items ([]: none). It is asked once a round's
    items have all started (no more than ``workers`` unfinished: the next round then starts while the slowest of the
    last one still run, instead of after them), and again when nothing is unfinished, where [] ends the work. Where
    it is asked, and what it is given, follow from the results in order, not from timing, so the rounds do too.
    Returns the pairs and the rounds started. A result that raises is raised here, the work not started cancelled."""
    pairs: list[tuple] = []
    pending: deque = deque()
    rounds, last, asked = 0, -1, False  # last: the results decide had when last asked; asked: this round's tail
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="llm-stage")

    def start(items: list) -> bool:
        nonlocal rounds
        rounds += bool(items)
        pending.extend((item, pool.submit(fn, item)) for item in items)
        return bool(items)

    try:
        start(first)
        logged = time.monotonic()
        while pending:
            while len(pending) > (0 if asked else workers):
                item, future = pending.popleft()
                pairs.append((item, future.result()))
                if log and time.monotonic() - logged >= PREFETCH_PROGRESS_S and pending:
                    log.info(f"{stage}: {len(pairs)}/{len(pairs) + len(pending)} worked through on {workers} threads")
                    logged = time.monotonic()
            asked = True
            if len(pairs) > last or not pending:  # a tail with new results, or the end
                last = len(pairs)
                asked = not start(decide(pairs, [item for item, _ in pending]))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return pairs, rounds
