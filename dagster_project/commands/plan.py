"""``veritas plan --quarter Q``: the calls, tokens and cost of stages 5-7 and the jobs before they run.

The prompts are rendered from the quarter's upstream tables exactly as the stages render them (so their length is
the real one), counted at 4 characters a token, and priced with each member's price (its own override, else
litellm's bundled map). Completion tokens are the average of earlier answers to the same prompt in the ledger, or
the member's ``max_tokens`` (an upper bound) when the ledger has none. Where a stage's own input is not there yet,
its calls are the upper bound its upstream allows: every claim survives, every rating runs. Stage 7's media
consistency rule (issue 49) is counted per rewrite from the share of its claims whose media carry their wording: read
in stage 5's OCR cache where it has read them, else at the rate measured on the rehearsal (MEDIA_CARRY_RATE), and the
plan says which.
"""

import argparse
import hashlib
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from dagster_project.core.cost_ledger import CHARS_PER_TOKEN, IMAGE_TOKENS

MODEL_STAGES = ("normalized_claims", "scored_claims", "rectified_claims", "predictions", "evaluation")
# Completion tokens of one answer per template before the ledger has any (then its average replaces them): the
# simulated panel's answers on the rehearsal of 2026-12-02 (bench/rehearsal.py), rounded up (media_filter: a claim's
# question about its media, 30.3 on the 1,000-review stage-5 bench of 2026-12-04). A real model's
# justifications run longer; a quarter's first paid answers correct the plan stage by stage.
TYPICAL_COMPLETION = {"media_filter": 31, "normalize_claim": 27, "rate_claim": 35, "rate_media": 78,
                      "rectify_claim": 32, "check_rectified": 10}


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

    def merge(self, other: "Estimate", weight: float = 1.0) -> None:
        """Adds ``other``'s calls and tokens, each times ``weight`` (the chance that they are made)."""
        for member in other.calls:
            self.calls[member] += weight * other.calls[member]
            self.prompt_tokens[member] += weight * other.prompt_tokens[member]
            self.completion_tokens[member] += weight * other.completion_tokens[member]


def message_tokens(messages: list[dict], images: int = 0) -> int:
    chars = sum(len(m["content"]) for m in messages if isinstance(m.get("content"), str))
    return chars // CHARS_PER_TOKEN + images * IMAGE_TOKENS

# the selection's secret order before the store has a key (a plan makes none): any key plans about the same counts
PLAN_KEY = hashlib.sha256(b"veritas plan: no release order key yet").digest()


