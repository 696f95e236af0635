"""A cache for loaders that threads share: the first call for some arguments runs once while the other threads wait.

functools.cache lets every thread that misses compute the value itself: the 48 claims of a model stage's first
wave each loaded the language identifier at once (48 copies, 54 s on 2 cores, where one load takes 0.9 s). No
library cache locks the computation itself (cachetools' lock guards only the dict), hence these few lines."""

import functools
import threading


def once(fn):
    """``fn`` cached by its (hashable) arguments; a missing value is computed by one thread at a time."""
    values: dict = {}
    lock = threading.Lock()

    @functools.wraps(fn)
    def cached(*args, **kwargs):
        key = (args, tuple(sorted(kwargs.items()))) if kwargs else args
        try:
            return values[key]
        except KeyError:
            pass
        with lock:
            if key not in values:
                values[key] = fn(*args, **kwargs)
            return values[key]

    cached.cache_clear = values.clear
    return cached
