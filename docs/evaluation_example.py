"""Regenerates docs/evaluation_example.png and docs/evaluation_confusion_example.png with `veritas evaluate`.

The inputs are SYNTHETIC (seeded random gold scores over eight quarters, and a simulated system whose error
grows after its 2023Q4 cut-off): they illustrate the report's format, they are not a measurement.

    .venv/bin/python docs/evaluation_example.py
"""

import json
import random
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from dagster_project.cli import main

QUARTERS = ["2023Q1", "2023Q2", "2023Q3", "2023Q4", "2024Q1", "2024Q2", "2024Q3", "2024Q4"]
CUTOFF = "2023Q4"
LEVELS = [-1.0, -0.67, -0.33, 0.0, 0.33, 0.67, 1.0]


def clip(x: float) -> float:
    return round(max(-1.0, min(1.0, x)), 2)


def build(folder: Path) -> Path:
    rng = random.Random(6)
    predictions = []
    for qi, quarter in enumerate(QUARTERS):
        claims = []
        noise = 0.45 if qi <= QUARTERS.index(CUTOFF) else 0.75  # the simulated model knows less after its cut-off
        for cid in range(1, 61):
            integrity = rng.choice(LEVELS)
            kind = rng.choice(["text", "image", "image", "video"])
            media = [] if kind == "text" else [{"type": kind, "id": cid, "file_path": f"{kind}s/{cid}",
                                                "authenticity": {"score": 1.0, "justification": ""},
                                                "contextualization": {"score": integrity, "justification": ""}}]
            claims.append({"id": cid, "text": f"synthetic claim {cid}", "date": None, "language": rng.choice(["en", "de", "fr"]),
                           "review_url": "", "media": media, "veracity": {"score": integrity, "justification": ""},
                           "context_coverage": None, "integrity": {"score": integrity, "decisive_property": "veracity"}})
            predictions.append({"claim_id": cid, "quarter": quarter, "integrity": clip(integrity + rng.gauss(0, noise)),
                                "veracity": clip(integrity + rng.gauss(0, noise))})
        release = folder / "releases" / quarter
        release.mkdir(parents=True)
        (release / "meta.json").write_text(json.dumps({"year": int(quarter[:4]), "quarter": int(quarter[5])}))
        (release / "claims.json").write_text(json.dumps({"claims": claims}))
    path = folder / "predictions.json"
    path.write_text(json.dumps({"system": "simulated-closed-book", "predictions": predictions}))
    return path


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        preds = build(tmp)
        code = main(["evaluate", "--predictions", str(preds), "--release", str(tmp / "releases"),
                     "--out", str(tmp / "report"), "--cutoff", CUTOFF])
        shutil.copyfile(tmp / "report" / "mse_by_quarter.png", ROOT / "docs" / "evaluation_example.png")
        shutil.copyfile(tmp / "report" / "confusion_integrity.png", ROOT / "docs" / "evaluation_confusion_example.png")
        shutil.copyfile(tmp / "report" / "evaluation.txt", ROOT / "docs" / "evaluation_example.txt")
    sys.exit(code)
