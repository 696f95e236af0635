"""``veritas evaluate``: score any system's predictions against one or more releases (table, JSON, PNG plots)."""

import argparse
import sys
from pathlib import Path


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "evaluate",
        help="MSE/MAE/3-bin/7-bin accuracy of a predictions file against a release folder, with plots",
        description="Predictions: JSON list (or {'system', 'quarter', 'predictions': [...]}, or JSON Lines) of "
                    "{claim_id, integrity, veracity, context_coverage, media: [{id, authenticity, "
                    "contextualization}]}; scores are numbers in [-1, 1] or {'score': x}. A release-format "
                    "claims.json is accepted too. --release is a release folder, a quarter folder with LATEST, "
                    "or a folder of quarters (as written by `veritas export`).",
    )
    p.add_argument("--predictions", required=True, help="the predictions file (JSON or JSON Lines)")
    p.add_argument("--release", required=True, help="release folder(s)")
    p.add_argument("--out", help="where the report goes (default: ./evaluation-<system>)")
    p.add_argument("--system", default="", help="system name when the file does not give one")
    p.add_argument("--quarter", default="", help="quarter of records that do not say (default: the release's)")
    p.add_argument("--cutoff", default=None,
                   help="the model's knowledge cut-off, a quarter (2024Q4) or a date (default: knowledge_cutoff in the config)")
    p.add_argument("--max-mb", type=float, default=64,
                   help="refuse a predictions file larger than this many MiB (default 64; parsing takes about 40 "
                        "times the bytes)")
    p.add_argument("--contamination", metavar="REPORT",
                   help="a contamination.json (evaluation with contamination_check): also report the "
                        "contamination-controlled subset (claims flagged for no model)")
    p.set_defaults(handler=run)
    a = subparsers.add_parser(
        "averitec-score",
        help="AVeriTeC/AVerImaTeC scoring: question and evidence recall (Hungarian over METEOR) and the "
             "verdict accuracy counted only when evidence recall reaches each lambda",
        description="--gold: AVeriTeC-format records (claim, label, questions: [{question, answers}]). "
                    "--predictions: a list in the same order, or with claim_id (index into gold), of "
                    "{pred_label, evidence: [{question, answer}]} (pred_questions is accepted too).",
    )
    a.add_argument("--gold", required=True)
    a.add_argument("--predictions", required=True)
    a.add_argument("--thresholds", type=float, nargs="+", default=[0.2, 0.25, 0.3])
    a.add_argument("--rules", default="averitec", choices=("averitec", "lenient"),
                   help="averitec (default): the official scorer's rules, numbers comparable with published ones; "
                        "lenient: word tokens, answers joined per question, identical texts 1.0, recall >= lambda")
    a.add_argument("--judge-member", default="", help="score pairs with this LLM member instead of METEOR")
    a.add_argument("--out", help="write the full result (per claim) as JSON here (outside the data dir and the store)")
    a.set_defaults(handler=averitec)
    return [p, a]