class Planner:
    """Renders each stage's prompts from the tables it would read and counts them per member."""

    def __init__(self, llm, settings: dict, completion_history: dict[str, float]):
        """``settings``: each stage's settings by resource key, as ``stage_settings`` gives them (a plan reads the
        settings of every model stage and job)."""
        from assets.ensemble.asking import media_context
        from assets.ensemble.evidence import evidence_budgets, member_evidence
        from prompts import render

        self.llm, self.history = llm, completion_history
        self.normalizing, self.claim_rules = settings["normalizing"], settings["claim_rules"]
        self.demand, self.rectifying = settings["demand"], settings["rectifying"]
        self.release_rules, self.verifier = settings["release_rules"], settings["verifier"]
        self.key = PLAN_KEY  # the store's key, where it has one, replaces it (build_plan)
        self.media_text = None  # stage 5's OCR cache, read only (a channels.CachedMediaTexts; build_plan opens it)
        self._carry: dict[str, tuple[float, bool]] = {}  # claim id -> (chance its media carry its wording, read?)
        self.media_figures: dict = {}  # what stage 7's estimate assumed of the media rule (rectify), and in words:
        self.media_note = ""
        self._render, self._media_context, self._member_evidence = render, media_context, member_evidence
        # each member's article budget, as the stages fit it
        self.budgets = evidence_budgets(llm, settings["evidence"])

    def completion(self, member: str, template: str) -> int:
        seen = self.history.get(template)
        if seen is None:
            seen = TYPICAL_COMPLETION.get(template, self.llm.member(member).max_tokens)
        return round(min(seen, self.llm.member(member).max_tokens))

    def ask(self, est: Estimate, member: str, template: str, media=(), n: float = 1, **inputs) -> None:
        messages = self._render(template, media=self._media_context(list(media)), **inputs)
        images = sum(1 if m.kind == "image" else max(1, len(m.frame_paths)) for m in media)
        prompt = message_tokens(messages, images if self.llm.is_vision(member) else 0)
        est.add(member, prompt, self.completion(member, template), n)

    def evidence(self, article, claim: str) -> dict[str, str]:
        """Each member's evidence, fitted to its token budget exactly as scored_claims and rectified_claims fit it."""
        return self._member_evidence(article, claim, self.budgets)[0]

    # ---- stages ------------------------------------------------------------------------------
    def normalize(self, claims, articles) -> Estimate:
        """The media filter's questions (the media no plain rule drops, MEDIA_PER_QUESTION to a question: a later
        question is counted as if the earlier ones left places, an upper bound) and one normalisation per claim, with
        the media stage 6 is expected to see."""
        from assets.claims.normalized_claims import (
            filter_candidates,
            filter_order,
            filter_waves,
        )
        from assets.rules.media_rules import plain_drops

        est = Estimate("normalized_claims", f"{len(claims)} appearances rows")
        first = self.llm.member_names()[0]
        for c in claims:
            article = articles.get(c.review_id)
            plain = plain_drops(c.media, self.claim_rules.near_duplicate_distance,
                                c.language or (article.language if article else ""))
            for wave in filter_waves(c.media, plain):  # each to the member stage 5 draws for the question
                self.ask(est, filter_order(self.llm, c.review_id, [m.medium_id for m in wave])[0], "media_filter",
                         media=wave, claim=c.claim_text, candidates=filter_candidates(wave))
            self.ask(est, first, "normalize_claim", media=self.expected_media(c), claim=c.claim_text,
                     title=c.title or (article.title if article else ""), language=c.language,
                     claim_date=str(c.claim_date or ""), max_words=self.claim_rules.max_words,
                     max_sentences=self.claim_rules.max_sentences)
        return est

    def expected_media(self, claim) -> list:
        """The media stage 5 is expected to keep: the post's own that no plain rule drops, in its order (the
        article's own images are the fact-checker's graphics, stamps and copies of the post's)."""
        from assets.rules.media_rules import plain_drops, preference

        plain = plain_drops(claim.media, self.claim_rules.near_duplicate_distance, claim.language)
        kept = sorted((m for m in claim.media if m.medium_id not in plain and m.origin == "appearance"), key=preference)
        return kept[: self.normalizing.max_media]

    def rate(self, est: Estimate, text: str, media, language: str, claim_date: str, evidence: dict[str, str]) -> None:
        """Every rating of one claim by every member: media, veracity and coverage (the upper bound)."""
        for member in self.llm.member_names():
            base = {"claim": text, "language": language, "claim_date": claim_date, "evidence": evidence[member]}
            for i, m in enumerate(media):
                self.ask(est, member, "rate_media", media=media, medium_kind=m.kind, medium_index=i, **base)
            for prop in ("veracity", "context_coverage"):
                self.ask(est, member, "rate_claim", media=media, property=prop, **base)

    def expected_rate(self, est: Estimate, claim, evidence: dict[str, str], members=None) -> None:
        """The ratings stage 6 will ask of one claim (``claim`` as expected_scored labels it) by each of ``members``
        (the ensemble by default): every medium; then veracity unless its media are out of context (their
        contextualization decides first); then context coverage only where veracity comes out positive (Intact)."""
        media, date = claim.media, str(claim.claim_date or "")
        out_of_context = bool(media) and claim.integrity.decisive_property == "contextualization"
        for member in members or self.llm.member_names():
            base = {"claim": claim.text, "language": claim.language, "claim_date": date, "evidence": evidence[member]}
            for i, m in enumerate(media):
                self.ask(est, member, "rate_media", media=media, medium_kind=m.kind, medium_index=i, **base)
            if out_of_context:
                continue
            self.ask(est, member, "rate_claim", media=media, property="veracity", **base)
            if claim.integrity.label == "intact":
                self.ask(est, member, "rate_claim", media=media, property="context_coverage", **base)

    def score(self, claims, articles, basis: str) -> Estimate:
        est = Estimate("scored_claims", basis)
        for c in claims:
            self.expected_rate(est, expected_scored(c), self.evidence(articles.get(c.review_id), c.text))
        return est

    def to_rewrite(self, scored) -> tuple[list, list, str]:
        """The Compromised claims stage 7 will rewrite: all of them (rectify: all), or on demand the ones the release
        lacks as Intact variants (DemandPlan), over the success rate each rewrite is expected to have (``holds``:
        REWRITE_SUCCESS, less where the media rule may exclude it, so that more candidates are drawn); and the release
        expected from them, the rewrites holding at those rates (spread evenly over the list)."""
        from assets.selection.demand import (
            DemandPlan,
            hypothetical_variant,
            variants_wanted,
        )

        demand = DemandPlan(scored, self.release_rules, self.claim_rules, self.key)
        compromised = [c for c in scored if c.integrity.label == "compromised"]
        if self.demand.rectify == "all":
            chosen, how = compromised, f"all {len(compromised)} Compromised"
        else:
            needed = demand.needed([], demand.candidates)
            surplus = self.demand.rectify_surplus  # the spare variants the adversarial filter chooses among
            # and the share stage 7 then measures that the filter leaves out
            variants = variants_wanted(needed, surplus, DETECTABLE_SHARE)
            # the candidates in order until the variants expected of them cover the ones wanted: a candidate the
            # media rule is expected to exclude gives less than REWRITE_SUCCESS, and stage 7 goes on to the next
            chosen = drawn(demand.candidates, [self.holds(c) for c in demand.candidates], variants)
            n, plain = len(chosen), min(len(demand.candidates), math.ceil(variants / REWRITE_SUCCESS))
            excluded = sum(REWRITE_SUCCESS - self.holds(c) for c in chosen) / REWRITE_SUCCESS
            how = (f"on demand: {needed} variants lacking of {len(compromised)} Compromised, {surplus:.0%} spare or "
                   f"{DETECTABLE_SHARE:.0%} detectable, {n} rewrites at {REWRITE_SUCCESS:.0%} holding")
            if excluded >= 0.5:
                short = sum(self.holds(c) for c in chosen) < variants - 1e-9  # every candidate drawn, too few
                how += f" less ~{excluded:.0f} the media rule excludes ({n - plain} more candidates drawn for them" + (
                    ", then none left)" if short else ")")
        release, _ = demand.selection([hypothetical_variant(c) for c in held_by(chosen, [self.holds(c) for c in chosen])])
        return chosen, release, how

    def carry(self, claim) -> tuple[float, bool]:
        """(the chance that ``claim``'s media carry its own wording, whether stage 5's OCR cache read them): 1 or 0
        where the cache has the text of every image and video frame (the test stage 7 makes, channels.carries_wording),
        else MEDIA_CARRY_RATE for its kind of media; 0 without media."""
        from assets.selection.channels import carries_wording

        if claim.claim_id not in self._carry:
            texts = self.media_text(claim.media) if claim.media and self.media_text is not None else None
            if not claim.media:
                self._carry[claim.claim_id] = (0.0, True)
            elif texts is not None:
                self._carry[claim.claim_id] = (float(carries_wording(texts, claim.text)), True)
            else:
                kind = "video" if all(m.kind == "video" for m in claim.media) else "image"
                self._carry[claim.claim_id] = (MEDIA_CARRY_RATE[kind], False)
        return self._carry[claim.claim_id]

    def holds(self, claim) -> float:
        """The chance that a rewrite of ``claim`` gives a variant: REWRITE_SUCCESS, unless the media rule excludes it."""
        excluded = media_rule(refinements_of(self.rectifying))["excluded"]
        return REWRITE_SUCCESS * (1.0 - self.carry(claim)[0] * excluded)

    def rectify(self, claims, articles, basis: str) -> Estimate:
        """Per rewrite: the writer and the checker in each of the rounds it is expected to take, and a full re-rating.
        Where its media carry the claim's wording (``carry``: a chance), the media consistency rule refuses drafts
        before the checker is asked (writer calls alone), and a rewrite whose every round it refuses is excluded,
        never re-rated (``media_rule``). ``self.media_figures`` keeps the figures and ``self.media_note`` says them."""
        refine = refinements_of(self.rectifying)
        rule = media_rule(refine)
        est = Estimate("rectified_claims", basis)
        first = self.llm.member_names()[0]
        rounds = expected_rounds(refine)
        carry = read = read_carry = media_claims = 0.0
        for c in claims:
            p, was_read = self.carry(c)
            carry += p
            media_claims += bool(c.media)
            read += bool(c.media) and was_read
            read_carry += was_read and p
            writes = (1 - p) * rounds + p * (rule["refused_calls"] + rule["checked_rounds"])
            checks = (1 - p) * rounds + p * rule["checked_rounds"]
            evidence = self.evidence(articles.get(c.review_id), c.text)
            common = {"media": c.media, "language": c.language, "claim_date": str(c.claim_date or ""),
                      "evidence": evidence[first]}
            self.ask(est, first, "rectify_claim", claim=c.text, decisive_property="veracity", justification="",
                     max_words=self.claim_rules.max_words, max_sentences=self.claim_rules.max_sentences, previous="",
                     critique="", round=1, n=writes, **common)  # later rounds' prompts are about as long
            self.ask(est, first, "check_rectified", original=c.text, claim=c.text, n=checks, **common)
            rated = Estimate(est.stage, "")
            self.rate(rated, c.text, c.media, c.language, common["claim_date"], evidence)
            est.merge(rated, 1 - p * rule["excluded"])  # an excluded rewrite is not re-rated
        self.media_figures = {
            "rewrites": len(claims), "with_media": int(media_claims), "read_in_ocr_cache": int(read),
            "read_carrying": int(read_carry), "expected_carrying": round(carry, 1),
            "expected_retried": round(carry * rule["retried"], 1), "expected_excluded": round(carry * rule["excluded"], 1),
            "carry_rate": dict(MEDIA_CARRY_RATE), "refused_first": MEDIA_REFUSED_FIRST,
            "refused_again": MEDIA_REFUSED_AGAIN, "rounds_allowed": refine + 1, "measured_on": MEDIA_MEASURED_ON}
        self.media_note = media_note(self.media_figures)
        if carry >= 0.5:
            est.basis += (f"; media rule: ~{carry:.0f} with media carrying their wording, ~{carry * rule['retried']:.0f}"
                          f" to retry, ~{carry * rule['excluded']:.0f} excluded (see below)")
        return est

    def jobs(self, release) -> list[Estimate]:
        """Predictions and the evaluation's judge over the expected release: the closed-book verifier rates each
        claim as stage 6 does, with no evidence and by its one member (expected_rate); the retrieval verifier's
        per-claim call counts with the ledger's or a typical prompt length (the knowledge store is not read here)."""
        p = self.verifier
        member = p.verifier_member or self.llm.member_names()[0]
        n = len(release)
        pred = Estimate("predictions", f"{n} expected release claims, {p.verifier_mode}")
        typical = 1500  # tokens of a verifier prompt with its evidence, when the ledger has seen none
        if p.verifier_mode == "closed_book":
            for claim in release:
                self.expected_rate(pred, claim, {member: ""}, members=[member])
        else:
            plans = {"parallel": 1, "dynamic": p.verifier_questions,
                     "hybrid": 1 + max(0, p.verifier_questions - p.verifier_parallel_questions)}[p.verifier_strategy]
            for template, calls in {"verifier_questions": plans, "verifier_answer": p.verifier_questions + 1}.items():
                pred.add(member, int(self.history.get(f"prompt:{template}", typical)),
                         self.completion(member, template), n * calls)
        # the evaluation asset scores predictions without a model; only its contamination check asks one (the LLM
        # judge is `veritas evaluate --judge-member`'s, outside the quarter's run)
        evaluation = Estimate("evaluation", f"{n} release claims, contamination check" if p.contamination_check else
                              "no model calls (no contamination check)")
        if p.contamination_check:
            for template in ("verifier_article", "verifier_statements"):
                evaluation.add(member, int(self.history.get(f"prompt:{template}", typical)),
                               self.completion(member, template), n)
        return [pred, evaluation]


