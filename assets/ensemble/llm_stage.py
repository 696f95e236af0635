"""A model stage as a Dagster asset: the claim-stage decorator over the shared stage wiring, and the stage's end
(its raw answers as a table, its model metadata beside its yield)."""


import polars as pl

from assets.stage.tables import finish_stage, llm_metadata, load_upstream
from assets.stage.wiring import quarter_of_context, stage_asset
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.store import StoreResource
from schemas.records import Article

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


def claim_stage_asset(name: str, description: str, upstream: str):
    """The decorator of stages 5-7: the claims group, the upstream table and the articles in, the llm pool."""
    return stage_asset("claims", description, deps=(upstream, "articles"), pool="llm", name=name)


def run_claim_stage(context, store: StoreResource, llm: LLMResource, name: str, upstream: str, in_model, out_model,
                    process, keyed: bool = False):
    """The body of stages 5-7: the upstream claims and their articles in, ``process`` over them, the table, the
    yield with the stage's model calls, and its raw outputs out. Each stage's asset names its own settings and binds
    them into ``process``.

    ``process(claims, articles_by_review_id, media_store, log) -> (records, StageYield)``; with ``keyed`` also
    ``key=``, the store's secret selection key (stages 6 and 7 work in the release's own order).
    """
    quarter = quarter_of_context(context)
    bad: list = []  # upstream rows that fail validation
    claims = load_upstream(store, upstream, quarter, in_model, bad)
    articles = {a.review_id: a for a in load_upstream(store, "articles", quarter, Article, bad)}
    extra = {}
    if keyed:
        from assets.rules.release_order import order_key

        extra["key"] = order_key(store)
    out, stats = process(claims, articles, store.media_store(), context.log, **extra)
    llm.check_stage(name, context.run_id)  # a dead model or a stop fails the stage before its table is written
    stats.extra.update(llm_metadata(llm, name, context.run_id))
    result = finish_stage(context, store, name, quarter, out, out_model, stats, bad)
    return finish_llm_stage(result, llm, store, name, quarter, context.run_id)
