"""A simulated model panel: an OpenAI-compatible server on loopback whose members answer every prompt the pipeline
sends, following a simulated quarter's planted truth with per-member noise, latency and faults.

It is a test double at the HTTP boundary, never a default: it runs only when a bench or a test starts it, on
127.0.0.1, and every model it serves is named ``sim/...``. Each member sees the same truth: its noise is a
certainty it holds per claim (certain, or one step less sure on every property of that claim) and, per
property, a small chance of the opposite category, so that the disagreement filter has real work.
"""

import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

from dagster_project.core.cost_ledger import IMAGE_TOKENS
from dagster_project.simulation.openai_stub import OpenAIStub
from dagster_project.simulation.records import claim_key
from dagster_project.simulation.rewrites import STYLES, TEMPLATES, rewrite_texts

SIMULATED = "simulated"
NO_EVIDENCE = "No evidence is given: answer from what you know"  # prompts/_evidence.j2 without evidence


@dataclass
class MemberSpec:
    name: str  # the ensemble member (also the URL path the server routes by)
    model: str  # what the server says it is; always sim/...
    input_cost_per_token: float
    output_cost_per_token: float
    flip: float = 0.02  # chance of the opposite category, per property
    shift: float = 0.2  # chance of being one step less certain about a claim (all its properties)
    vision: bool = False
    # a knowledge cut-off (a quarter label, "" for none): rating from memory (the prompt gives no evidence: a
    # closed-book verifier) a claim that a simulated world first showed after it (the truth's "quarter"), the member
    # is less sure (``shift_after``) and wrong more often (``flip_after``), as the models of VeriTaS's longitudinal
    # experiment are on claims newer than their training data; with the fact-check article as evidence (stage 5) the
    # cut-off does not matter
    cutoff: str = ""
    flip_after: float = 0.0
    shift_after: float = 0.0


def after_cutoff(member: MemberSpec, truth: dict | None) -> bool:
    """Whether the claim came after the member's cut-off: first shown in a later quarter (labels sort as quarters)."""
    return bool(member.cutoff) and bool((truth or {}).get("quarter")) and truth["quarter"] > member.cutoff


DEFAULT_MEMBERS = (
    MemberSpec("sim-alpha", "sim/alpha-large", 2.5e-6, 1.0e-5, flip=0.01, shift=0.15, vision=True),
    MemberSpec("sim-beta", "sim/beta-medium", 4.0e-7, 1.6e-6, flip=0.015, shift=0.25),
    MemberSpec("sim-gamma", "sim/gamma-small", 1.5e-7, 6.0e-7, flip=0.02, shift=0.35),
    MemberSpec("sim-delta", "sim/delta-open", 1.0e-7, 3.0e-7, flip=0.02, shift=0.3),
)


@dataclass
class PanelConfig:
    members: tuple = DEFAULT_MEMBERS
    latency_median_s: float = 0.5  # lognormal around the median: most answers near it, a long tail
    latency_sigma: float = 0.5
    latency_cap_s: float = 10.0
    faults: dict = field(default_factory=lambda: {
        "rate_limit": 0.01, "server_error": 0.005, "timeout": 0.001, "malformed": 0.005, "refusal": 0.002})
    retry_after_s: float = 1.0
    timeout_sleep_s: float = 35.0  # a timeout fault answers after this (past the client's timeout)
    seed: int = 13
    # the writer's rewrite styles (dagster_project/simulation/rewrites.py) and their shares, drawn per claim and round;
    # the templates (negation, correction) are 0.4 of the default, so that a filter of rewrites has work to do
    rewrite_styles: dict = field(default_factory=lambda: {
        "negation": 0.2, "correction": 0.2, "minimal": 0.4, "paraphrase": 0.2})
    refine_uptake: float = 0.7  # on a refine round: chance that the writer takes the critique (minimal or paraphrase)

    def __post_init__(self):
        unknown = set(self.rewrite_styles) - set(STYLES)
        if unknown or any(v < 0 for v in self.rewrite_styles.values()) or not sum(self.rewrite_styles.values()):
            raise ValueError(f"rewrite_styles: shares >= 0 of {', '.join(STYLES)}, not all 0; got {self.rewrite_styles}")
        if not 0.0 <= self.refine_uptake <= 1.0:
            raise ValueError(f"refine_uptake must be within 0..1, not {self.refine_uptake}")


