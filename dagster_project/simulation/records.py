"""The real records a simulated quarter is made from: claim texts, languages, ratings, publishers and article text.

Three real sources (see ../shared/data/SOURCES.md): AVeriTeC dev claims (justifications, questions and answers),
5Pils image claims (captions, provenance, motivation) and Fact Check Tools claims (Arabic, English, Burmese
publishers with their own ratings). A compact excerpt of them is committed in tests/fixtures/rehearsal for the
test suite, which runs without ../shared.
"""

import gzip
import json
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[2]
# ../shared/data beside the checkout (a worktree sits one level deeper); VERITAS_SHARED_DATA overrides
SHARED_DATA = Path(os.environ.get("VERITAS_SHARED_DATA") or next(
    (p / "shared" / "data" for p in (ROOT.parent, ROOT.parent.parent) if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data"))
FIXTURE = ROOT / "tests" / "fixtures" / "rehearsal" / "records.json.gz"

# AVeriTeC labels and 5Pils image types as the textual ratings fact-checkers publish for them
AVERITEC_RATING = {"Refuted": "False", "Supported": "True", "Conflicting Evidence/Cherrypicking": "Misleading",
                   "Not Enough Evidence": "Unproven"}
PILS_RATING = {"out-of-context": "Missing context", "manipulated": "Altered photo", "fake": "False", "true": "True"}
PILS_DOMAIN = {"factly": "factly.in", "pesacheck": "pesacheck.org", "211org": "factcheck.org"}
MAX_PART_CHARS = 1200  # one paragraph of article text


def claim_key(text: str) -> str:
    """How the panel finds a claim in a prompt: whitespace-normalised, case-folded text."""
    return " ".join(text.split()).casefold()


def _host(url: str) -> str:
    url = re.sub(r"^https?://web\.archive\.org/web/[^/]+/", "", url or "")
    return (urlsplit(url).hostname or "").lower().removeprefix("www.")


def _clip(text: str) -> str:
    return " ".join(str(text or "").split())[:MAX_PART_CHARS]


def from_averitec(rows: list[dict]) -> list[dict]:
    out = []
    for i, c in enumerate(rows):
        parts = [_clip(c.get("justification"))]
        for q in c.get("questions") or []:
            answers = " ".join(_clip(a.get("answer")) for a in q.get("answers") or [] if a.get("answer"))
            if answers:
                parts.append(_clip(f"{q.get('question', '').strip()} {answers}"))
        out.append({"source": "averitec", "source_id": f"averitec-dev-{i}", "claim": " ".join(c["claim"].split()),
                    "language": "en", "rating": AVERITEC_RATING.get(c.get("label"), "Unproven"),
                    "domain": _host(c.get("fact_checking_article", "")), "title": "",
                    "parts": [p for p in parts if p], "image_claim": False})
    return out


def from_5pils(rows: list[dict], split: str) -> list[dict]:
    out = []
    for i, p in enumerate(rows):
        parts = [_clip(f"{k.replace('_', ' ').capitalize()}: {p[k]}") for k in ("source", "location", "motivation", "date")
                 if p.get(k) and p[k] != "not enough information"]
        out.append({"source": "5pils", "source_id": f"5pils-{split}-{i}", "claim": " ".join(p["claim"].split()),
                    "language": "en", "rating": PILS_RATING.get(p.get("type_of_image"), "False"),
                    "domain": PILS_DOMAIN.get(p.get("org", ""), ""), "title": "", "parts": parts, "image_claim": True})
    return out


def from_gfc(rows: list[dict]) -> list[dict]:
    out = []
    for i, c in enumerate(rows):
        for j, r in enumerate(c.get("claimReview") or []):
            out.append({"source": "gfc", "source_id": f"gfc-{i}-{j}", "claim": " ".join(str(c.get("text", "")).split()),
                        "language": r.get("languageCode") or "ar", "rating": r.get("textualRating") or "",
                        "domain": _host(r.get("url", "")) or (r.get("publisher") or {}).get("site", ""),
                        "title": r.get("title") or "", "parts": [], "image_claim": False})
    return out


def load_shared(data: Path = SHARED_DATA) -> list[dict]:
    """Every usable record of the three sources, in a fixed order."""
    records = from_averitec(json.loads((data / "evaluation/averitec_dev.json").read_text(encoding="utf-8")))
    for split in ("train", "val", "test"):
        rows = json.loads((data / f"image_text/5pils_{split}.json").read_text(encoding="utf-8"))
        records += from_5pils(rows, split)
    records += from_gfc(json.loads((data / "claimreview/gfc_claims_search_ar_2023-2025.json").read_text(encoding="utf-8")))
    return [r for r in records if r["claim"] and r["rating"]]


def load_records(prefer_shared: bool = True) -> list[dict]:
    """The shared data when it is there (benchmarks), else the committed excerpt (tests, fresh clones)."""
    if prefer_shared and (SHARED_DATA / "evaluation/averitec_dev.json").exists():
        return load_shared()
    with gzip.open(FIXTURE, "rt", encoding="utf-8") as fh:
        return json.load(fh)


def write_fixture(per_source: dict[str, int] | None = None) -> Path:
    """The test suite's excerpt: the first records of each source (run once by hand, output committed)."""
    per_source = per_source or {"averitec": 200, "5pils": 150, "gfc": 90}
    records = load_shared()
    picked = []
    for source, n in per_source.items():
        picked += [r for r in records if r["source"] == source][:n]
    FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    with open(FIXTURE, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
        fh.write(json.dumps(picked, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    return FIXTURE


if __name__ == "__main__":
    print(write_fixture())
