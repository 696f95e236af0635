"""``veritas plan --quarter Q``: the calls, tokens and cost of stages 5-7 and the jobs before they run.

The prompts are rendered from the quarter's upstream tables exactly as the stages render them (so their length is
the real one), counted at 4 characters a token, and priced with each member's price (its own override, else
litellm's bundled map). Completion tokens are the average of earlier answers to the same prompt in the ledger, or
the member's ``max_tokens`` (an upper bound) when the ledger has none. Where a stage's own input is not there yet,
its calls are the upper bound its upstream allows: every claim survives, every rating runs.
"""

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field

CHARS_PER_TOKEN = 4  # a rough, model-independent count: tokenizers are not shipped for every provider
IMAGE_TOKENS = 1000  # what one image costs a vision member, roughly (providers price 85-1,600 per image)
MODEL_STAGES = ("normalized_claims", "scored_claims", "rectified_claims", "predictions", "evaluation")


@dataclass
class Estimate:
    """Calls and tokens of one stage, per member."""

    stage: str
    basis: str  # which table the numbers come from, or that they are an upper bound
    calls: dict = field(default_factory=lambda: defaultdict(int))
    prompt_tokens: dict = field(default_factory=lambda: defaultdict(int))
    completion_tokens: dict = field(default_factory=lambda: defaultdict(int))

    def add(self, member: str, prompt_tokens: int, completion_tokens: int, n: int = 1) -> None:
        self.calls[member] += n
        self.prompt_tokens[member] += n * prompt_tokens
        self.completion_tokens[member] += n * completion_tokens


def message_tokens(messages: list[dict], images: int = 0) -> int:
    chars = sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))
    return chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS


class Planner:
    """Renders each stage's prompts from the tables it would read and counts them per member."""

    def __init__(self, llm, pipeline, completion_history: dict[str, float]):
        from assets.ensemble import evidence_budgets, media_context, member_evidence
        from prompts import render

        self.llm, self.pipeline, self.history = llm, pipeline, completion_history
        self._render, self._media_context, self._member_evidence = render, media_context, member_evidence
        self.budgets = evidence_budgets(llm, pipeline)  # each member's article budget, as the stages fit it

    def completion(self, member: str, template: str) -> int:
        seen = self.history.get(template)
        return int(round(seen)) if seen is not None else self.llm.member(member).max_tokens

    def ask(self, est: Estimate, member: str, template: str, media=(), n: int = 1, **inputs) -> None:
        messages = self._render(template, media=self._media_context(list(media)), **inputs)
        images = sum(1 if m.kind == "image" else max(1, len(m.frame_paths)) for m in media)
        prompt = message_tokens(messages, images if self.llm.is_vision(member) else 0)
        est.add(member, prompt, self.completion(member, template), n)

    def evidence(self, article, claim: str) -> dict[str, str]:
        """Each member's evidence, fitted to its token budget exactly as scored_claims and rectified_claims fit it."""
        return self._member_evidence(article, claim, self.budgets)[0]

    # ---- stages ------------------------------------------------------------------------------
    def normalize(self, claims, articles) -> Estimate:
        est = Estimate("normalized_claims", f"{len(claims)} appearances rows")
        first = self.llm.member_names()[0]
        for c in claims:
            article = articles.get(c.review_id)
            for m in c.media:
                self.ask(est, first, "media_filter", media=[m], claim=c.claim_text, kind=m.kind, alt=m.alt,
                         caption=m.caption, origin=m.origin, source=m.source_url)
            self.ask(est, first, "normalize_claim", media=c.media[: self.pipeline.max_media], claim=c.claim_text,
                     title=c.title or (article.title if article else ""), language=c.language,
                     claim_date=str(c.claim_date or ""), max_words=self.pipeline.max_words,
                     max_sentences=self.pipeline.max_sentences)
        return est

    def rate(self, est: Estimate, text: str, media, language: str, claim_date: str, evidence: dict[str, str]) -> None:
        """Every rating of one claim by every member: media, veracity and coverage (the upper bound)."""
        for member in self.llm.member_names():
            base = {"claim": text, "language": language, "claim_date": claim_date, "evidence": evidence[member]}
            for i, m in enumerate(media):
                self.ask(est, member, "rate_media", media=media, medium_kind=m.kind, medium_index=i, **base)
            for prop in ("veracity", "context_coverage"):
                self.ask(est, member, "rate_claim", media=media, property=prop, **base)

    def expected_rate(self, est: Estimate, claim, evidence: dict[str, str]) -> None:
        """The ratings stage 6 will ask of one claim, as its fact-checker's rating predicts them: every medium; then
        veracity unless the rating says the media are out of context (their contextualization decides first); then
        context coverage only where veracity will come out positive (a claim rated true)."""
        from assets.claims.ratings import rated_out_of_context, rating_category

        media, date = claim.media, str(claim.claim_date or "")
        for member in self.llm.member_names():
            base = {"claim": claim.text, "language": claim.language, "claim_date": date, "evidence": evidence[member]}
            for i, m in enumerate(media):
                self.ask(est, member, "rate_media", media=media, medium_kind=m.kind, medium_index=i, **base)
            if media and rated_out_of_context(claim.rating_text):
                continue
            self.ask(est, member, "rate_claim", media=media, property="veracity", **base)
            if rating_category(claim.rating_text, False) == "intact":
                self.ask(est, member, "rate_claim", media=media, property="context_coverage", **base)

    def score(self, claims, articles, basis: str) -> Estimate:
        est = Estimate("scored_claims", basis)
        for c in claims:
            self.expected_rate(est, c, self.evidence(articles.get(c.review_id), c.text))
        return est

    def to_rewrite(self, scored) -> tuple[list, str]:
        """The Compromised claims stage 7 will rewrite: all of them (rectify: all), or on demand the ones the release
        lacks as Intact variants (DemandPlan), over the success rate a rewrite is expected to have."""
        from assets.release.demand import DemandPlan

        compromised = [c for c in scored if c.integrity.label == "compromised"]
        if self.pipeline.rectify == "all":
            return compromised, f"all {len(compromised)} Compromised"
        demand = DemandPlan(scored, self.pipeline)
        needed = demand.needed([], demand.candidates)
        n = min(len(demand.candidates), math.ceil(needed / REWRITE_SUCCESS))
        return demand.candidates[:n], (f"on demand: {needed} variants lacking of {len(compromised)} Compromised, "
                                       f"{n} rewrites at {REWRITE_SUCCESS:.0%} holding")

    def rectify(self, claims, articles, basis: str) -> Estimate:
        est = Estimate("rectified_claims", basis)
        first = self.llm.member_names()[0]
        for c in claims:
            evidence = self.evidence(articles.get(c.review_id), c.text)
            common = {"media": c.media, "language": c.language, "claim_date": str(c.claim_date or ""),
                      "evidence": evidence[first]}
            self.ask(est, first, "rectify_claim", claim=c.text, decisive_property="veracity", justification="",
                     max_words=self.pipeline.max_words, max_sentences=self.pipeline.max_sentences, **common)
            self.ask(est, first, "check_rectified", original=c.text, claim=c.text, **common)
            self.rate(est, c.text, c.media, c.language, common["claim_date"], evidence)
        return est

    def jobs(self, n_claims: int) -> list[Estimate]:
        """Predictions and the evaluation's judge over the release: per-claim call counts of the verifier's mode,
        with the ledger's or a typical prompt length (the knowledge store is not read here)."""
        p = self.pipeline
        member = p.verifier_member or self.llm.member_names()[0]
        n = min(n_claims, p.release_size)
        if p.verifier_mode == "closed_book":
            per_claim = {"verifier_answer": 1}
        else:
            plans = {"parallel": 1, "dynamic": p.verifier_questions,
                     "hybrid": 1 + max(0, p.verifier_questions - p.verifier_parallel_questions)}[p.verifier_strategy]
            per_claim = {"verifier_questions": plans, "verifier_answer": p.verifier_questions + 1}
        pred = Estimate("predictions", f"{n} release claims, {p.verifier_mode}")
        # the evaluation asset scores predictions without a model; only its contamination check asks one (the LLM
        # judge is `veritas evaluate --judge-member`'s, outside the quarter's run)
        evaluation = Estimate("evaluation", f"{n} release claims, contamination check" if p.contamination_check else
                              "no model calls (no contamination check)")
        typical = 1500  # tokens of a verifier prompt with its evidence, when the ledger has seen none
        for template, calls in per_claim.items():
            pred.add(member, int(self.history.get(f"prompt:{template}", typical)), self.completion(member, template),
                     n * calls)
        if p.contamination_check:
            for template in ("verifier_article", "verifier_statements"):
                evaluation.add(member, int(self.history.get(f"prompt:{template}", typical)),
                               self.completion(member, template), n)
        return [pred, evaluation]


# the share of rewrites that hold (checked consistent and shareable, re-scored Intact): 1,459 of 1,714 on the
# rehearsal of 2026-12-01 (bench/rehearsal.py, simulated panel)
REWRITE_SUCCESS = 0.85
EXPECTED_SCORE = {"intact": 1.0, "unknown": 0.0, "compromised_veracity": -1.0, "compromised_ooc": -1.0}