def parse_styles(text: str) -> dict[str, float]:
    """"negation=0.5,correction=0.5" -> {"negation": 0.5, "correction": 0.5} (the styles not named get 0)."""
    out = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, share = part.partition("=")
        if name.strip() not in STYLES or not share:
            raise ValueError(f"a rewrite style is one of {', '.join(STYLES)} with its share (name=0.2), not {part!r}")
        out[name.strip()] = float(share)
    return out


# prompt type <- a phrase of its system message (the rating prompts are told apart by their user message)
PROMPT_TYPES = (
    ("You select the media", "media_filter"),
    ("You rewrite fact-checked claims", "normalize_claim"),
    ("You turn a compromised claim", "rectify_claim"),
    ("You check a rewritten claim", "check_rectified"),
    ("You help recover where", "choose_appearance"),
)
MEDIA_REF = re.compile(r"<(?:image|video):\d+>\s*")
CLAIM_IN_PROMPT = re.compile(r'dated [^)\n]*\):\n"(.*?)"\n', re.DOTALL)
FILTER_CLAIM = re.compile(r'^Claim: "(.*?)"\nMedium 1:', re.DOTALL | re.MULTILINE)
REWRITTEN = re.compile(r'Rewritten claim: "(.*?)"\n', re.DOTALL)
ORIGINAL = re.compile(r'Original claim: "(.*?)"\n', re.DOTALL)
# a refine round of rectify_claim: the refused rewrite and the checker's critique come back to the writer
PREVIOUS_REWRITE = re.compile(r'^Previous rewrite \(round (\d+)\): "', re.MULTILINE)
REFUSED = re.compile(r"^Why it was refused:", re.MULTILINE)
# the words the claim's media show, where the writer is told to keep them (prompts/rectify_claim.j2)
MEDIA_TEXT = re.compile(r"^Text printed in the claim's media \(read by OCR[^)]*\): \"(.*)\"$", re.MULTILINE)
CRITIQUE = {"shareable": "reads as a correction notice, not as a post: state the true detail in the claim's own words",
            "consistent": "states what the fact-check does not show: keep to the article's facts and the claim's media"}
SOURCE_URL = re.compile(r"URL: (\S+)")
# planted category -> the category a careful rater gives each property
TARGET = {
    "intact": {"authenticity": "positive", "contextualization": "positive", "veracity": "positive",
               "context_coverage": "positive"},
    "compromised_veracity": {"authenticity": "positive", "contextualization": "positive", "veracity": "negative",
                             "context_coverage": "positive"},
    "compromised_ooc": {"authenticity": "positive", "contextualization": "negative", "veracity": "negative",
                        "context_coverage": "negative"},
    "unknown": {"authenticity": "positive", "contextualization": "positive", "veracity": "unknown",
                "context_coverage": "unknown"},
}
WHY = {"positive": "The article's evidence supports this.", "negative": "The article shows this is not so.",
       "unknown": "The evidence does not settle this."}


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content or ""


def _rng(*parts) -> random.Random:
    return random.Random(int(hashlib.sha256("\x1f".join(map(str, parts)).encode()).hexdigest()[:16], 16))


