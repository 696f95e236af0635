"""Whether a model declined to answer, in the shapes the providers send it through litellm or the openai SDK, and the
provider's reason: the ``refusal`` field (OpenAI; Anthropic's ``stop_details.explanation``, which litellm puts there),
Anthropic's ``stop_reason: refusal``, ``finish_reason: content_filter`` (OpenAI, Azure OpenAI; litellm's mapping of
Anthropic's refusal and of Gemini's prompt blocks and SAFETY/RECITATION/PROHIBITED_CONTENT/BLOCKLIST/SPII finishes), an
HTTP 400 content-policy error (OpenAI's ``content_policy_violation``, Azure's ``content_filter`` with
``ResponsibleAIPolicyViolation``, litellm's ``ContentPolicyViolationError``), and a plain-text refusal."""

import re
import sys
from typing import Any

CONTENT_FILTER = "content_filter"  # litellm's (and OpenAI's) finish_reason for a filtered or refused answer
POLICY_CODES = ("content_policy_violation", "content_filter")  # OpenAI's and Azure OpenAI's 400 error codes
AZURE_POLICY_INNER_CODE = "ResponsibleAIPolicyViolation"

# No library fits: the refusal detectors we know of (promptfoo's, garak's) are English phrase lists inside evaluation
# tools, and a classifier would need a model. So: the openings of a refusal, in the benchmark's main languages.
REFUSAL_OPENINGS = (
    # en
    "i can't", "i cannot", "i can not", "i'm sorry", "i am sorry", "sorry, ", "i'm unable", "i am unable",
    "i won't", "i will not", "i'm not able to", "i am not able to", "i apologize", "as an ai",
    # de, fr, es, pt, it
    "es tut mir leid", "entschuldigung", "ich kann nicht", "ich kann dabei nicht", "leider kann ich",
    "je suis désolé", "désolé", "je ne peux pas", "lo siento", "no puedo", "lo lamento",
    "desculpe", "sinto muito", "não posso", "mi dispiace", "non posso",
    # ar, hi, zh, ru, tr, id
    "عذرًا", "عذرا", "آسف", "لا أستطيع", "माफ़ कीजिए", "क्षमा करें", "मैं इसमें मदद नहीं कर सकता",
    "抱歉", "对不起", "很抱歉", "我不能", "我无法", "извините", "к сожалению, я не могу", "я не могу",
    "üzgünüm", "maaf, saya tidak",
)
_LEAD = re.compile(r"^[\s\"'“”„«»*_#>`-]+")


def _get(obj: Any, key: str) -> Any:
    """A field of a litellm or openai SDK object (attribute, or an extra field the SDK keeps aside), or of a dict."""
    if isinstance(obj, dict):
        return obj.get(key)
    value = getattr(obj, key, None)
    if value is None:
        value = (getattr(obj, "model_extra", None) or {}).get(key)
    return value


def _filtered(results: Any) -> str:
    """'violence (medium), sexual (high)': the categories a content filter result marks as filtered."""
    if not isinstance(results, dict):
        return ""
    return ", ".join(f"{name} ({r.get('severity') or 'detected'})" for name, r in results.items()
                     if isinstance(r, dict) and r.get("filtered"))


def response_refusal(response: Any) -> str:
    """The provider's reason when its answer (a litellm ModelResponse or an openai ChatCompletion) says the model
    declined or its content filter stopped it, else ''. The answer's text is not read: see text_refusal."""
    choices = _get(response, "choices") or []
    if not choices:
        return ""
    choice = choices[0]
    message = _get(choice, "message")
    refusal = _get(message, "refusal")
    if refusal:
        return str(refusal)
    fields = _get(message, "provider_specific_fields") or {}
    if fields.get("stop_reason") == "refusal":  # Anthropic, also where litellm's JSON mode reported finish "stop"
        details = fields.get("stop_details") or {}
        said = "; ".join(str(details[k]) for k in ("category", "explanation") if details.get(k))
        return "stop_reason refusal" + (f": {said}" if said else "")
    if _get(choice, "finish_reason") != CONTENT_FILTER:
        return ""
    results = _get(choice, "content_filter_results") or (_get(choice, "provider_specific_fields") or {}).get(
        "content_filter_results")
    provider = (getattr(response, "_hidden_params", None) or {}).get("custom_llm_provider")
    # Gemini's blockReason / finishReason name is not passed on by litellm: only its mapping to content_filter
    detail = _filtered(results) or (f"{provider} gave no reason" if provider else "")
    return f"finish_reason {CONTENT_FILTER}" + (f": {detail}" if detail else "")


def error_refusal(error: BaseException) -> str:
    """The provider's reason when a request failed because its content policy refused the prompt (an HTTP 400 from
    OpenAI or Azure OpenAI, litellm's ContentPolicyViolationError), else ''."""
    litellm = sys.modules.get("litellm")  # an error can only be litellm's once litellm is loaded
    policy = litellm is not None and isinstance(error, litellm.ContentPolicyViolationError)
    body = getattr(error, "body", None)
    body = body.get("error", body) if isinstance(body, dict) else {}
    body = body if isinstance(body, dict) else {}
    fields = getattr(error, "provider_specific_fields", None) or {}
    inner = body.get("innererror") or body.get("inner_error") or fields.get("innererror") or {}
    inner = inner if isinstance(inner, dict) else {}
    if not policy and getattr(error, "status_code", None) == 400:
        policy = body.get("code") in POLICY_CODES or inner.get("code") == AZURE_POLICY_INNER_CODE
    if not policy:
        return ""
    message = str(body.get("message") or getattr(error, "message", "") or error)
    filtered = _filtered(inner.get("content_filter_result") or inner.get("content_filter_results"))
    return message + (f" (filtered: {filtered})" if filtered else "")


def text_refusal(text: str) -> str:
    """The refusal a plain-text answer opens with ('I'm sorry, but I can't ...', 'Es tut mir leid ...'), else ''.
    Only for an answer that is not the JSON asked for: a valid answer that happens to start so is an answer."""
    opening = _LEAD.sub("", text or "").replace("’", "'").casefold()
    if any(opening.startswith(o) for o in REFUSAL_OPENINGS):
        return " ".join(_LEAD.sub("", text).split())[:200]
    return ""
