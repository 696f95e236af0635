"""Stage 1's read of a large local DataFeed on every core: the file is cut into byte ranges at element starts, and
each range is parsed and cleaned in a process of its own, while the stage's process waits. The result is the one a
single reader gives, frame for frame and reject for reject.

Where a range starts is a guess: a ``}, {`` near the cut after which an object with an ``item`` decodes. The reader
of the range before checks it: it stops where it finds an element starting at exactly that offset. If it does not
(the guess fell inside an element, or in a string), it reads on to the next cut, and the range that started at the
bad guess is not used. So a bad guess costs time, never a row. Each range numbers its elements and records from 0;
their numbers (``_seq``, the element index in ``sources``, the index a quarantined element names) are moved by what
the ranges before it read.

The range processes are spawned (the stage's process has threads and open connections that a fork would copy) and
write their frames to Arrow files in a scratch folder, so that the stage's process holds only the cleaned frames,
not the garbage of parsing 400,000 records. It maps the files instead of copying them (their pages were just
written: a copy cost 0.2-0.5 s), and removes the folder while they are mapped: the pages stay until the frames go.
The languages that no record names are detected in one more process, whose model is gone before the frames are
loaded here. A machine with one core, a feed under ``2 * RANGE_MIN_BYTES``, and a process that may not start
children (a Celery worker's) read the feed in the stage's process, as before.

Written here, not taken from a library: the JSON streaming libraries (ijson, the standard decoder) read from the
start of a document, and none resumes inside an array at a byte offset.
"""

import json
import logging
import multiprocessing
import os
import re
import shutil
import tempfile
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator

import polars as pl

from assets.ingestion.cleaning import BATCH, collect_frames, reject_record
from assets.ingestion.languages import detect_language, detect_languages
from assets.ingestion.sources import FeedRange, stream_datafeed
from assets.ingestion.sources.feed_files import rangeable
from assets.ingestion.sources.feed_text import _DECODER, _WS
from dagster_project.core.stop_hooks import on_stop

log = logging.getLogger(__name__)

RANGE_MIN_BYTES = 48 << 20  # a range smaller than this does not pay for its process (about 0.5 s to start one)
_WINDOW = 1 << 20  # bytes looked at after each cut for an element start
_PROBE = 1 << 16  # bytes decoded to try one candidate start (an element is a few KB)
_CANDIDATES = 64  # candidate starts tried per cut
_GAP = re.compile(rb"\}[ \t\n\r]*,[ \t\n\r]*\{")
_SOURCE = r"^(?P<pre>.*#)(?P<element>\d+)(?P<item>\.\d+)$"  # feed:<origin>#<element>.<item>


