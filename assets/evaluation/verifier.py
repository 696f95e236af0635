"""The retrieval verifier baseline in the AVerImaTeC design: questions, tools, answers, verdict, justification.

1. Question generation, with few-shot examples chosen by BM25 from training data (claims and the questions
   fact-checkers asked): ``parallel`` (all questions at once), ``dynamic`` (one at a time, each seeing the
   answers so far) or ``hybrid`` (a first batch in parallel, then dynamic follow-ups).
2. Each question names a tool: ``text_search``, ``image_search``, ``reverse_image_search`` or ``vqa``.  Tools are
   pluggable backends (``ToolBackend``: any callable ``(ToolRequest) -> ToolResult``); the offline defaults
   search a ``KnowledgeStore`` and ask the backbone about the claim's own image.
3. An answer per question from the retrieved evidence (the backbone again).
4. The verdict: the four properties rated by the backbone with the QA pairs as evidence (the raters' prompts),
   the integrity score from them, and the decisive property's justification.

**Temporal guard**: every search filters on the claim date before ranking (``knowledge.admissible``), and the
verifier re-checks every hit it keeps, so no evidence dated after the claim date is ever used; undated evidence
is excluded unless ``allow_undated``.  The backbone is any litellm model of the LLM resource.
"""

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from assets.ensemble.asking import ask
from assets.ensemble.scoring import integrity_of, rate, verdicts_from
from assets.evaluation.knowledge import Hit, KnowledgeStore, admissible
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from schemas.records import (
    Evidence,
    Medium,
    NormalizedClaim,
    PredictedMedium,
    PredictedQA,
    Prediction,
)

STAGE = "predictions"
TOOL_NAMES = ("text_search", "image_search", "reverse_image_search", "vqa")
TOOL_DESCRIPTIONS = {
    "text_search": "web text search with a keyword query; returns dated passages",
    "image_search": "image search with a keyword query; returns images and the pages that show them",
    "reverse_image_search": "finds earlier copies of one of the claim's images and where they appeared",
    "vqa": "looks at one of the claim's images and answers a question about what it shows",
}
STRATEGIES = ("parallel", "dynamic", "hybrid")
NO_ANSWER = "No answer could be found."
DEFAULT_FEWSHOT = Path(__file__).resolve().parents[2] / "prompts" / "verifier_fewshot.json"


# ---------------------------------------------------------------------------------- answer schemas


class PlannedQuestion(BaseModel):
    question: str = Field(min_length=1)
    tool: Literal["text_search", "image_search", "reverse_image_search", "vqa"]
    query: str = ""
    medium_index: int = -1


class QuestionPlan(BaseModel):
    questions: list[PlannedQuestion] = Field(min_length=1, max_length=10)


class QuestionAnswer(BaseModel):
    answer: str
    answerable: bool
    source: int = -1


# ----------------------------------------------------------------------------------------- few-shot


class FewShotPool:
    """Training claims with the questions asked about them; ``select`` returns the BM25-nearest ones."""

    def __init__(self, examples: list[dict]):
        self.examples = [e for e in examples if e.get("claim") and e.get("questions")]
        self._index = None

    @classmethod
    def load(cls, path: str | Path | None = None) -> "FewShotPool":
        """Our compact pool (``{"examples": [{claim, questions: [{question, tool}]}]}``) or an AVeriTeC/AVerImaTeC
        training file (a list of ``{claim, questions: [{question, answers: [...]}]}``)."""
        raw = json.loads(Path(path or DEFAULT_FEWSHOT).read_text(encoding="utf-8"))
        records = raw["examples"] if isinstance(raw, dict) else raw
        examples = []
        for r in records:
            questions = []
            for q in r.get("questions") or []:
                tool = q.get("tool")
                if tool not in TOOL_NAMES:
                    media = {a.get("source_medium") for a in q.get("answers") or []}
                    tool = "image_search" if "Image/graphic" in media else "text_search"
                questions.append({"question": str(q.get("question", "")).strip(), "tool": tool})
            examples.append({"claim": r.get("claim", ""), "questions": [q for q in questions if q["question"]]})
        return cls(examples)

    def select(self, claim_text: str, k: int = 3) -> list[dict]:
        if k <= 0 or not self.examples:
            return []
        import bm25s
        import numpy as np

        if self._index is None:
            self._index = bm25s.BM25()
            self._index.index(bm25s.tokenize([e["claim"] for e in self.examples], return_ids=False,
                                             show_progress=False, stopwords="english"), show_progress=False)
        tokens = bm25s.tokenize([claim_text], return_ids=False, show_progress=False, stopwords="english")
        if not tokens or not tokens[0]:
            return self.examples[:k]
        docs, _scores = self._index.retrieve(tokens, k=min(k, len(self.examples)), show_progress=False)
        order = [int(d) for d in np.asarray(docs[0])]
        return [self.examples[i] for i in order]


