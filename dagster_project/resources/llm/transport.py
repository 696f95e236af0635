"""How a member's requests reach its model: the lazy litellm import (with its offline cost map), the openai SDK client
for OpenAI-compatible servers (``OpenAIDirect``), the choice between it and a litellm Router, and ``TransportMixin``,
the part of ``LLMResource`` that builds each member's deployment parameters and client and reads back which
deployment answered."""

import os
from typing import Any

from dagster_project.resources.llm.members import LOCAL_PREFIX, EnsembleMember

_LOCAL_API_KEY = "sk-local-no-key"  # the OpenAI client insists on some key; the local server ignores it


def _import_litellm():
    """Import litellm lazily (about 7 s) and only after forcing its offline, bundled cost map."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ["LITELLM_OFFLINE_MODE"] = "true"
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    return litellm


class OpenAIDirect:
    """One OpenAI-compatible deployment through the openai SDK, called like a Router: the SDK retries 429 (after its
    Retry-After), 408/409, 5xx, timeouts and lost connections itself, with backoff. litellm's Router, which wraps the
    same SDK for these endpoints, spends about 7 ms more CPU per call on bookkeeping this resource does itself
    (cost, ledger, limits); at a panel's 100 calls/s that was most of a core (bench/llm.py)."""

    def __init__(self, params: dict[str, Any], num_retries: int, timeout: float):
        import openai

        self.model = params["model"].split("/", 1)[1]
        self.client = openai.OpenAI(base_url=params["api_base"], api_key=params.get("api_key"),
                                    max_retries=num_retries, timeout=timeout)

    def completion(self, model: str, messages: list[dict], **kwargs: Any):
        from openai.types.chat import ChatCompletion

        # the body as built, through the client's retry loop: chat.completions.create would first walk every
        # message and the answer schema against its typed parameters (about 2 ms per call here)
        return self.client.post("/chat/completions", cast_to=ChatCompletion,
                                body={"model": self.model, "messages": messages, **kwargs})


def direct_deployment(params: dict[str, Any], fallbacks: list) -> bool:
    """Whether a member's deployment goes through OpenAIDirect: an OpenAI-compatible server of its own (``api_base``:
    the embedded one, llama.cpp, vLLM, a simulated panel) without fallbacks. OpenAI's own models keep the Router,
    which maps their parameters per model (max_completion_tokens, unsupported temperature)."""
    return params["model"].startswith("openai/") and bool(params.get("api_base")) and not fallbacks


class TransportMixin:
    """``LLMResource``'s per-member clients (methods only). Private attributes: ``_routers`` (member name -> its
    OpenAIDirect or litellm Router) and ``_lock`` (through ``_state_lock``); config: ``timeout_s``, ``num_retries``,
    ``transport``; the embedded server through ``local_server()``."""

    def _deployment(self, model: str, api_base: str | None, api_key_env: str | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model, "timeout": self.timeout_s}
        if model.startswith(LOCAL_PREFIX):
            base = api_base or self.local_server().api_base  # no api_base: the embedded server
            params.update(model="openai/" + model[len(LOCAL_PREFIX):], api_base=base, api_key=_LOCAL_API_KEY)
        elif api_base:
            params["api_base"] = api_base
        if api_key_env:
            params["api_key"] = os.environ.get(api_key_env) or ""
        return params

    def _router(self, m: EnsembleMember):
        """One client per member, the only retry loop around the transport: OpenAIDirect, or a litellm Router (with
        the member's fallbacks)."""
        with self._state_lock():
            if self._routers is None:
                self._routers = {}
            router = self._routers.get(m.name)
            if router is not None:
                return router
            params = self._deployment(m.model, m.api_base, m.api_key_env)
            if self.transport == "auto" and direct_deployment(params, m.fallbacks):
                router = self._routers[m.name] = OpenAIDirect(params, self.num_retries, self.timeout_s)
                return router
            litellm = _import_litellm()
            # rpm/tpm are not passed: litellm would only route by them (and track usage per call, ~1 ms), while
            # each Router holds one deployment; the blocking limits are this resource's (see _limiter)
            # litellm prices each answer itself; with the member's own prices it skips the cost-map search
            params.update({k: v for k, v in (("input_cost_per_token", m.input_cost_per_token),
                                             ("output_cost_per_token", m.output_cost_per_token)) if v is not None})
            model_list = [{"model_name": m.name, "litellm_params": params, "model_info": {"id": f"{m.name}#0"}}]
            names = []
            for i, fb in enumerate(m.fallbacks, 1):
                names.append(f"{m.name}~fallback{i}")
                model_list.append({"model_name": names[-1], "model_info": {"id": f"{m.name}#{i}"},
                                   "litellm_params": self._deployment(fb.model, fb.api_base, fb.api_key_env)})
            router = litellm.Router(
                model_list=model_list,
                num_retries=self.num_retries,
                timeout=self.timeout_s,
                fallbacks=[{m.name: names}] if names else [],
            )
            self._routers[m.name] = router
            return router

    def _served_model(self, m: EnsembleMember, response: Any) -> str:
        """The configured model string of the deployment that answered (a fallback's, after a fallback)."""
        hidden = getattr(response, "_hidden_params", None) or {}
        model_id = str(hidden.get("model_id") or "")
        if model_id.startswith(f"{m.name}#"):
            i = int(model_id.rsplit("#", 1)[1])
            if 0 < i <= len(m.fallbacks):
                return m.fallbacks[i - 1].model
        return m.model
