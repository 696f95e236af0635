"""How the LLM stages ask a question: render a prompt, attach media for vision models, validate the answer."""

import re
from concurrent.futures import ThreadPoolExecutor

import polars as pl
from pydantic import BaseModel

from assets.common import (
    finish_stage,
    llm_metadata,
    load_upstream,
    quarter_of_context,
    stage_asset,
)
from assets.media import MediaStore
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMAnswer, LLMResource, image_part
from dagster_project.resources.store import StoreResource
from prompts import render, template_hash
from schemas.answers import json_schema
from schemas.records import Article, Medium

# Phrases that address the model instead of the reader; articles quoting them are flagged, never obeyed.
_INJECTION = re.compile(
    r"(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?"
    r"(?:your|previous|prior|above|earlier|the\s+(?:above|previous|prior|system))"
    r"(?:\s+\w+)?\s+(?:instructions|rules|prompts?|guidelines|directives)"
    r"|\b(?:rate|score|label|mark|classify)\s+(?:this|it|the\s+claim|this\s+claim)\s+(?:as\s+)?"
    r"(?:true|false|intact|compromised|positive|negative|accurate|correct)\b"
    r"|\byou\s+are\s+now\s+(?:a|an|the)\b|\bnew\s+instructions\s*:|\bsystem\s+prompt\b|<\|im_start\|>"
    r"|ignoriere\s+(?:alle\s+)?(?:deine|die|vorherigen)\s+(?:\w+\s+)?anweisungen"
    r"|ignore[sz]?\s+(?:toutes\s+)?(?:tes|vos|les)\s+(?:\w+\s+)?instructions"
    r"|ignora\s+(?:todas\s+)?(?:tus|las)\s+(?:\w+\s+)?instrucciones",
    re.IGNORECASE,
)


def injection_flags(*texts: str) -> list[str]:
    """The instruction-like phrases found in untrusted text (claims, articles), lower-cased and de-duplicated."""
    found = {" ".join(m.group(0).lower().split()) for text in texts if text for m in _INJECTION.finditer(text)}
    return sorted(found)


def media_context(media: list[Medium]) -> list[dict]:
    """What a text-only model learns about each medium (vision models also get the pixels)."""
    return [
        {"kind": m.kind, "alt": m.alt[:200], "caption": m.caption[:200], "source": m.source_url[:200]}
        for m in media
    ]


def media_jpegs(media: list[Medium], store: MediaStore | None) -> list[bytes]:
    """Images as they are; a video as its sampled frames."""
    if store is None:
        return []
    out = []
    for m in media:
        for path in [m.path] if m.kind == "image" else m.frame_paths:
            out.append(store.read(path))
    return out


def ask(
    llm: LLMResource,
    member: str,
    prompt: str,
    answer_model: type[BaseModel],
    *,
    stage: str,
    media: list[Medium] = (),
    media_store: MediaStore | None = None,
    max_string: int = 200,
    **inputs,
) -> LLMAnswer:
    """One structured question to one ensemble member; the cache key covers prompt version and media hashes.
    ``max_string`` caps every free string in the schema the model sees (URLs need more than prose)."""
    messages = render(prompt, media=media_context(list(media)), **inputs)
    if media and llm.is_vision(member):
        parts = [{"type": "text", "text": messages[-1]["content"]}]
        parts += [image_part(jpeg) for jpeg in media_jpegs(list(media), media_store)]
        messages[-1] = {"role": "user", "content": parts}
    return llm.complete_json(
        member,
        messages,
        json_schema(answer_model, max_string),
        answer_model,
        template_id=prompt,
        template_hash=template_hash(prompt),
        media_hashes=[m.medium_id for m in media],
        stage=stage,
    )


def prefetch(items: list, fn, workers: int):
    """``fn`` over ``items`` on ``workers`` threads, ahead of the stage's sequential loop; returns a lookup that
    gives each item's result (or raises its exception) in that loop. With one worker, ``fn`` itself."""
    if workers <= 1 or len(items) <= 1:
        return fn
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-stage") as pool:
        futures = {id(item): pool.submit(fn, item) for item in items}
        for future in futures.values():
            future.exception()  # wait for all; errors surface per item below
    return lambda item: futures[id(item)].result()


RAW_OUTPUT_COLUMNS = ("member", "model", "template_id", "cache_key", "cache_hit", "attempts", "error", "raw", "reasoning",
                      "attempts_json")


def raw_outputs_frame(llm: LLMResource, stage: str, run_id: str) -> pl.DataFrame:
    """Every call one stage made in one run, with the raw answer(s) and reasoning, as a table to store per quarter."""
    rows = llm.raw_outputs(stage, run_id)
    schema = {c: pl.Utf8 for c in RAW_OUTPUT_COLUMNS} | {"cache_hit": pl.Boolean, "attempts": pl.Int64}
    return pl.DataFrame([{c: r[c] for c in RAW_OUTPUT_COLUMNS} for r in rows], schema=schema, orient="row")


def finish_llm_stage(result, llm: LLMResource, store, stage: str, quarter: str, run_id: str, extra: dict = ()):
    """Store the stage's raw model outputs for the quarter and say, in the metadata, how many calls were paid."""
    import dagster as dg

    raw = raw_outputs_frame(llm, stage, run_id)
    version = store.write_table(stage, quarter, raw, run_id, kind="llm_outputs")
    meta = dict(result.metadata or {})
    paid = int(meta.get("llm/model_calls", 0))
    meta.update({
        "llm/raw_outputs": len(raw),
        "llm/raw_outputs_version": version,
        "llm/note": (f"0 model calls: all {int(meta.get('llm/calls', 0))} answers came from the cache" if paid == 0
                     else f"{paid} model calls, {int(meta.get('llm/cache_hits', 0))} answers from the cache"),
        **dict(extra),
    })
    return dg.MaterializeResult(metadata=meta)


def llm_claim_asset(name: str, description: str, upstream: str, in_model, out_model, process):
    """Stages 5-7 as assets: the upstream claims and their articles in, ``process`` over them, the table, the
    yield with the stage's model calls, and its raw outputs out.

    ``process(claims, articles_by_review_id, llm, pipeline, media_store, log) -> (records, StageYield)``.
    """
    import dagster as dg

    @stage_asset("claims", description, deps=(upstream, "articles"), pool="llm", name=name)
    def _asset(
        context: dg.AssetExecutionContext, pipeline: PipelineResource, store: StoreResource, llm: LLMResource
    ) -> dg.MaterializeResult:
        quarter = quarter_of_context(context)
        bad: list = []  # upstream rows that fail validation
        claims = load_upstream(store, upstream, quarter, in_model, bad)
        articles = {a.review_id: a for a in load_upstream(store, "articles", quarter, Article, bad)}
        out, stats = process(claims, articles, llm, pipeline, store.media_store(), context.log)
        llm.check_stage(name, context.run_id)  # a dead model or a stop fails the stage before its table is written
        stats.extra.update(llm_metadata(llm, name, context.run_id))
        result = finish_stage(context, store, name, quarter, out, out_model, stats, bad)
        return finish_llm_stage(result, llm, store, name, quarter, context.run_id)

    return _asset
