"""The text printed in images and video frames, read by an OCR whose models ship inside its package (offline)."""

import threading
from functools import cache

_LOCK = threading.Lock()  # one recognition at a time: the engine holds per-call state and the cores are few
MIN_TEXT_SCORE = 0.5  # recognitions the engine is less sure of are noise (textures read as letters)
# Text detection sees each image at most 960 px on its long side and never enlarged: the engine's default scales
# the SHORT side up to 736 px, which made a 320x240 image cost 3-4x the time, and a verdict stamp is large text.
DETECTION = {"det_limit_type": "max", "det_limit_side_len": 960}


@cache
def ocr_engine():
    """The rapidocr engine, loaded once; a missing package stops the stage with what to install."""
    try:
        from rapidocr_onnxruntime import RapidOCR
    except ImportError as err:
        raise RuntimeError("the media verdict check needs rapidocr-onnxruntime (pinned in requirements.lock): "
                           "run `make install`") from err
    return RapidOCR(**DETECTION)


def read_text(jpeg: bytes) -> str:
    """The lines of text the OCR finds in one image, top to bottom, joined by newlines ('' for none)."""
    engine = ocr_engine()
    with _LOCK:
        result, _ = engine(jpeg, use_cls=False)  # stamps are upright: the angle classifier only costs time
    return "\n".join(line[1] for line in result or [] if float(line[2]) >= MIN_TEXT_SCORE)