# -------------------------------------------------------------------------------------------- tools


@dataclass
class ToolRequest:
    question: str
    query: str
    claim: NormalizedClaim
    medium: Medium | None = None
    exclude_urls: frozenset = frozenset()


@dataclass
class ToolResult:
    hits: list[Hit] = field(default_factory=list)
    rejected: dict = field(default_factory=dict)  # reason -> count withheld by the temporal guard
    answer: str = ""  # a tool that answers directly (VQA) fills this instead of hits


ToolBackend = Callable[[ToolRequest], ToolResult]


Reranker = Callable[[str, list[Hit]], list[Hit]]


class LocalTextSearch:
    """Web text search, offline: BM25 over the knowledge store's dated passages.

    ``reranker(query, hits) -> hits`` (e.g. a dense embedding model) reorders the ``candidates`` best BM25 hits,
    which the temporal guard has already filtered, before the top ``k`` are kept.
    """

    def __init__(self, store: KnowledgeStore, k: int = 5, allow_undated: bool = False,
                 reranker: Reranker | None = None, candidates: int = 20):
        self.store, self.k, self.allow_undated = store, k, allow_undated
        self.reranker, self.candidates = reranker, candidates

    def __call__(self, req: ToolRequest) -> ToolResult:
        query = req.query or req.question
        depth = max(self.k, self.candidates) if self.reranker else self.k
        hits, rejected = self.store.text_search(query, req.claim.claim_date, depth, self.allow_undated,
                                                req.exclude_urls)
        if self.reranker is not None:
            hits = self.reranker(query, hits)
        return ToolResult(hits[: self.k], rejected)


class LocalImageSearch:
    """Image search, offline: BM25 over the text around the knowledge store's images."""

    def __init__(self, store: KnowledgeStore, k: int = 3, allow_undated: bool = False):
        self.store, self.k, self.allow_undated = store, k, allow_undated

    def __call__(self, req: ToolRequest) -> ToolResult:
        hits, rejected = self.store.image_search(req.query or req.question, req.claim.claim_date, self.k,
                                                 self.allow_undated, req.exclude_urls)
        return ToolResult(hits, rejected)


class LocalReverseImageSearch:
    """Reverse image search, offline: perceptual-hash neighbours of the claim's image in the knowledge store."""

    def __init__(self, store: KnowledgeStore, media_store: MediaStore | None, k: int = 3, max_distance: int = 10,
                 allow_undated: bool = False):
        self.store, self.media_store, self.k = store, media_store, k
        self.max_distance, self.allow_undated = max_distance, allow_undated

    def __call__(self, req: ToolRequest) -> ToolResult:
        if req.medium is None or req.medium.kind != "image" or self.media_store is None:
            return ToolResult()
        data = self.media_store.read(req.medium.path)
        hits, rejected = self.store.reverse_image_search(data, req.claim.claim_date, self.k, self.max_distance,
                                                         self.allow_undated, req.exclude_urls)
        return ToolResult(hits, rejected)


class BackboneVQA:
    """Visual question answering by the backbone on the claim's own medium (no outside evidence, so no date)."""

    def __init__(self, llm: LLMResource, member: str, media_store: MediaStore | None):
        self.llm, self.member, self.media_store = llm, member, media_store

    def __call__(self, req: ToolRequest) -> ToolResult:
        if req.medium is None:
            return ToolResult()
        index = next((i for i, m in enumerate(req.claim.media) if m is req.medium), 0)
        answer = ask(self.llm, self.member, "verifier_vqa", QuestionAnswer, stage=STAGE, media=[req.medium],
                     media_store=self.media_store, **_claim_inputs(req.claim), question=req.question,
                     medium_kind=req.medium.kind, medium_index=index)
        if answer.parsed is None or not answer.parsed["answerable"]:
            return ToolResult()
        return ToolResult(answer=answer.parsed["answer"])


