"""What a release's manifest says about how it was made: the code version (git), the ensemble's model diversity, its
rewrites and what its model calls cost."""

import os
import subprocess
from collections import Counter

from assets.stage.tables import quantiles
from dagster_project.config import PROJECT_ROOT
from dagster_project.resources.llm import LLMResource
from schemas.records import (
    ScoredClaim,
)


def code_version() -> str:
    """The commit the code comes from: the checkout's HEAD, with "-dirty" when tracked files differ from it (the
    release was built from code no commit holds), else $VERITAS_CODE_VERSION (an installed copy), else "unknown"
    (which fails the release gate outside the demo)."""
    def git(*args: str) -> str:
        try:
            out = subprocess.run(["git", "-C", str(PROJECT_ROOT), *args], check=False, capture_output=True, text=True,
                                 timeout=5)
        except (OSError, subprocess.SubprocessError):
            return ""
        return out.stdout.strip() if out.returncode == 0 else ""

    head = git("rev-parse", "HEAD")
    if head and git("status", "--porcelain", "--untracked-files=no"):
        head += "-dirty"
    return head or os.environ.get("VERITAS_CODE_VERSION", "").strip() or "unknown"


def model_diversity(models: list[dict]) -> dict:
    """Whether the raters are distinct models; members sharing one (the embedded demo's three temperatures of
    SmolLM2) are not independent raters, and the manifest says so."""
    distinct = sorted({m["model"] for m in models})
    note = "" if len(distinct) == len(models) else (
        f"{len(models)} members share {len(distinct)} model(s): their agreement is not that of independent raters")
    return {"members": len(models), "distinct_models": len(distinct), "models_distinct": not note, "note": note}


def rewrite_summary(chosen: list[ScoredClaim], adversarial: dict) -> dict:
    """What the card says of the release's rewritten claims, in aggregate only (never which claims): how many, the
    rounds of the critique-and-refine loop they took, their word-level edit ratio (quantiles), and the adversarial
    filter's report."""
    variants = [c for c in chosen if c.variant == "rectified"]
    return {"released": len(variants),
            "rounds": {str(r): n for r, n in sorted(Counter(c.rewrite_rounds for c in variants).items())},
            "edit_ratio": quantiles(c.edit_ratio for c in variants if c.edit_ratio is not None),
            "adversarial_filter": adversarial}


def cost_summary(llm: LLMResource, quarter: str) -> dict:
    """What the quarter's model calls cost, from the ledger (every stage, every run of the quarter)."""
    report = llm.ledger_report(quarter)
    keep = ("calls", "model_calls", "cache_hits", "prompt_tokens", "completion_tokens", "cost_usd", "errors")
    return {**{k: report[k] for k in keep},
            "by_stage": {stage: {k: v[k] for k in keep} for stage, v in report["by_stage"].items()},
            "by_model": {model: {k: v[k] for k in keep} for model, v in report["by_model"].items()}}
