"""What the models must answer, per prompt. Enums and maxLength keep a small local model inside the schema."""

import json
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, create_model, model_validator

Category = Literal["positive", "negative", "unknown"]
Certainty = Literal["certain", "rather certain", "rather uncertain", "unknown"]
YesNo = Literal["yes", "no"]


class Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MediumVerdict(Answer):
    keep: YesNo
    reason: Literal["part_of_claim", "fact_checker_graphic", "verdict_stamp", "unrelated"]


@lru_cache(maxsize=None)
def media_filter_answer(n: int) -> type[Answer]:
    """The media filter's answer about ``n`` media asked together: one MediumVerdict per medium, as the required
    properties ``medium_1`` .. ``medium_n`` (an object, not a list: a JSON-mode grammar then holds the model to exactly
    one verdict per medium, where a list's length would be left to it)."""
    return create_model(f"MediaFilterAnswer{n}", __base__=Answer,
                        **{f"medium_{i}": (MediumVerdict, ...) for i in range(1, n + 1)})


class ClaimTextAnswer(Answer):
    claim: str = Field(min_length=3, max_length=600)


class PropertyAnswer(Answer):
    category: Category
    certainty: Certainty
    justification: str = Field(max_length=600)
    tags: list[Annotated[str, StringConstraints(max_length=40)]] = Field(default=[], max_length=5)

    @model_validator(mode="after")
    def _certainty_of_a_judgement(self):
        """A positive or negative judgement needs a certainty: "unknown" would score it 0 (the score of the unknown
        category) and pull the mean toward Unknown unseen, so the answer is invalid and the model is re-asked."""
        if self.category != "unknown" and self.certainty == "unknown":
            raise ValueError(f"category {self.category!r} needs a certainty other than 'unknown' "
                             f"(certain, rather certain or rather uncertain), or category 'unknown'")
        return self


class MediaRatingAnswer(Answer):
    authenticity: PropertyAnswer
    contextualization: PropertyAnswer


class AppearanceChoiceAnswer(Answer):
    """Stage 4: the candidate links where the claim itself was published, most likely first."""

    urls: list[Annotated[str, StringConstraints(max_length=1000)]] = Field(max_length=5)
    reason: str = Field(default="", max_length=300)


class RectifiedCheckAnswer(Answer):
    consistent: YesNo
    shareable: YesNo
    critique: str = Field(default="", max_length=300)  # what the writer should change, sent back on a refine round


def json_schema(model: type[BaseModel], max_string: int = 200) -> dict:
    """The model's JSON schema with references inlined and a maxLength on every free string (a fresh copy each
    time: pydantic built it anew for every model call, 0.2-0.35 ms each)."""
    return json.loads(_json_schema_text(model, max_string))


@lru_cache(maxsize=None)
def _json_schema_text(model: type[BaseModel], max_string: int) -> str:
    return json.dumps(_build_json_schema(model, max_string))


def _build_json_schema(model: type[BaseModel], max_string: int) -> dict:
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def inline(node):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(defs[node["$ref"].rsplit("/", 1)[-1]])
            out = {k: inline(v) for k, v in node.items() if k not in ("title", "default")}
            if out.get("type") == "string" and "enum" not in out:
                out["maxLength"] = min(out.get("maxLength", max_string), max_string)
            if out.get("type") == "object":
                out["required"] = list(out.get("properties", {}))
            return out
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return inline(raw)