# the share of rewrites that hold (checked consistent and shareable, re-scored Intact): 1,459 of 1,714 on the
# rehearsal of 2026-12-01 (bench/rehearsal.py, simulated panel)
REWRITE_SUCCESS = 0.85
# the share of the rewrites the release's adversarial filter tells from natural claims, as stage 7 measures it
# (rectify/detectable_share): 0.393 on the rehearsal of 2026-12-05 (simulated writer, 40% of its drafts templates)
DETECTABLE_SHARE = 0.39
# the share of a rewrite's rounds that end refused and go on to another round (critique-and-refine), while rounds are
# left: on the rehearsal of issue 33 (bench/rehearsal.py, simulated panel) the loop made 252 further calls, a writer
# call and a check each, over 642 rewrites: 0.196 further rounds per rewrite, c + c^2 with two rounds allowed
REFINE_CONTINUES = 0.17


def expected_rounds(refinements: int) -> float:
    """Rounds a rewrite is expected to take (a writer call and a check each) with ``refinements`` more rounds allowed
    after its first draft (stage 7's ``refinements``)."""
    return sum(REFINE_CONTINUES ** r for r in range(refinements + 1))


# Stage 7's media consistency rule (issue 49, assets/claims/rectified_claims.media_problem): a claim whose media carry
# its own wording (OCR overlap >= channels.MEDIA_CARRY) keeps only a rewrite that keeps those words. The rule refuses a
# draft before the checker is asked (a writer call alone), and a claim whose every round it refuses is excluded: not
# re-rated, no variant, and on demand another candidate takes its place.
# Where stage 5's OCR cache has not read a claim's media (a plan before stage 5), the chance that they carry its
# wording, by kind: on the default rehearsal of 2026-12-07 (bench/rehearsal.py --latency 0.05, fresh caches), of the
# Compromised claims stage 6 scored, 852 of the 1,095 with images (0.78) and 62 of the 84 with videos (0.74); of all
# its normalized claims, 1,727 of 2,224 and 128 of 169. The simulated quarter draws the claim's first 40 characters
# into most pictures: a real quarter's screenshots and captions may differ, and a plan after stage 5 reads its own.
MEDIA_CARRY_RATE = {"image": 0.78, "video": 0.74}
# Of the rewrites whose media carry their claim's wording, the share whose first draft the rule refuses, and of those,
# the share of each later round it refuses again. The writer is shown the picture's words and told to keep them
# (prompts/rectify_claim.j2); the simulated one keeps them with PanelConfig.refine_uptake 0.7 where one of its
# rewrites can, and none can where the detail it must change is among the words shown. The default rehearsal of
# 2026-12-07 (--latency 0.05, fresh caches, 2 refine rounds; rectify/media_carry, media_refused in some round,
# media_excluded): 482, 231, 197: 0.48 refused, and 197 / 231 = 0.85 = 0.92^2 of those excluded. Before the writer
# was shown the words: 0.68 and 0.83.
MEDIA_REFUSED_FIRST = 0.48
MEDIA_REFUSED_AGAIN = 0.92
MEDIA_MEASURED_ON = "the default rehearsals of 2026-12-07 (bench/rehearsal.py; simulated quarter and writer)"


