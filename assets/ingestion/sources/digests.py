"""The sha256 of a source's content, found without parsing it (``source_digest``, for the snapshot's
fingerprint), and ``prefetch_digests``, which begins the digests of local feed files on threads while a command
starts up.
"""

import hashlib
import json
import os
import stat
import threading
from concurrent.futures import Future
from typing import Any, Iterable

from assets.ingestion.sources.datafeed_url import FeedRows
from assets.ingestion.sources.feed_files import FeedFileError, open_regular


def _json_default(value: Any) -> Any:
    if hasattr(value, "__dataclass_fields__"):
        return {f: getattr(value, f) for f in value.__dataclass_fields__}
    return repr(value)


def source_digest(kind: str, payload: Any) -> str:
    """The sha256 of a source's content, found without parsing it: a local feed's bytes (begun ahead where
    ``prefetch_digests`` did), a fetched feed's body, or the canonical JSON of an answer or of the pages' markup."""
    if isinstance(payload, FeedRows):
        return payload.sha256
    if isinstance(payload, (str, os.PathLike)):
        state = _file_state(payload)
        ahead = _AHEAD.pop(state, None)
        digest = ahead.result() if ahead is not None else None
        if digest is None:
            digest = _file_digest(payload)
            if _file_state(payload) != state:
                raise _changed(payload, "was hashed")
        _TAKEN[os.fspath(payload)] = (state, digest)
        return digest
    digest = hashlib.sha256()
    digest.update(json.dumps(payload, sort_keys=True, ensure_ascii=True, default=_json_default).encode())
    return digest.hexdigest()


_AHEAD: dict[tuple, Future] = {}  # file state -> its sha256 under way (prefetch_digests)
_TAKEN: dict[str, tuple[tuple, str]] = {}  # a local feed's path -> the file state its digest was taken on, the digest


def _changed(path: str | os.PathLike, when: str) -> FeedFileError:
    return FeedFileError(f"{path}: changed while it {when}: nothing of this read is kept; run again once the file "
                         "stays the same (write a new feed beside it and rename it into place)")


def check_unchanged(payloads: Iterable[tuple[str, str, Any]]) -> None:
    """After a parse: each local feed file is still the one its digest was taken on (same state, same sha256), so
    a snapshot labelled with that digest holds what the digest names. Raises ``FeedFileError`` naming the file."""
    for _, _, payload in payloads:
        taken = _TAKEN.get(os.fspath(payload)) if isinstance(payload, (str, os.PathLike)) else None
        if taken is not None and (_file_state(payload) != taken[0] or _file_digest(payload) != taken[1]):
            raise _changed(payload, "was read")


def _file_state(path: str | os.PathLike) -> tuple:
    """What says a file is unchanged between two looks in one process: where it is, its size and time, its inode."""
    st = os.stat(path)
    return os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino


def _file_digest(path: str | os.PathLike) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as fh:  # a FIFO or /dev/zero is refused, never read forever
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()


def prefetch_digests(paths: Iterable[str]) -> None:
    """Begin the sha256 of local feed files on threads of their own, for ``source_digest`` to take up. hashlib lets go
    of the GIL, so a command hashes a 400 MB feed (0.35 s) on the second core while it imports Dagster. A digest is
    taken up only for the file state it began from and ended on (else the file is read again)."""

    def hashed(path: str, state: tuple, done: Future) -> None:
        try:
            digest = _file_digest(path)
            done.set_result(digest if _file_state(path) == state else None)
        except Exception:  # noqa: BLE001 - never leave the future unset: source_digest reads the file itself
            done.set_result(None)

    for path in paths:
        try:
            state = _file_state(path)
        except OSError:
            continue  # the stage names what is missing
        if not stat.S_ISREG(os.stat(path).st_mode):
            continue  # the stage refuses it (feed_files.open_regular)
        if state not in _AHEAD:
            _AHEAD[state] = Future()
            threading.Thread(target=hashed, args=(path, state, _AHEAD[state]), daemon=True, name="digest").start()
