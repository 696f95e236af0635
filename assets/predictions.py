"""Job 1, image-text verification: run a verifier over a release split and store its predictions."""

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from assets.common import (
    StageYield,
    count,
    finish_stage,
    llm_metadata,
    map_records,
    quarter_of_context,
    stage_asset,
)
from assets.media import MediaStore
from assets.scored_claims import integrity_of, rate, verdicts_from
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.store import StoreResource
from schemas.records import Medium, NormalizedClaim, PredictedMedium, Prediction, ReleaseClaim

STAGE = "predictions"


def load_release(folder: Path) -> list[ReleaseClaim]:
    return [ReleaseClaim.model_validate(c) for c in json.loads((folder / "claims.json").read_text())["claims"]]


def as_claim(claim: ReleaseClaim, quarter: str) -> NormalizedClaim:
    """A release claim in the form the raters read; media references go back to per-claim indices."""
    index = {(m.type, str(m.id)): i for i, m in enumerate(claim.media)}
    text = re.sub(r"<(image|video):(\d+)>", lambda mt: f"<{mt.group(1)}:{index.get((mt.group(1), mt.group(2)), mt.group(2))}>", claim.text)
    media = [Medium(medium_id=f"release-{quarter}-{m.id}", kind=m.type, path=m.file_path) for m in claim.media]
    return NormalizedClaim(
        claim_id=str(claim.id), review_id="", quarter=quarter, text=text, original_text=claim.text,
        normalization="original", language=claim.language, claim_date=claim.date, review_url=claim.review_url,
        media=media,
    )


def predict(claim: ReleaseClaim, quarter: str, llm: LLMResource, member: str, media_store: MediaStore) -> Prediction:
    """Closed-book baseline: the backbone rates the four properties with no retrieved evidence."""
    as_normalized = as_claim(claim, quarter)
    ratings, failures = rate(as_normalized, "", llm, [member], media_store, stage=STAGE)
    verdicts = verdicts_from(as_normalized, ratings)
    decided = integrity_of(verdicts["media_verdicts"], verdicts["veracity"], verdicts["context_coverage"])
    by_medium = {}
    for v in verdicts["media_verdicts"]:
        by_medium.setdefault(v.medium_index, {})[v.property] = v.score
    return Prediction(
        claim_id=claim.id, quarter=quarter, system=f"closed_book:{member}",
        integrity=decided[0].score if decided else None,
        veracity=verdicts["veracity"].score if verdicts["veracity"] else None,
        context_coverage=verdicts["context_coverage"].score if verdicts["context_coverage"] else None,
        media=[PredictedMedium(id=m.id, **by_medium.get(i, {})) for i, m in enumerate(claim.media)],
        justification=decided[1].justification if decided else "",
        error="" if decided else f"no_verdict ({failures} failed answers)",
        created=datetime.now(timezone.utc),
    )


@stage_asset(
    "evaluation",
    "Image-text verification: the baseline verifier's predictions on the quarter's release.",
    deps=("release",),
    pool="llm",
)
def predictions(
    context: dg.AssetExecutionContext, pipeline: PipelineResource, store: StoreResource, llm: LLMResource
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    folder = store.latest_release(quarter)
    if folder is None:
        raise dg.Failure(f"no release for {quarter}: materialize release first")
    if pipeline.verifier_mode != "closed_book":
        raise dg.Failure(f"verifier mode {pipeline.verifier_mode!r} is not available yet; use closed_book")
    member = pipeline.verifier_member or llm.member_names()[0]
    claims = load_release(folder)
    stats = StageYield(len(claims))
    media_store = MediaStore(str(folder))

    def one(claim: ReleaseClaim):
        prediction = predict(claim, quarter, llm, member, media_store)
        count(stats, "no_verdict", bool(prediction.error))
        return prediction, ""

    out = map_records(STAGE, claims, one, stats, context.log)
    stats.extra.update(llm_metadata(llm, STAGE, context.run_id))
    stats.extra["release"] = folder.name
    return finish_stage(context, store, STAGE, quarter, out, Prediction, stats)
