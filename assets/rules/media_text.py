"""The text printed in images and video frames, read by an OCR whose models ship inside its package (offline).

Stage 5 reads the text in a small pool of worker processes (OcrPool: the OCR is CPU-bound and holds the GIL, so
threads would use one core); each worker loads the engine once. TextCache keeps what was read, by the image's bytes
and by its perceptual hash, so that a re-run, or a re-encoded copy of an image read in an earlier quarter, is not read
again."""

import hashlib
import io
import multiprocessing
import os
import sqlite3
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from importlib.metadata import version
from pathlib import Path

from assets.rules.once import once

_LOCK = threading.Lock()  # one recognition at a time: the engine holds per-call state and the cores are few
MIN_TEXT_SCORE = 0.5  # recognitions the engine is less sure of are noise (textures read as letters)
# Text detection sees each image at most 960 px on its long side and never enlarged: the engine's default scales
# the SHORT side up to 736 px, which made a 320x240 image cost 3-4x the time, and a verdict stamp is large text.
DETECTION = {"det_limit_type": "max", "det_limit_side_len": 960}
# One onnxruntime thread per session: its default pool spin-waits, which doubled the CPU per image (540 -> 250 ms) on 2
# cores for no faster answer; the text and scores read are the same (checked on 80 rehearsal images).
THREADS = {"intra_op_num_threads": 1, "inter_op_num_threads": 1}
ENGINE_LOADS = 0  # engines loaded in this process (the pool's workers report theirs: one each)


@once
def ocr_engine():
    """The rapidocr engine, loaded once per process; a missing package stops the stage with what to install."""
    global ENGINE_LOADS
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError as err:
        raise RuntimeError("the media verdict check needs rapidocr-onnxruntime (pinned in requirements.lock): "
                           "run `make install`") from err
    ENGINE_LOADS += 1
    return RapidOCR(**DETECTION, **THREADS)


def read_text(jpeg: bytes) -> str:
    """The lines of text the OCR finds in one image, top to bottom, joined by newlines ('' for none)."""
    engine = ocr_engine()
    with _LOCK:
        result, _ = engine(jpeg, use_cls=False)  # stamps are upright: the angle classifier only costs time
    return "\n".join(line[1] for line in result or [] if float(line[2]) >= MIN_TEXT_SCORE)


def ocr_settings() -> str:
    """What the text read from an image depends on besides its bytes: a change here invalidates the cache."""
    return f"rapidocr-onnxruntime=={version('rapidocr-onnxruntime')} {sorted(DETECTION.items())} use_cls=False " \
           f"min_score={MIN_TEXT_SCORE}"


def _worker_start() -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    ocr_engine()  # once per worker, before its first image


def _worker_loads() -> tuple[int, int]:
    return os.getpid(), ENGINE_LOADS


class OcrPool:
    """read_text in ``workers`` processes (spawned: the stage's process has threads and open connections that a fork
    would copy), each with its own engine loaded once by the pool's initializer. An engine is three onnxruntime
    sessions (detection, angle, recognition; about 50 MB loaded, 150-250 MB while reading), so the workers are few:
    by default one per core. Images wait in the pool's queue as bytes; the stage's threads submit one at a time each,
    so at most ``parallel_claims`` images are queued.

    A daemonic process may not start children (a Celery worker's prefork child runs the stage so): there the pool has
    no worker and reads in this process, with one engine loaded here up front, as before the pool."""

    def __init__(self, workers: int | None = None):
        self._pool = None
        if multiprocessing.current_process().daemon:
            self.workers = 0
            ocr_engine()  # loaded up front all the same: a missing OCR stops the stage here, not claim by claim
            return
        self.workers = workers or max(1, min(2, os.cpu_count() or 1))
        self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_worker_start)
        try:
            self._pool.submit(_worker_loads).result()  # a worker that cannot load the OCR stops the stage here
        except BrokenProcessPool as err:
            self._pool.shutdown(cancel_futures=True)
            raise RuntimeError("the OCR workers could not start: run `python -c 'import rapidocr_onnxruntime'` to see "
                               "why (the media verdict check needs rapidocr-onnxruntime: `make install`)") from err

    def read_text(self, jpeg: bytes) -> str:
        if self._pool is None:
            return read_text(jpeg)
        try:
            return self._pool.submit(read_text, jpeg).result()
        except BrokenProcessPool as err:  # a worker died (killed for memory?): never a medium kept unread
            raise RuntimeError(f"an OCR worker died ({err}); the stage cannot check media without it: see the "
                               "machine's memory and re-run") from err

    def engine_loads(self) -> dict[int, int]:
        """Worker pid -> engines it loaded (for the tests: one each)."""
        if self._pool is None:
            return dict([_worker_loads()])
        futures = [self._pool.submit(_worker_loads) for _ in range(4 * self.workers)]
        return dict(f.result() for f in futures)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)


