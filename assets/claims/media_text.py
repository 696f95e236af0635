"""The text printed in images and video frames, read by an OCR whose models ship inside its package (offline)."""

import hashlib
import sqlite3
import threading
from functools import cache
from importlib.metadata import version
from pathlib import Path

_LOCK = threading.Lock()  # one recognition at a time: the engine holds per-call state and the cores are few
MIN_TEXT_SCORE = 0.5  # recognitions the engine is less sure of are noise (textures read as letters)
# Text detection sees each image at most 960 px on its long side and never enlarged: the engine's default scales
# the SHORT side up to 736 px, which made a 320x240 image cost 3-4x the time, and a verdict stamp is large text.
DETECTION = {"det_limit_type": "max", "det_limit_side_len": 960}
# One onnxruntime thread per session: its default pool spin-waits, which doubled the CPU per image (540 -> 250 ms) on 2
# cores for no faster answer; the text and scores read are the same (checked on 80 rehearsal images).
THREADS = {"intra_op_num_threads": 1, "inter_op_num_threads": 1}


@cache
def ocr_engine():
    """The rapidocr engine, loaded once; a missing package stops the stage with what to install."""
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError as err:
        raise RuntimeError("the media verdict check needs rapidocr-onnxruntime (pinned in requirements.lock): "
                           "run `make install`") from err
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


class TextCache:
    """The text read from each image, kept in SQLite by the image's sha256 and the OCR's settings: a re-run, or a
    second claim showing the same image, reads it without the OCR (about 0.3-0.6 s of CPU per image)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._settings = ocr_settings()
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        self._conn.execute("CREATE TABLE IF NOT EXISTS ocr_text (sha256 TEXT NOT NULL, settings TEXT NOT NULL,"
                           " text TEXT NOT NULL, PRIMARY KEY (sha256, settings))")
        self.hits = self.misses = 0

    def read_text(self, jpeg: bytes) -> str:
        key = hashlib.sha256(jpeg).hexdigest()
        with self._lock:
            row = self._conn.execute("SELECT text FROM ocr_text WHERE sha256=? AND settings=?",
                                     (key, self._settings)).fetchone()
        if row is not None:
            self.hits += 1
            return row[0]
        text = read_text(jpeg)
        with self._lock:
            self.misses += 1
            self._conn.execute("INSERT OR REPLACE INTO ocr_text (sha256, settings, text) VALUES (?,?,?)",
                               (key, self._settings, text))
        return text

    def close(self) -> None:
        self._conn.close()