def expected_scored(claim):
    """A normalized claim as stage 6 is expected to score it: its fact-checker's rating's category."""
    from assets.claims.ratings import rated_out_of_context, rating_category
    from schemas.records import Integrity, ScoredClaim

    category = rating_category(claim.rating_text, bool(claim.media) and rated_out_of_context(claim.rating_text))
    label = "compromised" if category.startswith("compromised") else category
    decisive = "contextualization" if category == "compromised_ooc" else "veracity"
    return ScoredClaim(**claim.model_dump(), integrity=Integrity(score=EXPECTED_SCORE[category],
                                                                 decisive_property=decisive, label=label))


def ledger_history(llm) -> dict[str, float]:
    """Average completion tokens (and ``prompt:<template>`` prompt tokens) per template over paid calls so far."""
    with llm._db() as conn:
        rows = conn.execute(
            "SELECT template_id, AVG(completion_tokens), AVG(prompt_tokens) FROM llm_ledger"
            " WHERE cache_hit = 0 AND error IS NULL AND completion_tokens > 0 GROUP BY template_id").fetchall()
    out: dict[str, float] = {}
    for template, completion, prompt in rows:
        out[template] = float(completion)
        out[f"prompt:{template}"] = float(prompt)
    return out


def prices(llm) -> dict[str, tuple[float | None, float | None]]:
    """USD per token (input, output) per member: its override, else litellm's bundled map; the embedded model is free."""
    from dagster_project.resources.llm import _import_litellm

    out = {}
    for m in llm.members:
        info: dict = {}
        if m.is_embedded:
            info = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}
        elif m.input_cost_per_token is None or m.output_cost_per_token is None:
            try:
                info = dict(_import_litellm().get_model_info(model=m.model))
            except Exception:  # noqa: BLE001 - a model missing from the map: its price is unknown
                info = {}
        out[m.name] = (m.input_cost_per_token if m.input_cost_per_token is not None else info.get("input_cost_per_token"),
                       m.output_cost_per_token if m.output_cost_per_token is not None else info.get("output_cost_per_token"))
    return out


def build_plan(llm, pipeline, store, quarter: str, before_stage_5: bool = False) -> dict:
    """The estimate for one quarter from whatever upstream tables it has (``before_stage_5``: from stages 1-4's
    only, as it read before any model call), plus the ledger's earlier quarters."""
    from assets.common import load_upstream
    from schemas.records import Article, ClaimAppearances, NormalizedClaim, ScoredClaim

    def table(name, model):
        return load_upstream(store, name, quarter, model, []) if store.latest_version(name, quarter) else None

    appearances = table("appearances", ClaimAppearances)
    if appearances is None:
        raise FileNotFoundError(f"no appearances table for {quarter}: run `veritas run --quarter {quarter} --until "
                                "appearances` first (stages 1-4 make no model calls)")
    articles = {a.review_id: a for a in table("articles", Article) or []}
    planner = Planner(llm, pipeline, ledger_history(llm))
    normalized = None if before_stage_5 else table("normalized_claims", NormalizedClaim)
    scored = None if before_stage_5 else table("scored_claims", ScoredClaim)
    if normalized is None:  # every appearance becomes a claim, with the media of the post itself (stage 5 drops
        # the article's own images: the fact-checker's graphics and stamps)
        claims = [NormalizedClaim(claim_id=c.review_id, review_id=c.review_id, quarter=quarter, text=c.claim_text,
                                  original_text=c.claim_text, normalization="original", language=c.language,
                                  claim_date=c.claim_date, review_url=c.review_url, rating_text=c.rating_text,
                                  media=[m for m in c.media if m.origin == "appearance"][: pipeline.max_media])
                  for c in appearances if c.claim_text]
        basis6 = f"all {len(claims)} appearances rows kept by stage 5, questions as their ratings predict"
    else:
        claims, basis6 = normalized, f"{len(normalized)} normalized_claims rows"
    if scored is None:  # each claim labelled as its fact-checker's rating predicts
        scored, source = [expected_scored(c) for c in claims], f"{len(claims)} claims labelled by their ratings"
    else:
        source = f"{len(scored)} scored_claims rows"
    compromised, how = planner.to_rewrite(scored)
    basis7 = f"{source}; {how}"
    estimates = [planner.normalize(appearances, articles), planner.score(claims, articles, basis6),
                 planner.rectify(compromised, articles, basis7), *planner.jobs(len(claims))]
    price = prices(llm)
    stages = []
    for est in estimates:
        members = {}
        for member in llm.member_names():
            pin, pout = price[member]
            pt, ct = est.prompt_tokens[member], est.completion_tokens[member]
            cost = None if est.calls[member] and (pin is None or pout is None) else pt * (pin or 0) + ct * (pout or 0)
            members[member] = {"calls": est.calls[member], "prompt_tokens": pt, "completion_tokens": ct,
                               "cost_usd": cost}
        known = [v["cost_usd"] for v in members.values() if v["cost_usd"] is not None]
        stages.append({"stage": est.stage, "basis": est.basis, "by_member": members,
                       "calls": sum(v["calls"] for v in members.values()),
                       "prompt_tokens": sum(v["prompt_tokens"] for v in members.values()),
                       "completion_tokens": sum(v["completion_tokens"] for v in members.values()),
                       "cost_usd": sum(known), "cost_complete": len(known) == len(members)})
    ledger = llm.ledger_report()
    earlier = []
    for q in ledger["quarters_in_ledger"]:
        r = llm.ledger_report(q) if q else None
        if r is not None:
            earlier.append({"quarter": q, "calls": r["calls"], "model_calls": r["model_calls"], "cost_usd": r["cost_usd"],
                            "by_stage": {s: v["cost_usd"] for s, v in r["by_stage"].items()}})
    return {"quarter": quarter, "stages": stages,
            "total": {"calls": sum(s["calls"] for s in stages), "cost_usd": sum(s["cost_usd"] for s in stages),
                      "cost_complete": all(s["cost_complete"] for s in stages)},
            "budget_usd": llm.budget_usd, "already_spent_usd": llm.quarter_spend(),
            "prices_per_m": {m: [None if p is None else p * 1e6 for p in v] for m, v in price.items()},
            "earlier_quarters": earlier,
            "note": "prompt tokens are rendered prompts / 4 chars (+1,000 per image for vision members); calls already "
                    "in the cache are counted, so a resumed quarter costs less"}