def default_backends(store: KnowledgeStore, llm: LLMResource, member: str, media_store: MediaStore | None,
                     k: int = 5, allow_undated: bool = False, tools=TOOL_NAMES) -> dict[str, ToolBackend]:
    """The offline tool set; replace any entry with a live backend (same call signature) to search the web."""
    all_tools = {
        "text_search": LocalTextSearch(store, k, allow_undated),
        "image_search": LocalImageSearch(store, max(1, k // 2), allow_undated),
        "reverse_image_search": LocalReverseImageSearch(store, media_store, max(1, k // 2), allow_undated=allow_undated),
        "vqa": BackboneVQA(llm, member, media_store),
    }
    return {name: all_tools[name] for name in tools if name in all_tools}


# ----------------------------------------------------------------------------------------- verifier


def _claim_inputs(claim: NormalizedClaim) -> dict:
    return {"claim": claim.text, "language": claim.language, "claim_date": str(claim.claim_date or "")}


def qa_evidence_text(qa: list[PredictedQA]) -> str:
    """The QA pairs as the raters' evidence block."""
    lines = []
    for i, item in enumerate(qa, 1):
        sources = ", ".join(f"{u} ({d or 'undated'})" for u, d in zip(item.urls, item.published))
        lines.append(f"Q{i} [{item.tool}]: {item.question}\nA{i}: {item.answer}" + (f"\nSources: {sources}" if sources else ""))
    return "\n".join(lines)


@dataclass
class Verifier:
    """Questions -> tools -> answers -> verdict, for one backbone member."""

    llm: LLMResource
    member: str
    backends: dict[str, ToolBackend]
    media_store: MediaStore | None = None
    fewshot: FewShotPool | None = None
    strategy: str = "parallel"
    n_questions: int = 5
    n_parallel: int = 2  # hybrid: the first batch
    n_shots: int = 3
    allow_undated: bool = False

    def __post_init__(self):
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown question strategy {self.strategy!r}; use one of {', '.join(STRATEGIES)}")

    @property
    def system(self) -> str:
        return f"retrieval-{self.strategy}:{self.member}"

    def _tools_for(self, claim: NormalizedClaim) -> list[dict]:
        names = [n for n in TOOL_NAMES if n in self.backends]
        if not claim.media:  # image tools need an image
            names = [n for n in names if n not in ("reverse_image_search", "vqa")]
        return [{"name": n, "description": TOOL_DESCRIPTIONS[n]} for n in names]

    def plan(self, claim: NormalizedClaim, n: int, previous: list[PredictedQA], examples: list[dict]) -> list[PlannedQuestion]:
        tools = self._tools_for(claim)
        answer = ask(self.llm, self.member, "verifier_questions", QuestionPlan, stage=STAGE, media=claim.media,
                     media_store=self.media_store, **_claim_inputs(claim), tools=tools, examples=examples,
                     previous=[q.model_dump() for q in previous], n=n)
        if answer.parsed is None:
            return []
        allowed = {t["name"] for t in tools}
        planned = [PlannedQuestion.model_validate(q) for q in answer.parsed["questions"]]
        asked = {q.question.strip().lower() for q in previous}
        out = []
        for q in planned:
            if q.question.strip().lower() in asked:
                continue  # repeated questions are a known failure of dynamic generation: skip, do not re-answer
            asked.add(q.question.strip().lower())
            out.append(q if q.tool in allowed else q.model_copy(update={"tool": "text_search"}))
        return out[:n]

    def answer(self, claim: NormalizedClaim, q: PlannedQuestion) -> tuple[PredictedQA, int]:
        """One question through its tool, then the backbone's answer; returns the QA and the guard's rejections."""
        backend = self.backends.get(q.tool) or self.backends.get("text_search")
        medium = None
        if claim.media:
            medium = claim.media[q.medium_index] if 0 <= q.medium_index < len(claim.media) else claim.media[0]
        req = ToolRequest(q.question, q.query, claim, medium, frozenset({claim.review_url}))
        result = backend(req) if backend is not None else ToolResult()
        rejected = sum(result.rejected.values())
        hits = []
        for h in result.hits:  # the second line of the guard: a backend that forgot to filter is caught here
            ok, _ = admissible(h.published, claim.claim_date, self.allow_undated)
            if ok and h.url != claim.review_url:
                hits.append(h)
            else:
                rejected += 1
        if result.answer:
            return PredictedQA(question=q.question, tool=q.tool, query=q.query, answer=result.answer), rejected
        if not hits:
            return PredictedQA(question=q.question, tool=q.tool, query=q.query, answer=NO_ANSWER), rejected
        answer = ask(self.llm, self.member, "verifier_answer", QuestionAnswer, stage=STAGE, media=claim.media,
                     media_store=self.media_store, **_claim_inputs(claim), question=q.question,
                     hits=[{"url": h.url, "published": h.published, "text": h.text[:1200]} for h in hits])
        if answer.parsed is None or not answer.parsed["answerable"]:
            return PredictedQA(question=q.question, tool=q.tool, query=q.query, answer=NO_ANSWER), rejected
        src = answer.parsed.get("source", -1)
        used = [hits[src]] if 0 <= src < len(hits) else hits[:1]
        return PredictedQA(question=q.question, tool=q.tool, query=q.query, answer=answer.parsed["answer"],
                           urls=[h.url for h in used], published=[h.published for h in used]), rejected

    def questions_and_answers(self, claim: NormalizedClaim) -> tuple[list[PredictedQA], int]:
        examples = self.fewshot.select(claim.text, self.n_shots) if self.fewshot else []
        qa: list[PredictedQA] = []
        rejected = 0

        def run(batch):
            nonlocal rejected
            for q in batch:
                item, r = self.answer(claim, q)
                qa.append(item)
                rejected += r

        first = {"parallel": self.n_questions, "dynamic": 1, "hybrid": min(self.n_parallel, self.n_questions)}[self.strategy]
        run(self.plan(claim, first, [], examples))
        while self.strategy != "parallel" and len(qa) < self.n_questions:
            batch = self.plan(claim, 1, qa, examples)
            if not batch:
                break  # the model has nothing new to ask
            run(batch)
        return qa, rejected

    def predict(self, claim: NormalizedClaim, release_id: int, release_media_ids: list[int], quarter: str) -> Prediction:
        qa, rejected = self.questions_and_answers(claim)
        ratings, failures = rate(claim, qa_evidence_text(qa), self.llm, [self.member], self.media_store, stage=STAGE)
        verdicts = verdicts_from(claim, ratings)
        decided = integrity_of(verdicts["media_verdicts"], verdicts["veracity"], verdicts["context_coverage"])
        by_medium: dict[int, dict] = {}
        for v in verdicts["media_verdicts"]:
            by_medium.setdefault(v.medium_index, {})[v.property] = v.score
        evidence = [Evidence(url=u, text=item.answer, published=d) for item in qa for u, d in zip(item.urls, item.published)]
        return Prediction(
            claim_id=release_id, quarter=quarter, system=self.system,
            integrity=decided[0].score if decided else None,
            veracity=verdicts["veracity"].score if verdicts["veracity"] else None,
            context_coverage=verdicts["context_coverage"].score if verdicts["context_coverage"] else None,
            media=[PredictedMedium(id=mid, **by_medium.get(i, {})) for i, mid in enumerate(release_media_ids)],
            justification=decided[1].justification if decided else "",
            evidence=evidence, qa=qa, rejected_evidence=rejected,
            error="" if decided else f"no_verdict ({failures} failed answers)",
            created=datetime.now(UTC),
        )


def build_knowledge_store(warc_paths: list[str], articles=(), cache: Path | None = None) -> KnowledgeStore:
    """The offline knowledge store from WARC files (and optionally the articles table), cached as JSON."""
    if cache is not None and cache.exists():
        return KnowledgeStore.load(cache)
    store = KnowledgeStore.from_warc([p for p in warc_paths if Path(p).exists()])
    store.add_articles(articles)
    if cache is not None:
        store.save(cache)
    return store
