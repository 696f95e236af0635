"""Issue 6 bench: METEOR + Hungarian AVeriTeC scoring of the dev set, memoised scorer vs nltk's plain calls.

    .venv/bin/python bench/evidence_scoring.py [--dev PATH] [--claims N]

Scores the dev set's gold evidence against a shuffled pairing (every claim's QA pairs matched against its
neighbour's) twice in the same process: with the default ``Meteor()`` (Porter stems and WordNet lemma names
memoised) and with ``Meteor(memoize=False)`` (nltk's stemmer and WordNet reader on every call). Prints both
times, the speed-up, and checks that both give the same scores.
"""

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assets.evaluation import evidence_scoring as es

DEFAULT_DEV = ROOT.parent / "shared/data/evaluation/averitec_dev.json"


def shuffled(dev: list[dict]) -> list[dict]:
    n = len(dev)
    return [{**dev[(i + 1) % n], "pred_label": dev[(i + 1) % n]["label"], "pred_questions": dev[i]["questions"]}
            for i in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dev", default=str(DEFAULT_DEV if DEFAULT_DEV.exists() else ROOT / "tests/fixtures/averitec_dev_excerpt.json"))
    ap.add_argument("--claims", type=int, default=0, help="use the first N claims (0: all)")
    args = ap.parse_args()
    dev = json.loads(Path(args.dev).read_text(encoding="utf-8"))
    dev = dev[: args.claims] if args.claims else dev
    items = shuffled(dev)
    wordnet = es.default_wordnet()  # loaded once, outside both timings
    results = {}
    for name, scorer in (("baseline (nltk calls)", es.Meteor(wordnet=wordnet, memoize=False)),
                         ("memoised (default)", es.Meteor(wordnet=wordnet))):
        t0 = time.perf_counter()
        res = es.averitec_score(items, scorer=scorer)
        results[name] = (time.perf_counter() - t0, res)
        print(f"{name:24s} {results[name][0]:7.2f} s  evidence recall {res['evidence_recall']:.4f}  "
              f"question recall {res['question_recall']:.4f}  accuracy {res['accuracy']}")
    (t_base, r_base), (t_fast, r_fast) = results.values()
    same = abs(r_base["evidence_recall"] - r_fast["evidence_recall"]) < 1e-12
    print(f"claims {len(dev)}, WordNet synonyms {'on' if wordnet is not None else 'off'}; "
          f"speed-up {t_base / t_fast:.2f}x; identical scores: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