def averitec_items(gold_path: str, predictions_path: str) -> list[dict]:
    """The gold records joined with the predictions, read strictly: a ValueError names the file, the record and the
    field (a file that is not a list, a record that is not an object, evidence that is not a list of objects)."""
    from assets.evaluation.predictions import MiB, json_shown, read_json

    gold = read_json(Path(gold_path), 1024 * MiB, "an AVeriTeC gold file")
    preds = read_json(Path(predictions_path), 1024 * MiB, "an AVeriTeC predictions file")
    for path, payload, what in ((gold_path, gold, "AVeriTeC records {claim, label, questions}"),
                                (predictions_path, preds, "predictions {pred_label, evidence}")):
        if not isinstance(payload, list):
            kind = "an object" if isinstance(payload, dict) else json_shown(payload)
            raise ValueError(f"{path}: expected a JSON list of {what}, got {kind}")
        for i, record in enumerate(payload, 1):
            if not isinstance(record, dict):
                raise ValueError(f"{path}: record {i}: expected an object of {what}, got {json_shown(record)}")
    for i, record in enumerate(gold, 1):
        questions = record.get("questions")
        if questions is not None and (not isinstance(questions, list) or not all(isinstance(q, dict) for q in questions)):
            raise ValueError(f"{gold_path}: record {i}: field questions: expected a list of {{question, answers}}")
    by_id = {}
    for i, p in enumerate(preds, 1):
        for field in ("evidence", "pred_questions"):
            value = p.get(field)
            if value is not None and (not isinstance(value, list) or not all(isinstance(q, dict) for q in value)):
                raise ValueError(f"{predictions_path}: record {i}: field {field}: {json_shown(value)} is not a list "
                                 "of {question, answer}; give [{\"question\": ..., \"answer\": ...}]")
        if "claim_id" in p:
            cid = p["claim_id"]
            if isinstance(cid, str) and cid.isascii() and cid.isdigit() and len(cid) < 19:
                cid = int(cid)
            if isinstance(cid, bool) or not isinstance(cid, int) or not 0 <= cid < len(gold):
                raise ValueError(f"{predictions_path}: record {i}: field claim_id: {json_shown(cid)} is not an index "
                                 f"into the gold file (0 to {len(gold) - 1})")
            if cid in by_id:
                raise ValueError(f"{predictions_path}: record {i}: field claim_id: {cid} is predicted twice")
            by_id[cid] = p
    items = []
    for i, record in enumerate(gold):
        p = by_id.get(i) if by_id else (preds[i] if i < len(preds) else None)
        p = p or {}
        items.append({**record, "claim_id": i, "pred_label": p.get("pred_label", p.get("label", "")),
                      "pred_questions": p.get("evidence", p.get("pred_questions", [])) or []})
    return items


def averitec_out_problem(out: Path, config_path: str | None) -> str:
    """Why the result cannot go to ``out`` ("" when it can): inside the store or the data dir (the LLM cache, the
    Dagster instance), which only the pipeline writes, as for ``evaluate --out``; or a folder where a file is needed."""
    from dagster_project.core.config_file import load_config
    from dagster_project.core.store_paths import refuse_in_store, store_root

    why = "only the pipeline writes there"
    try:
        refuse_in_store("--out", out, store_root(config_path), why, ("is", "is inside"))
        refuse_in_store("--out", out, Path(load_config(config_path)["data_dir"]), why, ("is", "is inside"),
                        "the data dir", "the store, the LLM cache, the Dagster instance")
    except ValueError as err:
        return str(err)
    return f"--out {out} is a folder; the result is one JSON file: give a file path" if out.is_dir() else ""


def averitec(args: argparse.Namespace) -> int:
    import json

    from assets.evaluation.evidence_scoring import averitec_score
    from dagster_project.core.atomic_files import atomic_write

    if args.out and (problem := averitec_out_problem(Path(args.out), getattr(args, "config", None))):
        print(f"veritas averitec-score: {problem}", file=sys.stderr)
        return 2
    try:
        items = averitec_items(args.gold, args.predictions)
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas averitec-score: {err}", file=sys.stderr)
        return 2
    judge, llm = None, None
    if args.judge_member:
        from assets.evaluation.verifier_judge import LLMJudge
        from dagster_project.config import load_config
        from dagster_project.resources.llm import LLMResource

        llm = LLMResource(**load_config(getattr(args, "config", None))["llm"])
        judge = LLMJudge(llm, args.judge_member)
    try:
        result = averitec_score(items, thresholds=args.thresholds, judge=judge, rules=args.rules)
    finally:
        if llm is not None:
            llm.close()  # stops the embedded model server if the judge started it
    print(f"claims {result['n_claims']}  rules {result['rules']}  scorer {result['scorer']} (synonyms: {result['synonyms']})")
    print(f"question recall {result['question_recall']:.4f}  evidence recall {result['evidence_recall']:.4f}  "
          f"label accuracy {result['label_accuracy']:.4f}")
    for t, acc in result["accuracy"].items():
        print(f"accuracy at evidence recall {'>' if args.rules == 'averitec' else '>='} {t}: {acc:.4f}")
    if args.out:  # beside it, then renamed: a crash or a full disk never leaves half a result
        try:
            atomic_write(Path(args.out), json.dumps(result, indent=1, ensure_ascii=False).encode("utf-8"))
        except OSError as err:
            print(f"veritas averitec-score: cannot write the result to {args.out}: {err.strerror or err}; free "
                  "space or choose another --out", file=sys.stderr)
            return 2
    return 0


