"""``veritas agreement --set averitec-dev|5pils``: what the configured ensemble is worth against expert labels.

Stage 6's own rating code rates claims that carry an expert verdict, and the scores are compared with the expert
signal: mean squared error and agreement of the three bins, per property and per member.
- AVeriTeC: Refuted -1, Supported +1, Not Enough Evidence 0 (the sign of integrity); Conflicting Evidence /
  Cherrypicking has no single sign and is left out. The evidence is the annotators' questions and answers and
  their justification (the stand-in for the fact-check article).
- 5Pils: the image's real context as the fact-checkers found it is the evidence; an out-of-context image is -1, a
  true one +1 (the sign of contextualization). Manipulated and fake images are about authenticity: left out.
"""

import argparse
import hashlib
import json
import statistics
import sys
from datetime import date, datetime
from pathlib import Path

from dagster_project.core.config_file import PROJECT_ROOT

STAGE = "agreement"
DEFAULT_PATHS = {  # small excerpts shipped with the tests; --path takes the full files
    "averitec-dev": PROJECT_ROOT / "tests" / "fixtures" / "averitec_dev_excerpt.json",
    "5pils": PROJECT_ROOT / "tests" / "fixtures" / "5pils_test_excerpt.json",
}
AVERITEC_SIGN = {"Refuted": -1.0, "Supported": 1.0, "Not Enough Evidence": 0.0}
FIVEPILS_SIGN = {"out-of-context": -1.0, "true": 1.0}


def _averitec_date(value: str | None) -> date | None:
    try:
        return datetime.strptime(value, "%d-%m-%Y").date() if value else None
    except ValueError:
        return None


def averitec_items(records: list[dict]) -> tuple[list[dict], dict]:
    """(claim, evidence, target) for every record whose label has a sign; the others counted by label."""
    items, skipped = [], {}
    for i, r in enumerate(records):
        if r.get("label") not in AVERITEC_SIGN:
            skipped[r.get("label")] = skipped.get(r.get("label"), 0) + 1
            continue
        qa = [f"Q: {q['question']}\nA: " + " / ".join(a.get("answer", "") for a in q.get("answers", []))
              for q in r.get("questions", [])]
        evidence = "\n".join(qa + [f"Conclusion: {r.get('justification', '')}"])
        items.append({"id": f"averitec-{i}", "text": r["claim"], "claim_date": _averitec_date(r.get("claim_date")),
                      "evidence": evidence, "media": [], "target": AVERITEC_SIGN[r["label"]]})
    return items, skipped


def fivepils_items(records: list[dict]) -> tuple[list[dict], dict]:
    from schemas.records import Medium

    items, skipped = [], {}
    for i, r in enumerate(records):
        kind = r.get("type_of_image")
        if kind not in FIVEPILS_SIGN:
            skipped[kind] = skipped.get(kind, 0) + 1
            continue
        known = {k: r.get(k) for k in ("source", "date", "location", "motivation")}
        facts = "; ".join(f"{k}: {v}" for k, v in known.items() if v and v != "not enough information")
        evidence = f"What the fact-checkers found about the image's real origin: {facts or 'nothing conclusive'}."
        url = r.get("image_URL", "")
        medium = Medium(medium_id=hashlib.sha256(url.encode()).hexdigest(), kind="image", path="", source_url=url)
        items.append({"id": f"5pils-{i}", "text": f"{r['claim']} <image:0>", "claim_date": None, "evidence": evidence,
                      "media": [medium], "target": FIVEPILS_SIGN[kind]})
    return items, skipped


def rate_item(item: dict, llm, prop_set: str) -> dict:
    """Each member's score and the ensemble's per property for one item (None where no valid rating came)."""
    from assets.ensemble.asking import ask
    from assets.ensemble.scoring import (
        aggregate,
        integrity_of,
        rate,
        to_rating,
        verdicts_from,
    )
    from schemas.answers import MediaRatingAnswer
    from schemas.records import NormalizedClaim

    claim = NormalizedClaim(claim_id=item["id"], review_id=item["id"], quarter="", text=item["text"],
                            original_text=item["text"], normalization="original", language="en",
                            claim_date=item["claim_date"], review_url="", media=item["media"])
    members = llm.member_names()
    if prop_set == "contextualization":  # only the media rating: veracity and coverage are not what 5Pils labels
        ratings = []
        for member in members:
            answer = ask(llm, member, "rate_media", MediaRatingAnswer, stage=STAGE, media=claim.media, media_store=None,
                         claim=claim.text, language="en", claim_date="", evidence=item["evidence"],
                         medium_kind="image", medium_index=0)
            if answer.parsed is not None:
                ratings.append(to_rating(member, "contextualization", answer.parsed["contextualization"], 0, answer.raw))
        verdict = aggregate(ratings, "contextualization", 0)
        ensemble = {"contextualization": verdict.score if verdict else None}
        per_member = {m: {"contextualization": next((r.score for r in ratings if r.member == m), None)}
                      for m in members}
        return {"ensemble": ensemble, "members": per_member}
    ratings, _ = rate(claim, item["evidence"], llm, members, None, stage=STAGE)
    verdicts = verdicts_from(claim, ratings)
    decided = integrity_of(verdicts["media_verdicts"], verdicts["veracity"], verdicts["context_coverage"])
    ensemble = {"integrity": decided[0].score if decided else None,
                "veracity": verdicts["veracity"].score if verdicts["veracity"] else None,
                "context_coverage": verdicts["context_coverage"].score if verdicts["context_coverage"] else None}
    per_member = {}
    for m in members:
        mine = {r.property: r.score for r in ratings if r.member == m and r.medium_index == -1}
        own = [mine[p] for p in ("veracity", "context_coverage") if p in mine]
        per_member[m] = {"integrity": min(own) if own else None, "veracity": mine.get("veracity"),
                         "context_coverage": mine.get("context_coverage")}
    return {"ensemble": ensemble, "members": per_member}


