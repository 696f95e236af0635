"""LLM ensemble resource: per member the openai SDK (OpenAI-compatible endpoints) or a litellm Router (other providers,
fallbacks), embedded local model, durable SQLite cache and cost ledger. This package's public API, re-exported from
the modules that hold it (``resource``: ``LLMResource``; ``members``, ``answers``, ``messages``, ``errors``,
``rate_limit``, ``transport``), so that ``from dagster_project.resources.llm import ...`` keeps working."""

from dagster_project.resources.llm.answers import LLMAnswer
from dagster_project.resources.llm.errors import (
    BudgetExceeded,
    ModelUnavailable,
    RefusalError,
    RunStopped,
    request_stop,
    stop_requested,
)
from dagster_project.resources.llm.members import (
    LOCAL_PREFIX,
    EnsembleMember,
    FallbackModel,
    default_members,
)
from dagster_project.resources.llm.messages import (
    canonical_json,
    image_part,
    parse_json_text,
    strip_images,
)
from dagster_project.resources.llm.rate_limit import RateLimiter
from dagster_project.resources.llm.resource import LLMResource
from dagster_project.resources.llm.transport import (
    OpenAIDirect,
    _import_litellm,
    direct_deployment,
)

__all__ = [
    "LOCAL_PREFIX",
    "BudgetExceeded",
    "EnsembleMember",
    "FallbackModel",
    "LLMAnswer",
    "LLMResource",
    "ModelUnavailable",
    "OpenAIDirect",
    "RateLimiter",
    "RefusalError",
    "RunStopped",
    "_import_litellm",
    "canonical_json",
    "default_members",
    "direct_deployment",
    "image_part",
    "parse_json_text",
    "request_stop",
    "stop_requested",
    "strip_images",
]