def refinements_of(rectifying) -> int:
    from assets.claims.rectified_claims import refinements

    return refinements(rectifying)


def media_rule(refinements: int) -> dict[str, float]:
    """What the media consistency rule is expected to cost one rewrite whose media carry its claim's wording, with
    ``refinements`` rounds allowed after the first draft: ``refused_calls``, the writer calls it refuses (no checker
    asked); ``checked_rounds``, the rounds with a writer call and a check once a draft passes it (each with the
    rounds left, ``expected_rounds``); ``excluded``, the chance that it refuses every round (no variant, no
    re-rating); ``retried``, the chance that it refuses the first draft."""
    # refused[k]: the chance that the first k rounds were all refused by the rule (k = 0 .. refinements + 1)
    refused = [1.0] + [MEDIA_REFUSED_FIRST * MEDIA_REFUSED_AGAIN ** k for k in range(refinements + 1)]
    return {"refused_calls": sum(refused[1:]), "excluded": refused[-1], "retried": refused[1],
            "checked_rounds": sum((refused[k] - refused[k + 1]) * expected_rounds(refinements - k)
                                  for k in range(refinements + 1))}


def media_note(f: dict) -> str:
    """What stage 7's estimate assumed of the media rule (``Planner.media_figures``), in words."""
    from assets.selection.channels import MEDIA_CARRY

    unread = f["with_media"] - f["read_in_ocr_cache"]
    known = [f"{f['read_in_ocr_cache']} read in stage 5's OCR cache, {f['read_carrying']} of them carrying"] \
        if f["read_in_ocr_cache"] else []
    if unread:
        rates = ", ".join(f"{k} {v:.2f}" for k, v in f["carry_rate"].items())
        known.append(f"{unread} not read yet, at the media text overlap rate of {rates}")
    where = f"; {', '.join(known)}" if known else ""
    return (f"{f['rewrites']} rewrites, {f['with_media']} with media: ~{f['expected_carrying']:.0f} expected to carry "
            f"their claim's wording (OCR overlap >= {MEDIA_CARRY:g}{where}), of which ~"
            f"{f['expected_retried']:.0f} to need a retry (a writer call, no check) and ~{f['expected_excluded']:.0f} "
            f"to be excluded after {f['rounds_allowed']} refused rounds, not re-rated (the rule refusing "
            f"{f['refused_first']:.0%} of first drafts and {f['refused_again']:.0%} of retries); rates measured on "
            f"{f['measured_on']}")


