"""The ensemble's member configuration: ``EnsembleMember`` (model, endpoint, sampling, limits, pricing, JSON mode),
the ``FallbackModel`` deployments its Router falls back to, the ``local/`` prefix that names the embedded model, and
the default ensemble of three embedded SmolLM2 members."""

import dagster as dg
from pydantic import Field

from dagster_project.resources.llm.answers import _cap_justifications

LOCAL_PREFIX = "local/"


class FallbackModel(dg.Config):
    """Another deployment a member's Router falls back to when its own model keeps failing."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None


class EnsembleMember(dg.Config):
    name: str
    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    temperature: float = 0.0
    seed: int | None = None
    max_tokens: int = 384
    rpm: int | None = None  # requests per minute, enforced here before each request (litellm only routes by it)
    tpm: int | None = None  # tokens per minute, enforced here from the usage of the last minute's answers
    max_parallel: int = 1  # requests in flight at once for this member; callers wait for a slot
    fallbacks: list[FallbackModel] = Field(default_factory=list)  # tried in order by the member's Router after its retries are spent
    vision: bool = False
    input_cost_per_token: float | None = None
    output_cost_per_token: float | None = None
    # "json_object" (+schema) suits llama.cpp/litellm's schema translation; "json_schema" for strict OpenAI-style APIs
    json_mode: str = "json_object"
    context_window: int | None = None  # tokens; empty: litellm's model info (the embedded model: its server's n_ctx)
    # a cap on every "justification" string of the answer schema sent to it (a small local model generates a few
    # tokens per second, and the schema's grammar holds it to the cap); empty: the schema's own limits
    max_justification_chars: int | None = None

    @property
    def is_embedded(self) -> bool:
        return self.model.startswith(LOCAL_PREFIX) and self.api_base is None

    def answer_schema(self, schema: dict) -> dict:
        """The JSON schema as this member is asked for it: with its justification cap, if it has one."""
        return _cap_justifications(schema, self.max_justification_chars) if self.max_justification_chars else schema


def default_members() -> list[EnsembleMember]:
    return [
        EnsembleMember(name="smollm2-t0", model="local/smollm2", temperature=0.0, seed=1),
        EnsembleMember(name="smollm2-t6", model="local/smollm2", temperature=0.6, seed=2),
        EnsembleMember(name="smollm2-t9", model="local/smollm2", temperature=0.9, seed=3),
    ]