# A perceptual hash (imagehash's pHash, 64 bits) and the pixel size find a copy of an image read before whatever its
# JPEG encoding. The 64-bit hash alone is blind to small text: a 30 px "FALSE" stamped on a 640x480 photo can leave it
# unchanged. So a copy must also match a finer pHash (256 bits) within FINE_DISTANCE bits. Measured on 29 generated
# photos (tests/test_media_verdicts.photo): re-encoding at JPEG quality 50, 70 and 95 moved the fine hash by at most 4
# bits, a 30 px stamp by 10-30; the 64-bit hash itself moved on 3 of the 87 copies (a miss: the copy is read again).
# Text smaller than that (a few small letters added to a photo) could still be served the other copy's text.
FINE_DISTANCE = 4


def image_hashes(jpeg: bytes) -> tuple[str, str, str]:
    """(64-bit pHash, 256-bit pHash, "WxH") of an image."""
    import imagehash
    from PIL import Image

    with Image.open(io.BytesIO(jpeg)) as im:
        size = f"{im.width}x{im.height}"
        im.draft("L", (256, 256))  # a scaled decode: the hashes shrink the image to 32 and 64 px anyway
        return str(imagehash.phash(im)), str(imagehash.phash(im, hash_size=16)), size


def _fine_distance(a: str, b: str) -> int:
    return bin(int(a, 16) ^ int(b, 16)).count("1")


TEXT_BY_SHA256 = "SELECT text FROM ocr_text WHERE sha256=? AND settings=?"  # an image's text, by its bytes' sha256


class CachedText:
    """What ``TextCache`` holds for an image's sha256, read only: no OCR runs and nothing is written (``veritas plan``
    writes no data dir). None where the cache has not read it, the key is no sha256, or there is no cache."""

    def __init__(self, path: str | Path):
        self._conn = None
        if not Path(path).is_file():
            return
        try:
            self._settings = ocr_settings()
            self._conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, check_same_thread=False)
        except (ImportError, sqlite3.Error):  # the OCR package missing (its version names the cache's settings)
            self._conn = None

    def __call__(self, sha256: str) -> str | None:
        if self._conn is None or len(sha256) != 64 or not all(ch in "0123456789abcdef" for ch in sha256):
            return None
        try:
            row = self._conn.execute(TEXT_BY_SHA256, (sha256, self._settings)).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else row[0]

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()


class TextCache:
    """The text read from each image, kept in SQLite by the OCR's settings and the image's sha256, or else its
    perceptual hashes and size (image_hashes, FINE_DISTANCE): a re-run, a second claim showing the same image, or a
    re-encoded copy of it in a later quarter, reads it without the OCR (about 0.3-0.6 s of CPU per image). ``reader``
    reads what is not cached (an OcrPool's read_text; in this process by default)."""

    def __init__(self, path: str | Path, reader=None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._settings = ocr_settings()
        self._reader = reader or read_text
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("CREATE TABLE IF NOT EXISTS ocr_text (sha256 TEXT NOT NULL, settings TEXT NOT NULL,"
                           " text TEXT NOT NULL, PRIMARY KEY (sha256, settings))")
        self._conn.execute("CREATE TABLE IF NOT EXISTS ocr_phash (phash TEXT NOT NULL, size TEXT NOT NULL,"
                           " settings TEXT NOT NULL, fine TEXT NOT NULL, text TEXT NOT NULL,"
                           " PRIMARY KEY (phash, size, settings, fine))")
        self.hits = self.phash_hits = self.misses = 0

    def _by_phash(self, phash: str, fine: str, size: str) -> str | None:
        with self._lock:
            rows = self._conn.execute("SELECT fine, text FROM ocr_phash WHERE phash=? AND size=? AND settings=?",
                                      (phash, size, self._settings)).fetchall()
        near = sorted((_fine_distance(f, fine), f, text) for f, text in rows)
        return near[0][2] if near and near[0][0] <= FINE_DISTANCE else None

    def read_text(self, jpeg: bytes) -> str:
        key = hashlib.sha256(jpeg).hexdigest()
        with self._lock:
            row = self._conn.execute(TEXT_BY_SHA256, (key, self._settings)).fetchone()
        if row is not None:
            self.hits += 1
            return row[0]
        phash, fine, size = image_hashes(jpeg)
        text = self._by_phash(phash, fine, size)
        if text is not None:
            with self._lock:
                self.hits += 1
                self.phash_hits += 1  # of the hits, those found by the perceptual hash
        else:
            text = self._reader(jpeg)
            with self._lock:
                self.misses += 1
                self._conn.execute("INSERT OR REPLACE INTO ocr_phash (phash, size, settings, fine, text) VALUES "
                                   "(?,?,?,?,?)", (phash, size, self._settings, fine, text))
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO ocr_text (sha256, settings, text) VALUES (?,?,?)",
                               (key, self._settings, text))
        return text

    def close(self) -> None:
        self._conn.close()