def format_plan(plan: dict) -> str:
    lines = [f"Plan for {plan['quarter']} (estimate; {plan['note']})", "",
             f"{'stage':<18}{'calls':>9}{'prompt tok':>13}{'compl. tok':>12}{'cost USD':>12}  basis"]
    for s in plan["stages"]:
        cost = f"{s['cost_usd']:.4f}" + ("" if s["cost_complete"] else "+?")
        lines.append(f"{s['stage']:<18}{s['calls']:>9,}{s['prompt_tokens']:>13,}{s['completion_tokens']:>12,}"
                     f"{cost:>12}  {s['basis']}")
    total = plan["total"]
    lines.append(f"{'total':<18}{total['calls']:>9,}{'':>25}{total['cost_usd']:>12.4f}"
                 + ("" if total["cost_complete"] else "  (some member has no known price)"))
    lines.append("")
    for member, (pin, pout) in plan["prices_per_m"].items():
        fmt = lambda v: "?" if v is None else f"{v:.3f}"  # noqa: E731
        lines.append(f"  {member}: ${fmt(pin)} / ${fmt(pout)} per million input / output tokens")
    if plan["budget_usd"] is not None:
        left = plan["budget_usd"] - plan["already_spent_usd"]
        lines.append(f"  budget: llm.budget_usd={plan['budget_usd']:.2f}, spent {plan['already_spent_usd']:.4f}, "
                     f"left {left:.4f}" + ("  <- the estimate exceeds it" if total["cost_usd"] > left else ""))
    lines.append("")
    if plan["earlier_quarters"]:
        lines.append("Actual cost of earlier quarters (ledger):")
        for q in plan["earlier_quarters"]:
            stages = ", ".join(f"{k}={v:.4f}" for k, v in q["by_stage"].items())
            lines.append(f"  {q['quarter']}: {q['calls']:,} calls ({q['model_calls']:,} paid), "
                         f"${q['cost_usd']:.4f}  [{stages}]")
    else:
        lines.append("Actual cost of earlier quarters: none in the ledger yet")
    return "\n".join(lines)


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser(
        "plan", help="estimate the calls, tokens and cost of stages 5-7 and the jobs for a quarter before they run")
    p.add_argument("--quarter", required=True, help="e.g. 2025Q4 (or 2025-10); stages 1-4 must have run")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(handler=run)
    return [p]


def run(args) -> int:
    from dagster_project.config import PipelineResource, load_config
    from dagster_project.partitions import to_label
    from dagster_project.resources.llm import LLMResource
    from dagster_project.resources.store import StoreResource

    try:
        config = load_config(getattr(args, "config", None))
        quarter = to_label(args.quarter)
        llm = LLMResource(**config["llm"])
        llm.set_quarter(quarter)
        plan = build_plan(llm, PipelineResource(**config["stages"]), StoreResource(**config["store"]), quarter)
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
    return 0