def _config_cutoff(config_path: str | None) -> str:
    try:
        from dagster_project.config import load_config

        return str(load_config(config_path)["stages"].get("knowledge_cutoff") or "")
    except (FileNotFoundError, ValueError):
        return ""


def coverage_lines(gold: dict, predictions: list, systems: list[str]) -> list[str]:
    """One warning per system and quarter that leaves claims without a prediction (printed before any MSE)."""
    lines = []
    for system in systems:
        for q, claims in gold.items():
            answered = {p.claim_id for p in predictions if p.quarter == q and p.system == system
                        and p.integrity is not None}
            if len(answered) < len(claims):
                lines.append(f"WARNING: {system} covers {len(answered)} of {len(claims)} claims of {q} "
                             f"({len(answered) / len(claims):.1%}): the MSE of the answered claims flatters it; "
                             "'MSE missing as 0' scores each missing one as 0 (don't know), and the leaderboard "
                             "ranks on that")
    return lines


def out_folder_problem(out: Path, root: Path) -> str:
    """Why the report cannot go to ``out`` ("" when it can): inside the store, which only the pipeline writes (its
    own evaluation.json, a published release), or a file where a folder is needed."""
    from dagster_project.core.store_paths import refuse_in_store

    try:
        refuse_in_store("--out", out, root, "only the pipeline writes there (its own reports, the published releases)",
                        ("is", "is inside"))
    except ValueError as err:
        return str(err)
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file; the report is a folder (evaluation.json, plots): choose a new folder"
    return ""


def as_cutoff(value: str) -> str:
    """A knowledge cut-off as the evaluation reads it: blank or "unknown" is none ("")."""
    value = value.strip()
    return "" if value.lower() == "unknown" else value


def is_cutoff(value: str) -> bool:
    """Whether ``value`` (after ``as_cutoff``) is none, a quarter or a date the evaluation can place."""
    from assets.evaluation.evaluation import cutoff_position

    try:
        cutoff_position(value)
    except ValueError:
        return False
    return True


def option_problem(args: argparse.Namespace) -> str:
    """Why --max-mb, --cutoff or --contamination cannot be used ("" when they can)."""
    import math

    if not math.isfinite(args.max_mb) or args.max_mb <= 0:
        return f"--max-mb {args.max_mb:g} is not a size: give a positive number of MiB (default 64)"
    if args.cutoff is not None and not is_cutoff(as_cutoff(args.cutoff)):
        return (f"--cutoff {args.cutoff[:40]!r} is not a knowledge cut-off: give a quarter (2024Q4) or a date "
                "(2024-06-30), or leave the option out")
    if args.contamination is not None and not args.contamination.strip():
        return ("--contamination is empty: give the path of a contamination.json (the evaluation's contamination "
                "check writes one), or leave the option out")
    return ""


def read_contamination(path: str) -> dict:
    """A contamination report, or a ValueError that names the file and what is wrong with it."""
    from assets.evaluation.predictions import MiB, read_json

    report = read_json(Path(path), 256 * MiB, "a contamination.json")
    if not isinstance(report, dict) or not isinstance(report.get("models"), dict):
        raise ValueError(f"{path}: not a contamination report: expected {{\"models\": {{model: {{\"flagged\": "
                         "[claim ids]}}} (give the --contamination file the contamination check wrote)")
    return report


