"""How the LLM stages ask a question: render a prompt, attach media for vision models, validate the answer."""

from concurrent.futures import ThreadPoolExecutor

from pydantic import BaseModel, ValidationError

from dagster_project.resources.llm import LLMAnswer, LLMResource, image_part
from dagster_project.resources.media import MediaStore
from prompts import render, template_hash
from schemas.answers import json_schema
from schemas.records import Medium


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


