"""How the LLM stages ask a question: render a prompt, attach media for vision models, validate the answer."""

import os
import re
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import polars as pl
from pydantic import BaseModel, ValidationError

from assets.once import once
from assets.common import (
    finish_stage,
    llm_metadata,
    load_upstream,
    quarter_of_context,
    stage_asset,
)
from dagster_project.resources.media import MediaStore
from dagster_project.config import PipelineResource
from dagster_project.resources.llm import LLMAnswer, LLMResource, _import_litellm, image_part
from dagster_project.resources.local_llm import DEFAULT_N_CTX
from dagster_project.resources.store import StoreResource
from prompts import render, template_hash
from schemas.answers import json_schema
from schemas.records import Article, EvidenceCut, Medium

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


# ---- evidence: the whole fact-check article, or its parts most relevant to the claim and its end -------------
CONCLUSION_SHARE = 0.25  # of a member's evidence budget, kept for the article's end, where the verdict's reasoning sits
GAP = "[…]"  # marks where the evidence leaves part of the article out
_CONCLUSION_HEADING = re.compile(
    r"^\W*(?:conclusions?|verdict|our (?:ruling|verdict)|the bottom line|bottom line|fazit|conclusi[oó]n|conclus[aã]o"
    r"|conclusione|veredicto|verdetto)\b", re.IGNORECASE)
_MEDIA_REF = re.compile(r"<(?:image|video):\d+>")


@once
def _encoding():
    """cl100k_base, read from the copy litellm ships (tiktoken would download it): one yardstick for every model."""
    import importlib.util

    import tiktoken

    litellm_dir = Path(importlib.util.find_spec("litellm").submodule_search_locations[0])  # found, not imported (7 s)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(litellm_dir / "litellm_core_utils" / "tokenizers"))

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


def context_window(llm: LLMResource, name: str) -> int:
    """A member's context window in tokens: its config, the embedded server's n_ctx, or litellm's model info."""
    m = llm.member(name)
    if m.context_window:
        return m.context_window
    if m.is_embedded:
        return DEFAULT_N_CTX
    try:
        info = _import_litellm().get_model_info(m.model)
    except Exception as err:  # noqa: BLE001 - litellm raises plain Exception for a model missing from its map
        raise ValueError(f"ensemble member {name!r}: litellm does not know the context window of {m.model!r}; "
                         f"set context_window (tokens) on the member in the config") from err
    window = info.get("max_input_tokens") or info.get("max_tokens")
    if not window:
        raise ValueError(f"ensemble member {name!r}: litellm has no context window for {m.model!r}; "
                         f"set context_window (tokens) on the member in the config")
    return int(window)


def evidence_budgets(llm: LLMResource, pipeline: PipelineResource) -> dict[str, int]:
    """Tokens of article each member reads: a share of its context window; the embedded demo model reads little."""
    budgets = {}
    for m in llm.members:
        tokens = int(context_window(llm, m.name) * pipeline.evidence_context_share)
        budgets[m.name] = min(tokens, pipeline.evidence_tokens_embedded) if m.is_embedded else tokens
    return budgets


def _units(text: str, max_tokens: int) -> list[tuple[int, int]]:
    """[start, end) spans of the article's paragraphs; a paragraph over ``max_tokens`` is cut at sentence ends,
    and a sentence still over it into pieces of ``max_tokens`` characters (a token is at least one)."""
    out = []
    for para in re.finditer(r"[^\n]*\S[^\n]*", text):
        if count_tokens(para.group()) <= max_tokens:
            out.append(para.span())
            continue
        start = para.start()
        for end in [m.end() for m in re.finditer(r"[.!?\u3002\uff01\uff1f](?=\s)", para.group())] + [len(para.group())]:
            end += para.start()
            while start < end and text[start].isspace():
                start += 1
            if end <= start:
                continue
            if out and out[-1][0] >= para.start() and count_tokens(text[out[-1][0]:end]) <= max_tokens:
                out[-1] = (out[-1][0], end)  # sentences of one paragraph join up to the unit size
            elif count_tokens(text[start:end]) <= max_tokens:
                out.append((start, end))
            else:
                out += [(a, min(a + max_tokens, end)) for a in range(start, end, max_tokens)]
            start = end
    return out