def from_schema(schema: dict, hint: str = "simulated") -> object:
    """A minimal instance of a JSON schema (for prompts the panel has no script for, e.g. the verifier's)."""
    kind = schema.get("type")
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return from_schema(schema["anyOf"][0], hint)
    if kind == "object":
        return {k: from_schema(v, k) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        return [from_schema(schema.get("items", {}), hint) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return f"{SIMULATED} {hint}"[: schema.get("maxLength", 200)]
    if kind == "integer":
        return int(schema.get("minimum", -1))
    if kind == "number":
        return float(schema.get("minimum", 0))
    if kind == "boolean":
        return False
    return None


class Panel:
    """The responder behind the server: finds the claim's planted truth in the prompt and answers like a rater."""

    def __init__(self, truth: dict, config: PanelConfig | None = None):
        self.config = config or PanelConfig()
        self.members = {m.name: m for m in self.config.members}
        self.by_claim = {claim_key(t["claim"]): t for t in truth["claims"].values()}
        # every style's text of every claim -> (its truth, the style): the raters know each as the Intact variant
        self.rewrites = {claim_key(text): (t, style) for t in truth["claims"].values()
                         for style, text in reversed(rewrite_texts(t).items())}
        self.by_rectified = {key: t for key, (t, _) in self.rewrites.items()}
        self.lock = threading.Lock()
        self.served: Counter = Counter()  # (member, prompt type) -> answers given (200s, faults excluded)
        self.faults: Counter = Counter()  # (member, fault) -> count
        self.unmatched: Counter = Counter()  # prompt type -> prompts whose claim the truth table lacks
        self.answered_keys: Counter = Counter()  # hash of (member, messages) -> 200 answers the client received
        self.abandoned: Counter = Counter()  # (member, prompt type) -> answers made for a client that had gone
        self._made = threading.local()  # this request thread's 200 answer, until the stub says whether it went out
        self.seen_keys: Counter = Counter()  # hash of (member, messages) -> requests received
        self.in_flight = 0
        self.max_in_flight = 0
        self.in_flight_s = 0.0  # the sum of every request's time in the panel: over a span, / its length = mean in flight
        self.rewrite_styles: Counter = Counter()  # style -> rectify_claim answers served in it
        self.refine_styles: Counter = Counter()  # style -> those of them on a refine round
        self.rewrite_rounds: Counter = Counter()  # round (1 = first, N + 1 after "Previous rewrite (round N)") -> answers

    # ---- what the prompt is about -------------------------------------------------------
    @staticmethod
    def prompt_type(body: dict) -> tuple[str, str, str]:
        """(type, first user message, system message)."""
        messages = body.get("messages", [])
        system = _text(messages[0]) if messages else ""
        user = next((_text(m) for m in messages if m.get("role") == "user"), "")
        for phrase, name in PROMPT_TYPES:
            if phrase in system:
                return name, user, system
        if "on authenticity and on contextualization" in user:
            return "rate_media", user, system
        match = re.search(r"Rate the claim on (\w+):", user)
        if match:
            return f"rate_claim/{match.group(1)}", user, system
        return "other", user, system

    def find(self, kind: str, user: str) -> tuple[dict | None, bool]:
        """(truth, is the rectified variant) of the claim the prompt is about."""
        pattern = {"media_filter": FILTER_CLAIM, "check_rectified": REWRITTEN}.get(kind, CLAIM_IN_PROMPT)
        match = pattern.search(user)
        if not match:
            return None, False
        key = claim_key(MEDIA_REF.sub("", match.group(1)))
        if key in self.by_claim:
            return self.by_claim[key], False
        if key in self.by_rectified:
            return self.by_rectified[key], True
        return None, False

    # ---- answers ------------------------------------------------------------------------
    def rewrite_style(self, truth: dict, user: str) -> tuple[str, int]:
        """(style, round) of the writer's answer: drawn from the shares per (seed, claim, round); on a refine round
        (the prompt quotes the refused rewrite and why) the writer takes the critique with refine_uptake, answering
        minimal or paraphrase by their shares (minimal when both are 0), else draws from the shares again."""
        rounds = [int(n) for n in PREVIOUS_REWRITE.findall(user)]
        refine = bool(rounds) and bool(REFUSED.search(user))
        round_ = max(rounds) + 1 if refine else 1  # stage 7 numbers its rounds from 1
        rng = _rng(self.config.seed, "rewrite-style", truth["claim"], round_)
        shares = self.config.rewrite_styles
        if refine and rng.random() < self.config.refine_uptake:
            shares = {s: shares.get(s, 0.0) for s in STYLES if s not in TEMPLATES}
            if not sum(shares.values()):
                shares = {"minimal": 1.0}
        styles = [s for s in STYLES if shares.get(s, 0.0) > 0]
        return rng.choices(styles, [shares[s] for s in styles])[0], round_

    def rewrite(self, truth: dict, user: str) -> dict:
        style, round_ = self.rewrite_style(truth, user)
        texts = rewrite_texts(truth)
        if style not in texts:  # a truth table of one style (written before the styles)
            style = next(iter(texts))
        if shown := MEDIA_TEXT.search(user):  # told the words its media show: kept with refine_uptake, when it can
            style = self.keeping(truth, texts, style, shown.group(1), round_)
        self._made.style = (style, round_)
        return {"claim": texts[style]}

    def keeping(self, truth: dict, texts: dict[str, str], style: str, shown: str, round_: int) -> str:
        """The style a writer told what the claim's media show answers in: with refine_uptake, one of its styles
        (by their shares) that keeps those words, when ``style`` does not and one does; else ``style``."""
        from assets.selection.channels import consistent_with_media

        def keeps(s: str) -> bool:
            return consistent_with_media([shown], truth["claim"], texts[s])

        rng = _rng(self.config.seed, "media-uptake", truth["claim"], round_)
        if keeps(style) or rng.random() >= self.config.refine_uptake:
            return style
        shares = self.config.rewrite_styles
        kept = [s for s in STYLES if s in texts and s not in TEMPLATES and shares.get(s, 0.0) > 0 and keeps(s)]
        return rng.choices(kept, [shares[s] for s in kept])[0] if kept else style

    def check(self, user: str) -> dict:
        """consistent when the rewrite is one of the claim's own rewrites; not shareable when it is the negation
        template (a correction notice); the critique says what to change, "" when both are yes."""
        rewritten, original = REWRITTEN.search(user), ORIGINAL.search(user)
        found = self.rewrites.get(claim_key(MEDIA_REF.sub("", rewritten.group(1)))) if rewritten else None
        of = self.by_claim.get(claim_key(MEDIA_REF.sub("", original.group(1)))) if original else None
        if found is None or (of is not None and of is not found[0]):
            return {"consistent": "no", "shareable": "yes", "critique": CRITIQUE["consistent"]}
        if found[1] == "negation":
            return {"consistent": "yes", "shareable": "no", "critique": CRITIQUE["shareable"]}
        return {"consistent": "yes", "shareable": "yes", "critique": ""}

    def rating(self, member: MemberSpec, truth: dict | None, rectified: bool, prop: str, from_memory: bool = False) -> dict:
        category = "unknown" if truth is None else TARGET["intact" if rectified else truth["category"]][prop]
        claim = (truth or {}).get("claim", "")
        late = from_memory and after_cutoff(member, truth)
        shift, flip = (member.shift_after, member.flip_after) if late else (member.shift, member.flip)
        sure = _rng(self.config.seed, member.name, claim, rectified).random() >= shift
        certainty = "certain" if sure else "rather certain"
        if category == "unknown":
            certainty = "unknown"
        if _rng(self.config.seed, member.name, claim, rectified, prop).random() < flip:
            category = {"positive": "negative", "negative": "positive"}.get(
                category, "positive" if _rng(member.name, claim, prop).random() < 0.5 else "negative")
            certainty = "rather certain"
        tags = {("contextualization", "negative"): ["Out-of-context"], ("veracity", "negative"): ["Fabricated-quote"]}
        return {"category": category, "certainty": certainty, "justification": f"{WHY[category]} ({SIMULATED})",
                "tags": tags.get((prop, category), [])}

    @staticmethod
    def media_verdict(url: str) -> dict:
        if "/static/img/rating-" in url:
            return {"keep": "no", "reason": "verdict_stamp"}
        if url.endswith("-header.jpg"):
            return {"keep": "no", "reason": "unrelated"}
        return {"keep": "yes", "reason": "part_of_claim"}

    def answer(self, member: MemberSpec, kind: str, user: str, body: dict) -> dict:
        truth, rectified = self.find(kind, user)
        if truth is None and kind != "other":
            with self.lock:
                self.unmatched[kind] += 1
        if kind == "media_filter":  # a verdict per medium listed, by its URL
            return {f"medium_{i}": self.media_verdict(url) for i, url in enumerate(SOURCE_URL.findall(user), 1)}
        if kind == "normalize_claim":
            match = CLAIM_IN_PROMPT.search(user)
            return {"claim": truth["claim"] if truth else MEDIA_REF.sub("", match.group(1) if match else "claim")}
        if kind == "rectify_claim":
            return self.rewrite(truth, user) if truth else {"claim": f"{SIMULATED} rewrite"}
        if kind == "check_rectified":
            return self.check(user)
        if kind == "choose_appearance":
            links = re.findall(r"^\d+\. (\S+)$", user, re.MULTILINE)
            posts = [u for u in links if re.search(r"/status/|/posts/|instagram\.com/p/|archive\.ph/", u)]
            return {"urls": posts[:3], "reason": f"the post that carried the claim ({SIMULATED})"}
        memory = NO_EVIDENCE in user  # a closed-book verifier's question (prompts/_evidence.j2)
        if kind == "rate_media":
            return {p: self.rating(member, truth, rectified, p, memory) for p in ("authenticity", "contextualization")}
        if kind.startswith("rate_claim/"):
            return self.rating(member, truth, rectified, kind.split("/", 1)[1], memory)
        schema = (body.get("response_format") or {}).get("schema") or (
            (body.get("response_format") or {}).get("json_schema") or {}).get("schema") or {}
        return from_schema(schema)

    # ---- the HTTP side ------------------------------------------------------------------
    def latency(self, rng: random.Random) -> float:
        c = self.config
        if c.latency_median_s <= 0:
            return 0.0
        return min(c.latency_cap_s, rng.lognormvariate(0.0, c.latency_sigma) * c.latency_median_s)

    def __call__(self, mode: str, body: dict):
        member = self.members.get(mode)
        if member is None:
            return 404, {"error": {"message": f"no simulated member {mode!r}", "type": "invalid_request_error"}}
        key = hashlib.sha256(json.dumps([mode, body.get("messages")], sort_keys=True).encode()).hexdigest()
        with self.lock:
            nth = self.seen_keys[key]
            self.seen_keys[key] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        began = time.monotonic()
        try:
            return self._respond(member, body, key, nth)
        finally:
            with self.lock:
                self.in_flight -= 1
                self.in_flight_s += time.monotonic() - began

    def _respond(self, member: MemberSpec, body: dict, key: str, nth: int):
        rng = _rng(self.config.seed, key, nth)
        self._made.style = None
        time.sleep(self.latency(rng))
        kind, user, system = self.prompt_type(body)
        reask = "That answer was rejected" in _text(body.get("messages", [{}])[-1])
        fault = ""
        if nth == 0:  # a fault hits a request the first time only: the Router's retry gets the answer
            draw = rng.random()
            for name, rate in self.config.faults.items():
                draw -= rate
                if draw < 0:
                    fault = name
                    break
        if reask and fault in ("malformed", "refusal"):
            fault = ""  # the re-ask is answered properly
        if fault:
            with self.lock:
                self.faults[(member.name, fault)] += 1
        if fault == "rate_limit":
            return 429, {"error": {"message": "simulated rate limit", "type": "rate_limit_error"}}, {
                "retry-after": str(self.config.retry_after_s)}
        if fault == "server_error":
            return 503, {"error": {"message": "simulated overload", "type": "server_error"}}
        if fault == "timeout":
            time.sleep(self.config.timeout_sleep_s)
        answer = self.answer(member, kind, user, body)
        content = json.dumps(answer, ensure_ascii=False)
        if fault == "malformed":
            content = content[: max(1, len(content) // 2)]
        message = {"content": content}
        if fault == "refusal":
            message = {"content": None, "refusal": f"I can't help with that ({SIMULATED} refusal)."}
        prompt_chars = sum(len(_text(m)) for m in body.get("messages", []))
        # an image is billed as a provider bills one, at the flat rate veritas plan counts (IMAGE_TOKENS)
        images = sum(1 for m in body.get("messages", []) if isinstance(m.get("content"), list)
                     for part in m["content"] if isinstance(part, dict) and part.get("type") == "image_url")
        usage = {"prompt_tokens": max(1, prompt_chars // 4) + images * IMAGE_TOKENS,
                 "completion_tokens": max(1, len(content) // 4)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        style = self._made.style if fault in ("", "timeout") else None  # a broken answer is asked again
        self._made.answer = (member.name, kind, key, style)
        return 200, message, {"x-simulated": "true"}, {"model": member.model, "usage": usage,
                                                          "system_fingerprint": SIMULATED}

    def settle(self, delivered: bool) -> None:
        """The stub's word on this thread's last 200 answer: served when the client got it; abandoned when it had
        hung up (a timed-out request, a killed process), so that a repeated prompt counts only if paid twice."""
        made, self._made.answer = getattr(self._made, "answer", None), None
        if made is None:
            return
        member, kind, key, style = made
        with self.lock:
            if delivered:
                self.served[(member, kind)] += 1
                self.answered_keys[key] += 1
                if style:
                    self.rewrite_styles[style[0]] += 1
                    self.rewrite_rounds[style[1]] += 1
                    if style[1] > 1:  # a refine round
                        self.refine_styles[style[0]] += 1
            else:
                self.abandoned[(member, kind)] += 1

    def forget_answers(self) -> None:
        """Start counting repeated answers afresh (e.g. before a run on a cold cache)."""
        with self.lock:
            self.answered_keys.clear()

    def counters(self) -> dict:
        with self.lock:
            by_member: dict = {}
            for (member, kind), n in sorted(self.served.items()):
                by_member.setdefault(member, {})[kind] = n
            return {
                "served": sum(self.served.values()), "by_member": by_member,
                "faults": {f"{m}/{f}": n for (m, f), n in sorted(self.faults.items())},
                "unmatched": dict(self.unmatched), "answered_twice": sum(1 for n in self.answered_keys.values() if n > 1),
                "abandoned": sum(self.abandoned.values()),
                "max_in_flight": self.max_in_flight, "in_flight_s": round(self.in_flight_s, 3),
                "rewrite_styles": dict(sorted(self.rewrite_styles.items())),
                "refine_rewrite_styles": dict(sorted(self.refine_styles.items())),
                "rewrite_rounds": {str(r): n for r, n in sorted(self.rewrite_rounds.items())},
            }


class PanelServer:
    """The panel on 127.0.0.1 (a random free port), for the length of a with block."""

    def __init__(self, truth: dict, config: PanelConfig | None = None):
        self.panel = Panel(truth, config)
        self.stub = OpenAIStub(self.panel, record=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stub.close()
        self.stub.httpd.server_close()  # the port is released: nothing answers there after the block

    def base(self, member: str) -> str:
        return self.stub.base(member)

    def llm_members(self, api_key_env: str = "VERITAS_SIM_KEY", max_parallel: int = 4) -> list[dict]:
        """The ensemble config (LLMResource ``members``): litellm's openai provider on the panel, with per-token
        prices set through the member's own cost fields."""
        return [{"name": m.name, "model": f"openai/{m.model}", "api_base": self.base(m.name), "api_key_env": api_key_env,
                 "input_cost_per_token": m.input_cost_per_token, "output_cost_per_token": m.output_cost_per_token,
                 "vision": m.vision, "max_parallel": max_parallel, "seed": i + 1, "context_window": 128000}
                for i, m in enumerate(self.panel.config.members)]

    def describe(self) -> dict:
        return {"simulated": True, **{k: v for k, v in asdict(self.panel.config).items() if k != "members"},
                "members": [asdict(m) for m in self.panel.config.members]}
