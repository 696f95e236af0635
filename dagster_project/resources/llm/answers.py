"""What one member answered: the ``LLMAnswer`` record (parsed answer or error, tokens, cost, latency, cache hit), and
the cap on the "justification" strings of the answer schema a member is asked for."""

from typing import Any

import pydantic


def _cap_justifications(node: Any, cap: int) -> Any:
    """A copy of a JSON schema in which every object property named "justification" allows at most ``cap`` chars."""
    if isinstance(node, list):
        return [_cap_justifications(v, cap) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _cap_justifications(v, cap) for k, v in node.items()}
    field = out.get("properties", {}).get("justification") if isinstance(out.get("properties"), dict) else None
    if isinstance(field, dict) and field.get("type") == "string":
        field["maxLength"] = min(cap, field.get("maxLength", cap))
    return out


class LLMAnswer(pydantic.BaseModel):
    member: str
    model: str  # the model that answered: the member's own, or the fallback the Router used
    parsed: dict | None
    raw: str
    error: str | None
    cache_hit: bool
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