def range_count(path: str | os.PathLike, workers: int | None = None) -> int:
    """How many ranges to read a feed file in: one per core, each at least ``RANGE_MIN_BYTES``."""
    cores = workers or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    return max(1, min(cores, os.path.getsize(path) // RANGE_MIN_BYTES))


def _element_start(window: bytes) -> int | None:
    """The offset in ``window`` of the first ``{`` after a ``}, `` that opens an object with an ``item`` member
    followed by ``,`` or ``]``: likely a ``dataFeedElement`` entry."""
    for tried, gap in enumerate(_GAP.finditer(window)):
        if tried >= _CANDIDATES:
            return None
        at = gap.end() - 1
        text = window[at:at + _PROBE].decode("utf-8", "surrogateescape")
        try:
            value, end = _DECODER.raw_decode(text)
        except (ValueError, RecursionError):
            continue
        after = _WS.match(text, end).end()
        if isinstance(value, dict) and "item" in value and text[after:after + 1] in (",", "]"):
            return at
    return None


def element_starts(path: str | os.PathLike, ranges: int) -> list[int]:
    """File offsets, ascending, where an element seems to start, one after each of the ``ranges - 1`` even cuts
    where one is found (unchecked: ``stream_datafeed`` checks them as it reads)."""
    size = os.path.getsize(path)
    starts: list[int] = []
    with open(path, "rb") as fh:
        for k in range(1, ranges):
            cut = size * k // ranges
            fh.seek(cut)
            at = _element_start(fh.read(_WINDOW))
            if at is not None and (not starts or cut + at > starts[-1]):
                starts.append(cut + at)
    return starts


def read_range(path: str, origin: str, start: int | None, stops: list[int], folder: str, part: int,
               batch: int = BATCH) -> dict:
    """One range's cleaned frames and rejects, written to Arrow files in ``folder`` (in a range process)."""
    outcome, files, rows, missing = FeedRange(), [], 0, set()

    def write(frame: pl.DataFrame) -> None:
        nonlocal rows
        name = Path(folder) / f"{part:03d}-{len(files):06d}.arrow"
        frame.write_ipc(name)
        files.append(str(name))
        rows += frame.height
        missing.update(frame.filter(pl.col("language") == "")["claim_text"].to_list())

    _, rejects = collect_frames([("rows", origin, stream_datafeed(path, origin, start, stops, outcome))], batch, write)
    name = Path(folder) / f"{part:03d}-rejects.arrow"
    rejects.write_ipc(name)
    return {"files": files, "rejects": str(name), "records": rows + rejects.height, "elements": outcome.elements,
            "stopped_at": outcome.stopped_at, "missing": missing}


def _renumbered(frame: pl.DataFrame, seq: int, elements: int) -> pl.DataFrame:
    """A range's frame with the records and elements of the ranges before it counted in."""
    if not elements:
        return frame.with_columns(pl.col("_seq") + seq)
    source = pl.col("sources").list.first().str.extract_groups(_SOURCE)
    moved = pl.concat_str(source.struct.field("pre"),
                          (source.struct.field("element").cast(pl.Int64) + elements).cast(pl.Utf8),
                          source.struct.field("item"))
    return frame.with_columns(pl.col("_seq") + seq, pl.concat_list(moved).alias("sources"))


def _renumbered_rejects(rejects: pl.DataFrame, seq: int, elements: int) -> pl.DataFrame:
    rejects = rejects.with_columns(pl.col("_seq") + seq)
    if not elements or not rejects["_ref"].any():
        return rejects
    records = []
    for reason, record, ref in rejects.select("reason", "record", "_ref").iter_rows():
        if ref:
            raw = json.loads(record.decode("utf-8", "surrogatepass"))
            for key in ("element", "elements_read"):
                if key in raw:
                    raw[key] += elements
            record = reject_record(reason, raw)
        records.append(record)
    return rejects.with_columns(record=pl.Series(records, dtype=pl.Binary))


class _Here:
    """An executor that runs each call at once, in this process (``read_ranges(processes=False)``)."""

    def submit(self, fn, *args) -> Future:
        done: Future = Future()
        done.set_result(fn(*args))
        return done

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


def _executor(processes: bool, workers: int) -> "ProcessPoolExecutor | _Here":
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) if processes else _Here()


def _stop(executor: "ProcessPoolExecutor | _Here") -> None:
    """Stop an executor's processes now, their work unfinished (a stop or a failure: nothing of it is used)."""
    processes = list((getattr(executor, "_processes", None) or {}).values())  # Python 3.14 has terminate_workers()
    executor.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()


@contextmanager
def _pool(processes: bool, workers: int) -> Iterator["ProcessPoolExecutor | _Here"]:
    """An executor whose processes end with the block: waited for when it ends well, stopped at once when it raises
    (an interrupt, a dead range) or when a signal stops the process (``core.stop_hooks``)."""
    executor = _executor(processes, workers)
    with on_stop(lambda: _stop(executor)):
        try:
            yield executor
        except BaseException:
            _stop(executor)
            raise
        executor.shutdown()


def _results(futures: list[Future], path) -> list:
    try:
        return [future.result() for future in futures]
    except BrokenProcessPool as err:
        raise RuntimeError(f"a process reading {path} died ({err}): see the machine's memory, and materialize "
                           "review_snapshot again") from err


def read_ranges(path: str | os.PathLike, origin: str, starts: list[int], seq: int = 0, batch: int = BATCH,
                processes: bool = True) -> tuple[list[pl.DataFrame], pl.DataFrame, int, list[int], dict[str, str]]:
    """A feed file read in the ranges that ``starts`` (ascending file offsets) begin, each in a spawned process of
    its own (``processes``; else one after another here): (frames, rejects, records read, the ranges used, the
    detected language of each claim text that came without one), numbered on from ``seq`` as ``collect_frames``
    numbers them.

    The languages are detected in a process of their own, which loads its model (about 75 MB) while the ranges are
    read and is gone before the frames are held here."""
    with tempfile.TemporaryDirectory(prefix="veritas-feed-ranges-") as folder, \
            on_stop(lambda: shutil.rmtree(folder, ignore_errors=True)):
        with _pool(processes, 1) as detector:
            detector.submit(detect_language, "the model loads while the ranges are read")
            jobs = [(str(path), origin, start, starts[i:], folder, i, batch) for i, start in enumerate([None, *starts])]
            with _pool(processes, len(jobs)) as ranges:
                parts = _results([ranges.submit(read_range, *job) for job in jobs], path)
            used, k = [0], 0
            while parts[k]["stopped_at"] is not None:
                k += 1 + parts[k]["stopped_at"]
                used.append(k)
            texts = sorted(set().union(*(parts[k]["missing"] for k in used)))
            languages = _results([detector.submit(detect_languages, texts)], path)[0]
        frames: list[pl.DataFrame] = []
        rejects: list[pl.DataFrame] = []
        elements = 0
        for k in used:
            part = parts[k]
            frames += [_renumbered(pl.read_ipc(name, memory_map=True), seq, elements) for name in part["files"]]
            rejects.append(_renumbered_rejects(pl.read_ipc(part["rejects"], memory_map=False), seq, elements))
            seq, elements = seq + part["records"], elements + part["elements"]
    return frames, pl.concat(rejects), seq, used, languages


def read_feed_ranges(path: str | os.PathLike, origin: str, seq: int, batch: int = BATCH, workers: int | None = None
                     ) -> tuple[list[pl.DataFrame], pl.DataFrame, int, dict[str, str], dict] | None:
    """A local feed file read in byte ranges on every core (``read_ranges``, less the ranges used, plus how it was
    read: ``read_report``); None where one process reads it (see the module's docstring)."""
    ranges = range_count(path, workers)
    if ranges < 2 or multiprocessing.current_process().daemon or not rangeable(path):
        return None  # a gzip or UTF-16 file has no byte offsets to cut at: one process reads it
    starts = element_starts(path, ranges)
    if not starts:
        return None
    began = time.monotonic()
    frames, rejects, seq, used, languages = read_ranges(path, origin, starts, seq, batch)
    unused = sorted(set(range(len(starts) + 1)) - set(used))
    report = read_report(origin, len(used), time.monotonic() - began, starts=starts, not_element_starts=unused)
    log.info(f"{origin}: read in {len(used)} byte ranges (starts {starts}"
             f"{f'; not element starts, read by the range before: {unused}' if unused else ''}) in "
             f"{report['seconds']:.1f}s")
    return frames, rejects, seq, languages, report


def read_report(origin: str, ranges: int, seconds: float, **more) -> dict:
    """How one source was read, as review_snapshot's metadata shows it: the byte ranges (1: one process read it),
    the seconds it took, and for a feed read in ranges the guessed cuts and those that were no element start."""
    return {"origin": origin, "ranges": ranges, "seconds": round(seconds, 2), **more}


def collect_sources(sources: Iterable[tuple[str, str, Any]], batch: int = BATCH, workers: int | None = None
                    ) -> tuple[list[pl.DataFrame], pl.DataFrame, dict[str, str], list[dict]]:
    """``collect_frames`` of every source, a large local feed file read in byte ranges on every core, the languages
    detected there (claim text -> language) for the claims that came without one, and how each source was read
    (``read_report``)."""
    frames: list[pl.DataFrame] = []
    rejects: list[pl.DataFrame] = []
    languages: dict[str, str] = {}
    reports: list[dict] = []
    seq = 0
    for kind, origin, payload in sources:
        read, began = None, time.monotonic()
        if kind == "datafeed" and isinstance(payload, (str, os.PathLike)) and os.path.isfile(payload):
            read = read_feed_ranges(payload, origin, seq, batch, workers)
        if read is None:
            got, rejected = collect_frames([(kind, origin, payload)], batch, seq=seq)
            read = (got, rejected, seq + sum(f.height for f in got) + rejected.height, {},
                    read_report(origin, 1, time.monotonic() - began))
        frames += read[0]
        rejects.append(read[1])
        seq = read[2]
        languages.update(read[3])
        reports.append(read[4])
    if not rejects:  # no source: no frame, and no reject in the rejects' schema
        frames, rejected = collect_frames([], batch)
        rejects.append(rejected)
    return frames, pl.concat(rejects).drop("_ref"), languages, reports