def _relevance_order(text: str, units: list[tuple[int, int]], query: str) -> list[int]:
    """Unit indices by BM25 score against the claim, best first; unscored units in article order."""
    import bm25s

    corpus = bm25s.tokenize([text[a:b] for a, b in units], return_ids=False, show_progress=False, stopwords=None)
    terms = bm25s.tokenize([query], return_ids=False, show_progress=False, stopwords=None)[0]
    if not terms or not any(corpus):
        return list(range(len(units)))
    index = bm25s.BM25()
    index.index(corpus, show_progress=False)
    scores = index.get_scores(terms)
    return sorted(range(len(units)), key=lambda i: (-float(scores[i]), i))


def fit_evidence(text: str, query: str, budget: int) -> tuple[str, list[list[int]]]:
    """The article whole when it fits ``budget`` tokens; else its end (from a conclusion heading when there is one,
    up to CONCLUSION_SHARE of the budget) and its parts most relevant to ``query`` by BM25, in article order, with
    GAP where parts are left out. Returns the evidence and the [start, end) spans left out."""
    if count_tokens(text) <= budget:
        return text, []
    units = _units(text, max(32, budget // 6))
    gap = count_tokens(GAP) + 1
    cost = [count_tokens(text[a:b]) + 1 + gap for a, b in units]  # the line break, and the gap it may open
    heading = max((i for i, (a, b) in enumerate(units) if _CONCLUSION_HEADING.match(text[a:b])), default=len(units))
    keep, used = set(), gap
    for i in range(heading, len(units)) if heading < len(units) else reversed(range(len(units))):
        if used + cost[i] > budget * CONCLUSION_SHARE:
            break
        keep.add(i)
        used += cost[i]
    for i in _relevance_order(text, units, _MEDIA_REF.sub(" ", query)):
        if i not in keep and used + cost[i] <= budget:
            keep.add(i)
            used += cost[i]
    lines, left_out = [], []
    for i, (a, b) in enumerate(units):
        if i in keep:
            lines.append(text[a:b])
        elif left_out and left_out[-1][1] == units[i - 1][1]:
            left_out[-1][1] = b  # the run of left-out units goes on
        else:
            left_out.append([a, b])
            lines.append(GAP)
    return "\n".join(lines), left_out


def member_evidence(article: Article | None, query: str, budgets: dict[str, int]) -> tuple[dict[str, str], list[EvidenceCut]]:
    """Each member's evidence from the article, fitted once per distinct budget, and what each budget left out."""
    if article is None:
        return dict.fromkeys(budgets, ""), []
    texts, cuts = {}, []
    for budget in sorted(set(budgets.values())):
        members = [m for m, b in budgets.items() if b == budget]
        text, left_out = fit_evidence(article.text, query, budget)
        texts.update(dict.fromkeys(members, text))
        if left_out:
            cuts.append(EvidenceCut(members=members, budget_tokens=budget, article_chars=len(article.text),
                                    kept_chars=len(article.text) - sum(b - a for a, b in left_out), left_out=left_out))
    return texts, cuts


def drops_flagged(pipeline: PipelineResource) -> bool:
    """Whether claims flagged for injection are left out (``injection_policy: drop``) or kept and recorded."""
    if pipeline.injection_policy not in ("keep", "drop"):
        raise ValueError(f"stages.injection_policy must be keep or drop, not {pipeline.injection_policy!r}")
    return pipeline.injection_policy == "drop"


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
    answer = llm.complete_json(
        member,
        messages,
        json_schema(answer_model, max_string),
        answer_model,
        template_id=prompt,
        template_hash=template_hash(prompt),
        media_hashes=[m.medium_id for m in media],
        stage=stage,
    )
    if answer.cache_hit and answer.parsed is not None:  # cached before a rule the answer model now holds (e.g. a
        try:                                            # judgement with certainty "unknown"): a failure, never a 0
            answer_model.model_validate(answer.parsed)
        except ValidationError as err:
            return answer.model_copy(update={"parsed": None, "error": f"invalid_output: cached answer: {str(err)[:300]}"})
    return answer


def ask_each(llm: LLMResource, members: list[str], fn) -> list:
    """``fn(member)`` for every member at once, the answers in the members' order: the members' calls of one question
    wait for none of each other (each member's max_parallel, rpm and tpm still bound its own calls)."""
    return at_once(llm, members, members, fn)


def at_once(llm: LLMResource, members: list[str], items: list, fn) -> list:
    """``fn(item)`` for every item on its own thread, the results in the items' order (an exception surfaces as
    ``fn``'s would). When one of ``members`` (those ``fn`` asks) is the embedded server, one after another: it answers
    one request at a time, and in turn it reuses the previous prompt's prefix."""
    if len(items) <= 1 or any(llm.member(m).is_embedded for m in members):
        return [fn(item) for item in items]
    with ThreadPoolExecutor(max_workers=len(items), thread_name_prefix="llm-ask") as pool:
        return list(pool.map(fn, items))


def prefetch(items: list, fn, workers: int, log=None, stage: str = ""):
    """``fn`` over ``items`` on ``workers`` threads, ahead of the stage's sequential loop; returns a lookup that
    gives each item's result (or raises its exception) in that loop. With one worker, ``fn`` itself (the loop's own
    progress lines then follow the work). With ``log``, a line of progress at most every PREFETCH_PROGRESS_S while
    the threads work."""
    if workers <= 1 or len(items) <= 1:
        return fn
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-stage") as pool:
        futures = {id(item): pool.submit(fn, item) for item in items}
        logged = time.monotonic()
        for done, _ in enumerate(as_completed(futures.values()), 1):  # errors surface per item in the lookup
            if log and time.monotonic() - logged >= PREFETCH_PROGRESS_S and done < len(items):
                log.info(f"{stage}: {done}/{len(items)} worked through on {workers} threads")
                logged = time.monotonic()
    return lambda item: futures[id(item)].result()


PREFETCH_PROGRESS_S = 15.0  # prefetch's progress lines while a model stage's threads work


def overlapped_rounds(first: list, fn, workers: int, decide, log=None, stage: str = "") -> tuple[list[tuple], int]:
    """``fn`` over ``first``, then over each further round ``decide`` asks for, on one pool of ``workers`` threads,
    the results taken in the order the items were given. ``decide(done, pending)`` gets the (item, result) pairs so
    far and the items still unfinished, and returns the next round's items ([]: none). It is asked once a round's
    items have all started (no more than ``workers`` unfinished: the next round then starts while the slowest of the
    last one still run, instead of after them), and again when nothing is unfinished, where [] ends the work. Where
    it is asked, and what it is given, follow from the results in order, not from timing, so the rounds do too.
    Returns the pairs and the rounds started. A result that raises is raised here, the work not started cancelled."""
    pairs: list[tuple] = []
    pending: deque = deque()
    rounds, last, asked = 0, -1, False  # last: the results decide had when last asked; asked: this round's tail
    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="llm-stage")

    def start(items: list) -> bool:
        nonlocal rounds
        rounds += bool(items)
        pending.extend((item, pool.submit(fn, item)) for item in items)
        return bool(items)

    try:
        start(first)
        logged = time.monotonic()
        while pending:
            while len(pending) > (0 if asked else workers):
                item, future = pending.popleft()
                pairs.append((item, future.result()))
                if log and time.monotonic() - logged >= PREFETCH_PROGRESS_S and pending:
                    log.info(f"{stage}: {len(pairs)}/{len(pairs) + len(pending)} worked through on {workers} threads")
                    logged = time.monotonic()
            asked = True
            if len(pairs) > last or not pending:  # a tail with new results, or the end
                last = len(pairs)
                asked = not start(decide(pairs, [item for item, _ in pending]))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return pairs, rounds


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


def llm_claim_asset(name: str, description: str, upstream: str, in_model, out_model, process, keyed: bool = False):
    """Stages 5-7 as assets: the upstream claims and their articles in, ``process`` over them, the table, the
    yield with the stage's model calls, and its raw outputs out.

    ``process(claims, articles_by_review_id, llm, pipeline, media_store, log) -> (records, StageYield)``; with
    ``keyed`` also ``key=``, the store's secret selection key (stages 6 and 7 work in the release's own order).
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
        extra = {}
        if keyed:
            from assets.release.order import order_key

            extra["key"] = order_key(store)
        out, stats = process(claims, articles, llm, pipeline, store.media_store(), context.log, **extra)
        llm.check_stage(name, context.run_id)  # a dead model or a stop fails the stage before its table is written
        stats.extra.update(llm_metadata(llm, name, context.run_id))
        result = finish_stage(context, store, name, quarter, out, out_model, stats, bad)
        return finish_llm_stage(result, llm, store, name, quarter, context.run_id)

    return _asset
