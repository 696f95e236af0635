"""Contamination check (evidence sufficiency from memory): can a model reproduce the fact-checkers' evidence unaided?

Per claim and model: (1) the model writes a fact-check article from memory; (2) evidence statements are
extracted (by the extractor model) from that article and from the real fact-check article; (3) Hungarian
matching over METEOR (or any pairwise scorer, e.g. embedding cosine) gives the share of the real article's
evidence the model reproduced (``evidence_scoring.contamination_score``); (4) claims above the
threshold are flagged as potentially contaminated for that model.  ``controlled_ids`` is the
contamination-controlled subset, one filter away.
"""

import json
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from assets.ensemble.asking import ask
from dagster_project.resources.llm import LLMResource
from schemas.records import ReleaseClaim

STAGE = "evaluation"
DEFAULT_THRESHOLD = 0.25  # AVeriTeC's METEOR recall threshold, reused by the contamination study
MAX_PARAGRAPHS = 8
MAX_STATEMENTS = 10


class ArticleFromMemory(BaseModel):
    paragraphs: list[str] = Field(min_length=1, max_length=MAX_PARAGRAPHS)


class EvidenceStatements(BaseModel):
    statements: list[str] = Field(default=[], max_length=MAX_STATEMENTS)


def _inputs(claim: ReleaseClaim) -> dict:
    return {"claim": claim.text, "language": claim.language, "claim_date": claim.date or ""}


def write_from_memory(claim: ReleaseClaim, llm: LLMResource, member: str) -> list[str]:
    """The model's fact-check article for the claim, written without retrieval (one paragraph per item)."""
    answer = ask(llm, member, "verifier_article", ArticleFromMemory, stage=STAGE, **_inputs(claim),
                 max_paragraphs=MAX_PARAGRAPHS)
    return [p.strip() for p in (answer.parsed or {}).get("paragraphs", []) if p.strip()]


def extract_statements(claim: ReleaseClaim, article: str, llm: LLMResource, member: str, chars: int = 6000) -> list[str]:
    """Claim-relevant evidence statements of an article (the same extractor for both sides keeps styles comparable)."""
    if not article.strip():
        return []
    answer = ask(llm, member, "verifier_statements", EvidenceStatements, stage=STAGE, **_inputs(claim),
                 article=article[:chars], max_statements=MAX_STATEMENTS)
    return [s.strip() for s in (answer.parsed or {}).get("statements", []) if s.strip()]


def _scoring():
    """The evidence scorers; nltk and scipy (about 90 MB and 0.7 s) load only when a contamination check runs, not in
    every process that loads the code location."""
    from assets.evaluation import evidence_scoring

    return evidence_scoring


def check_claim(claim: ReleaseClaim, real_article: str, llm: LLMResource, member: str, extractor: str = "",
                scorer: Callable[[str, str], float] | None = None, threshold: float = DEFAULT_THRESHOLD) -> dict:
    """One claim's contamination score for ``member`` (``extractor`` defaults to the same member; ``scorer`` to
    METEOR)."""
    scoring = _scoring()
    extractor = extractor or member
    written = write_from_memory(claim, llm, member)
    model_statements = extract_statements(claim, "\n".join(written), llm, extractor)
    oracle_statements = extract_statements(claim, real_article, llm, extractor)
    if not oracle_statements:
        return {"claim_id": claim.id, "model": member, "score": None, "contaminated": None,
                "reason": "no_oracle_evidence", "n_model": len(model_statements), "n_oracle": 0}
    score = scoring.contamination_score(model_statements, oracle_statements, scorer or scoring.meteor)
    return {"claim_id": claim.id, "model": member, "score": score,
            "contaminated": scoring.flag_contaminated(score, threshold), "reason": "",
            "n_model": len(model_statements), "n_oracle": len(oracle_statements),
            "model_statements": model_statements, "oracle_statements": oracle_statements}


def contamination_report(results: list[dict], threshold: float, scorer: Callable[[str, str], float] | None = None) -> dict:
    """Benchmark-level score (mean over scored claims), the flagged share and the flagged claim ids, per model."""
    models: dict[str, dict] = {}
    for r in results:
        m = models.setdefault(r["model"], {"scored": 0, "flagged": [], "scores": []})
        if r["score"] is not None:
            m["scored"] += 1
            m["scores"].append(r["score"])
            if r["contaminated"]:
                m["flagged"].append(r["claim_id"])
    summary = {
        name: {"scored": m["scored"], "benchmark_score": sum(m["scores"]) / len(m["scores"]) if m["scores"] else None,
               "flagged": sorted(m["flagged"]), "flagged_share": len(m["flagged"]) / m["scored"] if m["scored"] else None}
        for name, m in models.items()
    }
    scoring = _scoring()
    return {"threshold": threshold, **scoring.scorer_info(scorer or scoring.meteor), "models": summary, "claims": results}


def controlled_ids(report: dict, claim_ids, models: list[str] | None = None) -> set[int]:
    """Claims not flagged for any of ``models`` (all models in the report by default): the controlled subset."""
    names = models or list(report["models"])
    flagged = {cid for name in names for cid in report["models"].get(name, {}).get("flagged", [])}
    return {cid for cid in claim_ids if cid not in flagged}


def load_report(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())
