"""The language of a claim whose record names none (py3langid). A module of its own, importing nothing else, so that
a process spawned to detect them starts in a fraction of a second (``assets.ingestion.feed_ranges``)."""

from functools import lru_cache
from typing import Iterable


@lru_cache(maxsize=65536)
def detect_language(text: str) -> str:
    """The language of one claim text ("" for a blank one); texts repeat across sources, hence the cache."""
    import py3langid

    return py3langid.classify(text)[0] if text.strip() else ""


def detect_languages(texts: Iterable[str]) -> dict[str, str]:
    return {text: detect_language(text) for text in texts}
