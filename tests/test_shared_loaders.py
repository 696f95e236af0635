"""The loaders the claims of a model stage share (the language identifier, the sentence splitter, the word lists'
patterns, the OCR engine) are made once however many threads ask at the same moment: with functools.cache the 48
claims of a stage's first wave each loaded the language identifier (48 copies, about a minute on 2 cores)."""

import threading
import time

from assets.rules.claim_text import _language_identifier
from assets.rules.length import punkt_tokenizer
from assets.rules.negation import _matcher
from assets.rules.once import once


def at_the_same_moment(fn, n: int = 24) -> list:
    start = threading.Barrier(n)
    out: list = [None] * n

    def one(i: int) -> None:
        start.wait()
        out[i] = fn()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def test_a_value_asked_for_by_many_threads_at_once_is_made_once():
    made: list[str] = []

    @once
    def load(name: str, extra: bool = False) -> object:
        made.append(name)
        time.sleep(0.2)  # long enough for every thread to miss at once
        return object()

    values = at_the_same_moment(lambda: load("en"))
    assert made == ["en"] and all(v is values[0] for v in values)
    assert load("en") is values[0] and load("fr") is not values[0] and made == ["en", "fr"]
    assert load("en", extra=True) is not values[0] and load("en", extra=True) is load("en", extra=True)
    load.cache_clear()
    assert load("en") is not values[0]


def test_the_stages_shared_loaders_hand_every_thread_the_same_object():
    for loader in (_language_identifier, lambda: punkt_tokenizer("english", extra_ends=True),
                   lambda: _matcher("negation", "en")):
        values = at_the_same_moment(loader)
        assert all(v is values[0] for v in values)
