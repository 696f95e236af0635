"""The fact-check article as a member's evidence: whole when it fits the member's share of its context window,
else its end (where the verdict's reasoning sits) and its parts most relevant to the claim, with the cuts recorded."""

import os
import re
from pathlib import Path

from assets.rules.once import once
from dagster_project.stage_settings import EvidenceSettings
from dagster_project.resources.llm import LLMResource, _import_litellm
from dagster_project.resources.local_llm import DEFAULT_N_CTX
from schemas.records import Article, EvidenceCut

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


def evidence_budgets(llm: LLMResource, evidence: EvidenceSettings) -> dict[str, int]:
    """Tokens of article each member reads: a share of its context window; the embedded demo model reads little."""
    budgets = {}
    for m in llm.members:
        tokens = int(context_window(llm, m.name) * evidence.evidence_context_share)
        budgets[m.name] = min(tokens, evidence.evidence_tokens_embedded) if m.is_embedded else tokens
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
