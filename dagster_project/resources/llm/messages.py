"""The messages sent to the models and the text they send back: image content parts, stripping images for members
without vision, the canonical JSON used for cache keys and stored answers, and the lenient-only-about-fences JSON
parse of an answer."""

import base64
import json
import re
from typing import Any


def image_part(jpeg_bytes: bytes) -> dict:
    """A chat content part carrying a JPEG as a data URL (only vision members receive these)."""
    b64 = base64.b64encode(jpeg_bytes).decode("ascii")
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}


def strip_images(messages: list[dict]) -> list[dict]:
    """Drop image parts, keep the text; text-only part lists collapse to a plain string every provider accepts."""
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"]
            m = {**m, "content": "\n".join(texts)}
        out.append(m)
    return out


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def parse_json_text(raw: str) -> Any:
    """Parse a JSON answer, tolerating only a surrounding markdown code fence and raw newlines or tabs inside
    strings (small models emit them; the value is unchanged). Nothing else is repaired."""
    text = raw.strip()
    m = _FENCE.match(text)
    if m:
        text = m.group(1).strip()
    return json.loads(text, strict=False)