def run(args: argparse.Namespace) -> int:
    from assets.evaluation.evaluation import (
        evaluate_quarters,
        text_table,
        write_report,
    )
    from assets.evaluation.prediction_files import (
        check_claim_ids,
        find_releases,
        read_predictions,
        release_identity,
    )
    from assets.evaluation.predictions import MiB, load_release
    from assets.evaluation.verifier_contamination import controlled_ids
    from assets.release.recurring import recurring_ids
    from dagster_project.core.store_paths import store_root

    root = store_root(getattr(args, "config", None))
    problem = option_problem(args) or (out_folder_problem(Path(args.out), root) if args.out else "")
    if problem:
        print(f"veritas evaluate: {problem}", file=sys.stderr)
        return 2
    try:  # the release first: its faults are named as the release's, never as the predictions'
        releases = find_releases(Path(args.release))
        gold = {q: load_release(folder) for q, folder in releases.items()}
        scored = {q: release_identity(folder) for q, folder in releases.items()}  # the version each report scored
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas evaluate: the release (--release {args.release}) cannot be used: {err}", file=sys.stderr)
        return 2
    default_quarter = args.quarter or (next(iter(releases)) if len(releases) == 1 else "")
    try:
        located = read_predictions(Path(args.predictions), default_quarter, args.system, int(args.max_mb * MiB))
        check_claim_ids(Path(args.predictions), located, gold)
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas evaluate: {err}", file=sys.stderr)
        return 2
    predictions = [p for _, p in located]
    unknown = sorted({p.quarter for p in predictions} - set(gold))
    if len(unknown) == len({p.quarter for p in predictions}):
        print(f"veritas evaluate: {args.predictions}: every prediction is for a quarter without a release in "
              f"{args.release} ({', '.join(unknown)}; the release is {', '.join(gold)}): nothing to score",
              file=sys.stderr)
        return 2
    if unknown:
        print(f"veritas evaluate: predictions for quarters without a release ignored: {', '.join(unknown)}",
              file=sys.stderr)
    systems = sorted({p.system for p in predictions})
    for line in coverage_lines(gold, predictions, systems):  # first, before any MSE
        print(line)
    def out_of(system: str) -> Path:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in system)
        return Path(args.out) if args.out and len(systems) == 1 else Path(args.out or ".") / f"evaluation-{safe}"

    try:
        contamination = read_contamination(args.contamination) if args.contamination else None
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas evaluate: --contamination: {err}", file=sys.stderr)
        return 2
    for system in systems:  # every report folder checked before any is written
        if problem := out_folder_problem(out_of(system), root):
            print(f"veritas evaluate: {problem}", file=sys.stderr)
            return 2
    cutoff = as_cutoff(args.cutoff if args.cutoff is not None else _config_cutoff(getattr(args, "config", None)))
    if not is_cutoff(cutoff):  # --cutoff was checked above: this one is the config's
        print(f"veritas evaluate: stages.knowledge_cutoff {cutoff[:40]!r} in the config is not a knowledge cut-off: "
              "give a quarter (2024Q4) or a date (2024-06-30) there, or pass --cutoff", file=sys.stderr)
        return 2
    recurring = {q: set(recurring_ids(folder)) for q, folder in releases.items()}  # left out of the after-cut-off view
    for system in systems:
        data = {q: (g, [p for p in predictions if p.quarter == q and p.system == system]) for q, g in gold.items()}
        full = evaluate_quarters(data, cutoff, system, recurring)
        full["releases"] = scored
        if contamination is not None:
            keep = controlled_ids(contamination, [c.id for g in gold.values() for c in g])
            controlled = {q: ([c for c in g if c.id in keep], ps) for q, (g, ps) in data.items()}
            full["contamination_controlled"] = evaluate_quarters(controlled, cutoff, system)["overall"]
        try:
            paths = write_report(full, out_of(system))
        except OSError as err:
            print(f"veritas evaluate: cannot write the report to {out_of(system)}: {err.strerror or err}; free "
                  "space or choose another --out", file=sys.stderr)
            return 2
        print(text_table(full), end="")
        for kind, path in paths.items():
            print(f"[veritas] {kind}: {path}")
    return 0