def drawn(candidates: list, holds: list[float], wanted: float) -> list:
    """The fewest of ``candidates``, in order, whose chances of giving a variant (``holds``) add up to ``wanted``
    variants (all of them when they never do)."""
    total = 0.0
    for i, h in enumerate(holds):
        if total >= wanted - 1e-9:
            return candidates[:i]
        total += h
    return list(candidates)


def held_by(claims: list, holds: list[float]) -> list:
    """The claims expected to hold, by their chances of holding (``holds``), spread evenly, the first one first:
    claim i holds where the running sum of the chances passes a whole number (demand.held_share's rule, for a
    chance per claim)."""
    out, total = [], 0.0
    for c, h in zip(claims, holds, strict=True):
        if math.ceil(total + h - 1e-9) > math.ceil(total - 1e-9):
            out.append(c)
        total += h
    return out


EXPECTED_SCORE = {"intact": 1.0, "unknown": 0.0, "compromised_veracity": -1.0, "compromised_ooc": -1.0}


def expected_scored(claim):
    """A normalized claim as stage 6 is expected to score it: its fact-checker's rating's category."""
    from assets.rules.ratings import rated_out_of_context, rating_category
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


def build_plan(llm, settings: dict, store, quarter: str, before_stage_5: bool = False) -> dict:
    """The estimate for one quarter from whatever upstream tables it has (``before_stage_5``: from stages 1-4's
    only, as it read before any model call), plus the ledger's earlier quarters. ``settings``: each stage's settings
    by resource key, as ``stage_settings(config["stages"])`` gives them."""
    from assets.rules.ids import stable_id
    from assets.stage.tables import load_upstream
    from schemas.records import Article, ClaimAppearances, NormalizedClaim, ScoredClaim

    def table(name, model):
        return load_upstream(store, name, quarter, model, []) if store.latest_version(name, quarter) else None

    appearances = table("appearances", ClaimAppearances)
    if appearances is None:
        raise FileNotFoundError(f"no appearances table for {quarter}: run `veritas run --quarter {quarter} --until "
                                "appearances` first (stages 1-4 make no model calls)")
    articles = {a.review_id: a for a in table("articles", Article) or []}
    planner = Planner(llm, settings, ledger_history(llm))
    from assets.rules.release_order import order_key

    planner.key = order_key(store, create=False) or PLAN_KEY
    # what stage 5's OCR read in the media (stage 7's media rule reads the same), where it has read them
    from assets.selection.channels import CachedMediaTexts

    planner.media_text = CachedMediaTexts(Path(llm.cache_path).with_name("ocr_cache.sqlite"))
    normalized = None if before_stage_5 else table("normalized_claims", NormalizedClaim)
    scored = None if before_stage_5 else table("scored_claims", ScoredClaim)
    if normalized is None:  # every appearance becomes a claim, with the media of the post itself (stage 5 drops
        # the article's own images: the fact-checker's graphics and stamps)
        claims = [NormalizedClaim(claim_id=stable_id(c.review_id, "original"), review_id=c.review_id, quarter=quarter,
                                  text=c.claim_text,
                                  original_text=c.claim_text, normalization="original", language=c.language,
                                  claim_date=c.claim_date, review_url=c.review_url, rating_text=c.rating_text,
                                  media=planner.expected_media(c))
                  for c in appearances if c.claim_text]
        basis6 = f"all {len(claims)} appearances rows kept by stage 5, questions as their ratings predict"
    else:
        claims, basis6 = normalized, f"{len(normalized)} normalized_claims rows"
    # each claim labelled as its fact-checker's rating predicts; on demand, stage 6's rounds run on those labels
    expected = {c.claim_id: expected_scored(c) for c in claims}
    if settings["demand"].score == "demand":
        from assets.selection.demand import ScoringDemand

        demand = ScoringDemand(claims, settings["release_rules"], settings["claim_rules"], settings["demand"],
                               planner.key)
        outcomes, extra = demand.run(lambda batch: {c.claim_id: (expected[c.claim_id], "") for c in batch})
        expected = {k: v[0] for k, v in outcomes.items()}
        basis6 += (f"; on demand: {extra['score/rated_false_scored']} of the {extra['score/rated_false']} rated "
                   "false")
    if scored is None:
        scored, source = list(expected.values()), f"{len(expected)} claims labelled by their ratings"
    else:
        source = f"{len(scored)} scored_claims rows"
    compromised, release, how = planner.to_rewrite(scored)
    basis7 = f"{source}; {how}"
    estimates = [planner.normalize(appearances, articles),
                 planner.score([c for c in claims if c.claim_id in expected], articles, basis6),
                 planner.rectify(compromised, articles, basis7), *planner.jobs(release)]
    planner.media_text.close()
    price = prices(llm)
    stages = []
    for est in estimates:
        members = {}
        for member in llm.member_names():
            pin, pout = price[member]
            # expected calls may be fractional (a share of media expected stamped): rounded once, per member
            calls, pt, ct = (round(d[member]) for d in (est.calls, est.prompt_tokens, est.completion_tokens))
            cost = None if calls and (pin is None or pout is None) else pt * (pin or 0) + ct * (pout or 0)
            members[member] = {"calls": calls, "prompt_tokens": pt, "completion_tokens": ct,
                               "cost_usd": cost}
        known = [v["cost_usd"] for v in members.values() if v["cost_usd"] is not None]
        stages.append({"stage": est.stage, "basis": est.basis, "by_member": members,
                       **({"media_rule": planner.media_figures} if est.stage == "rectified_claims" else {}),
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
            "assumptions": [f"stage 7: {planner.media_note}"],
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
    lines.extend(f"  {line}" for line in plan.get("assumptions", []))
    for member, (pin, pout) in plan["prices_per_m"].items():
        fmt = lambda v: "?" if v is None else f"{v:.3f}"
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
    from dagster_project.config import load_config
    from dagster_project.core.quarters import partition_label
    from dagster_project.resources.llm import LLMResource
    from dagster_project.resources.store import StoreResource
    from dagster_project.stage_settings import stage_settings

    try:
        config = load_config(getattr(args, "config", None))
        quarter = partition_label(args.quarter)
        llm = LLMResource(**config["llm"])
        llm.set_quarter(quarter)
        plan = build_plan(llm, stage_settings(config["stages"]), StoreResource(**config["store"]), quarter)
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    print(json.dumps(plan, indent=2) if args.json else format_plan(plan))
    return 0
