"""How the LLM stages ask a question: render a prompt, attach media for vision models, validate the answer."""

from pydantic import BaseModel

from assets.media import MediaStore
from dagster_project.resources.llm import LLMAnswer, LLMResource, image_part
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
    **inputs,
) -> LLMAnswer:
    """One structured question to one ensemble member; the cache key covers prompt version and media hashes."""
    messages = render(prompt, media=media_context(list(media)), **inputs)
    if media and llm.is_vision(member):
        parts = [{"type": "text", "text": messages[-1]["content"]}]
        parts += [image_part(jpeg) for jpeg in media_jpegs(list(media), media_store)]
        messages[-1] = {"role": "user", "content": parts}
    return llm.complete_json(
        member,
        messages,
        json_schema(answer_model),
        answer_model,
        template_id=prompt,
        template_hash=template_hash(prompt),
        media_hashes=[m.medium_id for m in media],
        stage=stage,
    )
