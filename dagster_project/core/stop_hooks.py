"""What a process must undo when a signal stops it: ``run_stoppable`` ends the process with ``os._exit`` (threads may
still wait on a remote model), which runs no ``finally`` block, so work that holds child processes or scratch
folders registers its clean-up here while it runs (``on_stop``), and the signal path calls ``run_stop_hooks``."""

import itertools
import logging
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

log = logging.getLogger(__name__)
_HOOKS: dict[int, Callable[[], None]] = {}
_LOCK = threading.Lock()
_IDS = itertools.count()


@contextmanager
def on_stop(clean_up: Callable[[], None]) -> Iterator[None]:
    """``clean_up`` runs if the process is stopped by a signal while the block runs."""
    with _LOCK:
        key = next(_IDS)
        _HOOKS[key] = clean_up
    try:
        yield
    finally:
        with _LOCK:
            _HOOKS.pop(key, None)


def run_stop_hooks() -> int:
    """Run every registered clean-up once (newest first); returns how many ran. One that fails is logged and the
    others still run: the process is stopping either way."""
    with _LOCK:
        hooks = [_HOOKS.pop(key) for key in sorted(_HOOKS, reverse=True)]
    for clean_up in hooks:
        try:
            clean_up()
        except Exception as err:  # noqa: BLE001 - a stop must finish whatever one clean-up does
            log.warning(f"a clean-up on stop failed: {err}")
    return len(hooks)
