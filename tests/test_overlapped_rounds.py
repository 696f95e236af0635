"""assets.ensemble.overlapped_rounds: stage 7's rounds start while the last round's slowest work still runs, and the
rounds do not depend on timing."""

import random
import threading
import time

import pytest

from assets.ensemble.rounds import overlapped_rounds


def run(seed: int, slow: dict[int, float] | None = None, workers: int = 4):
    """Three rounds over the items 0..: 10 first, then 6 and 3 more while fewer than 15 results are even; decide
    records what it was given each time."""
    rng = random.Random(seed)
    delays = {i: rng.uniform(0, 0.01) for i in range(40)} | (slow or {})
    asked, times, nxt = [], {}, iter(range(10, 40))

    def fn(item: int) -> int:
        started = time.monotonic()
        time.sleep(delays[item])
        times[item] = (started, time.monotonic())
        return item * 2

    def decide(done, pending):
        asked.append(([r for _, r in done], list(pending)))
        even = sum(r % 4 == 0 for _, r in done)  # results of even items
        size = 6 if len(asked) == 1 else 3 if even < 15 and len(done) + len(pending) < 19 else 0
        return [next(nxt) for _ in range(size)]

    pairs, rounds = overlapped_rounds(list(range(10)), fn, workers, decide)
    return pairs, rounds, asked, times


def test_the_rounds_follow_the_results_in_order_not_their_timing():
    first = run(1)
    assert [item for item, _ in first[0]] == list(range(19)) and all(r == 2 * i for i, r in first[0])
    assert first[1] == 3
    # asked at each round's tail (10 - 4 results in, 4 running), then at the end (nothing running)
    assert first[2][0] == ([0, 2, 4, 6, 8, 10], [6, 7, 8, 9])
    assert first[2][-1][1] == []
    for seed in (2, 3, 4):
        again = run(seed)
        assert again[:3] == first[:3]


def test_the_next_round_starts_while_the_slowest_of_the_last_one_runs():
    pairs, rounds, asked, times = run(5, slow={9: 0.5})
    assert rounds == 3
    # item 9 (round 1's slowest) was still running when round 2's first item (10) started, and finished after it
    assert times[10][0] < times[9][1] and times[10][1] < times[9][1]
    assert asked[0][1] == [6, 7, 8, 9]


def test_one_worker_works_through_in_order():
    pairs, rounds, asked, _ = run(6, workers=1)
    assert [item for item, _ in pairs] == list(range(19)) and rounds == 3


def test_a_result_that_raises_stops_the_work_and_cancels_what_has_not_started():
    calls, lock = [], threading.Lock()

    def fn(item: int) -> int:
        with lock:
            calls.append(item)
        if item == 2:
            raise RuntimeError("stop the stage")
        time.sleep(0.02)
        return item

    with pytest.raises(RuntimeError, match="stop the stage"):
        overlapped_rounds(list(range(200)), fn, 2, lambda done, pending: [])
    assert len(calls) < 200


def test_nothing_to_do_asks_nothing():
    assert overlapped_rounds([], lambda item: item, 4, lambda done, pending: pytest.fail("asked")) == ([], 0)