def metrics(pairs: list[tuple[float | None, float]]) -> dict:
    """MSE and 3-bin agreement over the pairs that have a score; missing scores are counted, not guessed."""
    from assets.rules.bins import bin3

    scored = [(s, t) for s, t in pairs if s is not None]
    if not scored:
        return {"n": 0, "missing": len(pairs), "mse": None, "agreement3": None}
    return {"n": len(scored), "missing": len(pairs) - len(scored),
            "mse": round(statistics.fmean((s - t) ** 2 for s, t in scored), 6),
            "agreement3": round(sum(bin3(s) == bin3(t) for s, t in scored) / len(scored), 6)}


def baseline(targets: list[float]) -> dict:
    """What always answering the most frequent expert bin scores (a rater must beat it to be worth anything)."""
    from assets.rules.bins import bin3

    if not targets:
        return {}
    common = statistics.mode(targets)
    return {"always": common, **metrics([(common, t) for t in targets]),
            "mse_always_zero": round(statistics.fmean(t * t for t in targets), 6), "label_mix": {
                bin3(v): sum(bin3(t) == bin3(v) for t in targets) for v in sorted(set(targets))}}


def run_agreement(llm, dataset: str, records: list[dict], n: int | None = None) -> dict:
    items, skipped = (averitec_items if dataset == "averitec-dev" else fivepils_items)(records)
    items = items[:n] if n else items
    props = ("contextualization",) if dataset == "5pils" else ("integrity", "veracity", "context_coverage")
    results = [rate_item(item, llm, "contextualization" if dataset == "5pils" else "integrity") for item in items]
    targets = [item["target"] for item in items]
    report = {"set": dataset, "claims": len(items), "left_out": skipped, "members": llm.member_names(),
              "ensemble": {p: metrics([(r["ensemble"][p], t) for r, t in zip(results, targets)]) for p in props},
              "by_member": {m: {p: metrics([(r["members"][m][p], t) for r, t in zip(results, targets)]) for p in props}
                            for m in llm.member_names()},
              "baseline": baseline(targets)}
    embedded = [m.name for m in llm.members if m.is_embedded]
    distinct = len({m.model for m in llm.members})
    notes = []
    if embedded:
        notes.append(f"{', '.join(embedded)} run the embedded SmolLM2-135M: its ratings are noise, so this result only "
                     "shows the plumbing; configure real models (veritas.real.yaml) to learn what an ensemble is worth")
    if distinct < len(llm.members):
        notes.append(f"{len(llm.members)} members but {distinct} distinct model(s): their agreement is not independent")
    if dataset == "5pils" and any(m.vision for m in llm.members):
        notes.append("5Pils images are not shipped (only their URLs): vision members rated from the text alone")
    report["notes"] = notes
    return report


def format_report(report: dict) -> str:
    def fmt(v):
        return "-" if v is None else f"{v:.3f}"

    left = ", ".join(f"{k}={v}" for k, v in report["left_out"].items()) or "none"
    lines = [f"Agreement with expert labels: {report['set']}, {report['claims']} claims (left out: {left})", "",
             f"{'rater':<22}{'property':<18}{'n':>5}{'missing':>9}{'MSE':>8}{'3-bin':>8}"]
    rows = [("ensemble", report["ensemble"])] + list(report["by_member"].items())
    for rater, props in rows:
        for prop, m in props.items():
            lines.append(f"{rater:<22}{prop:<18}{m['n']:>5}{m['missing']:>9}{fmt(m['mse']):>8}{fmt(m['agreement3']):>8}")
    b = report["baseline"]
    if b:
        lines.append(f"{'baseline (always ' + str(b['always']) + ')':<40}{b['n']:>5}{'':>9}{fmt(b['mse']):>8}"
                     f"{fmt(b['agreement3']):>8}   always 0: MSE {fmt(b['mse_always_zero'])}")
    for note in report["notes"]:
        lines.append(f"NOTE: {note}")
    return "\n".join(lines)


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "agreement", help="rate claims with an expert verdict with the configured ensemble (stage 6): MSE and 3-bin "
                          "agreement per property and per member")
    p.add_argument("--set", dest="dataset", required=True, choices=sorted(DEFAULT_PATHS))
    p.add_argument("--n", type=int, help="only the first N usable claims")
    p.add_argument("--path", help="the dataset file (AVeriTeC dev.json or a 5Pils split); default: the excerpt in "
                                  "tests/fixtures")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(handler=run)
    return [p]


def run(args) -> int:
    from dagster_project.config import load_config
    from dagster_project.resources.llm import LLMResource

    try:
        config = load_config(getattr(args, "config", None))
        path = Path(args.path) if args.path else DEFAULT_PATHS[args.dataset]
        records = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    llm = LLMResource(**config["llm"])
    try:
        report = run_agreement(llm, args.dataset, records, args.n)
    finally:
        llm.close()
    report["path"] = str(path)
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    return 0
