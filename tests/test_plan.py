"""Issue 14: ``veritas plan --quarter Q`` estimates stages 5-7 and the jobs from the quarter's upstream tables and
each member's price, next to the ledger's earlier quarters, without making a call.

The upstream tables hold three real Fact Check Tools reviews of the Arabic excerpt (one with two images) and the
real AFP article text; the ledger holds one real (loopback) call of an earlier quarter."""

import hashlib
import io
import json
import random
import re

import pytest
import yaml
from PIL import Image

from assets.ingestion.merging import ingest
from dagster_project.cli import main
from dagster_project.commands.plan import (
    MEDIA_CARRY_RATE,
    REWRITE_SUCCESS,
    TYPICAL_COMPLETION,
    Planner,
    expected_rounds,
    media_rule,
)
from dagster_project.config import PROJECT_ROOT
from dagster_project.core.cost_ledger import IMAGE_TOKENS
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.store import StoreResource
from dagster_project.simulation.openai_stub import OpenAIStub
from schemas.frames import to_frame
from schemas.records import Article, ClaimAppearances, Medium
from tests.ingest_shapes import FIXTURES
from tests.test_llm import MESSAGES, SCHEMA, Rating

PROMPTS = PROJECT_ROOT / "prompts"
TEXT = {"input_cost_per_token": 1e-6, "output_cost_per_token": 4e-6}
EYES = {"input_cost_per_token": 2e-6, "output_cost_per_token": 8e-6}


def _jpeg(i: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 48), (i * 37 % 256, i * 91 % 256, i * 53 % 256)).save(buf, "JPEG")
    return buf.getvalue()


def _image(i: int) -> Medium:
    """A stored image as the media store names it: by the sha256 of its bytes (stage 5's OCR cache keys them so)."""
    sha = hashlib.sha256(_jpeg(i)).hexdigest()
    return Medium(medium_id=sha, kind="image", path=f"images/{sha[:2]}/{sha}.jpg", source_url=f"https://x.example/{i}.jpg",
                  width=640, height=480)


def ocr_read(cache_path, images: dict[int, str]) -> None:
    """Stage 5's OCR cache beside the LLM cache, as if it had read ``images`` (image number -> its text)."""
    from assets.rules.media_text import TextCache

    for i, text in images.items():
        cache = TextCache(cache_path, reader=lambda jpeg, text=text: text)
        cache.read_text(_jpeg(i))
        cache.close()


def plan_quarter(tmp_path, monkeypatch, text_window: int = 128000, stages: dict | None = None):
    """The upstream tables, an earlier quarter's ledger row and a config; ``text_window`` is the text member's
    context window (the eyes member's is 128,000 tokens: it reads every article whole); ``stages``: the config's
    stage settings (the defaults without)."""
    monkeypatch.setenv("PLAN_STUB_KEY", "sk-test")
    claims = json.loads((FIXTURES / "gfc_claims_search_ar_excerpt.json").read_text(encoding="utf-8"))
    reviews, _, _ = ingest([("factcheck_api", "gfc.json", claims)], None)
    reviews = reviews[:3]
    rows = [ClaimAppearances(**{**r.model_dump(), "quarter": "2025Q4"}, media=[_image(1), _image(2)] if i == 0 else [])
            for i, r in enumerate(reviews)]
    body = json.loads((FIXTURES / "afp_B2LA2G3_expected.json").read_text(encoding="utf-8"))
    text = json.dumps(body, ensure_ascii=False)  # the real article's sections as text: long, real prose
    articles = [Article(review_id=r.review_id, review_url=r.review_url, final_url=r.review_url, raw_chars=len(text),
                        text=text, title="t") for r in reviews]
    store = StoreResource(root=str(tmp_path / "data" / "data"))
    store.write_table("appearances", "2025Q4", to_frame(rows, ClaimAppearances), "run1")
    store.write_table("articles", "2025Q4", to_frame(articles, Article), "run1")
    # an earlier quarter in the ledger: one paid rate_claim answer of 20 completion tokens
    stub = OpenAIStub(lambda mode, body: (200, '{"category": "positive", "certainty": "certain", "justification": "x"}'))
    members = [
        EnsembleMember(name="text", model="openai/text-model", api_base=stub.base("ok"), api_key_env="PLAN_STUB_KEY",
                       max_tokens=300, context_window=text_window, **TEXT),
        EnsembleMember(name="eyes", model="openai/eyes-model", api_base=stub.base("ok"), api_key_env="PLAN_STUB_KEY",
                       max_tokens=300, vision=True, context_window=128000, **EYES),
    ]
    llm = LLMResource(members=members, cache_path=str(tmp_path / "data" / "llm_cache.sqlite"))
    llm.set_quarter("2025Q3")
    llm.complete_json("text", MESSAGES, SCHEMA, Rating, template_id="rate_claim", template_hash="h", stage="scored_claims")
    stub.close()  # the plan must not call anyone: the members now point at a closed port
    config = {"data_dir": str(tmp_path / "data"), "llm": {
        "members": [m.model_dump() for m in members], "budget_usd": 1.0}, **({"stages": stages} if stages else {})}
    path = tmp_path / "veritas.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path), rows, articles


@pytest.fixture()
def planned_quarter(tmp_path, monkeypatch):
    return plan_quarter(tmp_path, monkeypatch)[:2]


def test_plan_counts_calls_tokens_and_cost(planned_quarter, capsys):
    config, _ = planned_quarter
    assert main(["plan", "--config", config, "--quarter", "2025Q4", "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    stages = {s["stage"]: s for s in plan["stages"]}
    # stage 5: one media-filter call for claim 0's two images, by the member that sees images (stage 5's
    # filter_order), and one normalisation per claim by the first member
    assert stages["normalized_claims"]["by_member"]["text"]["calls"] == 3
    assert stages["normalized_claims"]["by_member"]["eyes"]["calls"] == 1
    # stage 6 (upper bound: every claim kept): per member, a media rating per medium + veracity + coverage
    six = stages["scored_claims"]
    # the three are rated "excitement", "misleading", "misleading": the claim is wrong, so per member a media rating
    # per medium and veracity, never context coverage (asked only where veracity comes out positive)
    assert six["basis"] == ("all 3 appearances rows kept by stage 5, questions as their ratings predict; on demand: 3 "
                            "of the 3 rated false")
    assert {m: v["calls"] for m, v in six["by_member"].items()} == {"text": 2 + 3, "eyes": 2 + 3}
    # the same prompts; the vision member also pays the two images of claim 0 on each of its 3 calls
    assert six["by_member"]["eyes"]["prompt_tokens"] - six["by_member"]["text"]["prompt_tokens"] == 3 * 2 * IMAGE_TOKENS
    # completion tokens: the ledger's average for rate_claim (20); for rate_media, never seen, a typical answer's
    assert six["by_member"]["text"]["completion_tokens"] == 2 * TYPICAL_COMPLETION["rate_media"] + 3 * 20
    for member, price in (("text", TEXT), ("eyes", EYES)):
        v = six["by_member"][member]
        assert v["cost_usd"] == pytest.approx(v["prompt_tokens"] * price["input_cost_per_token"]
                                              + v["completion_tokens"] * price["output_cost_per_token"])
    # stage 7 on demand: three Compromised claims and no Intact one make one pair with one variant; with the 30%
    # spare and at 85% holding, two rewrites of the text claims (claim 0, with media, is the Compromised half: the
    # halves' media may differ by one claim): rewrite + check by the first member in each of the rounds a rewrite is
    # expected to take (two refine rounds allowed by default), then a full re-rating (veracity and coverage)
    seven = stages["rectified_claims"]
    assert seven["basis"] == ("3 claims labelled by their ratings; on demand: 1 variants lacking of 3 Compromised, "
                              "30% spare or 39% detectable, 2 rewrites at 85% holding")
    rounds = expected_rounds(2)
    assert 1.1 < rounds < 1.5
    assert (seven["by_member"]["text"]["calls"], seven["by_member"]["eyes"]["calls"]) == (round(2 * 2 * rounds) + 4, 4)
    # the jobs run over the expected release: one pair, claim 0 (Compromised: its two images and veracity) and a
    # text claim's variant (Intact: veracity and coverage). The closed-book verifier rates them as stage 6 does, by
    # the first member alone; the evaluation asks no model without its contamination check
    assert stages["predictions"]["basis"] == "2 expected release claims, closed_book"
    assert stages["predictions"]["by_member"] == {**stages["predictions"]["by_member"], "eyes": {
        "calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}}
    assert stages["predictions"]["calls"] == 4 + 1 and stages["evaluation"]["calls"] == 0
    assert plan["total"]["calls"] == 4 + 10 + seven["calls"] + 5 and seven["calls"] == round(2 * 2 * rounds) + 8
    assert plan["total"]["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in plan["stages"]))
    assert plan["total"]["cost_complete"] is True
    assert plan["prices_per_m"] == {"text": [1.0, 4.0], "eyes": [2.0, 8.0]}
    # next to the actual cost of the earlier quarter
    assert plan["earlier_quarters"] == [{"quarter": "2025Q3", "calls": 1, "model_calls": 1,
                                         "cost_usd": pytest.approx(100e-6 + 20 * 4e-6),
                                         "by_stage": {"scored_claims": pytest.approx(100e-6 + 20 * 4e-6)}}]
    assert (plan["budget_usd"], plan["already_spent_usd"]) == (1.0, 0.0)


def test_plan_table_and_missing_upstream(planned_quarter, capsys):
    config, _ = planned_quarter
    assert main(["plan", "--config", config, "--quarter", "2025Q4"]) == 0
    out = capsys.readouterr().out
    assert "Actual cost of earlier quarters (ledger):" in out and "2025Q3: 1 calls (1 paid)" in out
    assert "text: $1.000 / $4.000 per million input / output tokens" in out
    assert main(["plan", "--config", config, "--quarter", "2025Q1"]) == 2
    assert "no appearances table for 2025Q1" in capsys.readouterr().err


def test_plan_fits_each_members_evidence_to_its_budget(tmp_path, monkeypatch, capsys):
    """A member with a small context window reads the article cut to its token budget, as scored_claims cuts it."""
    from assets.ensemble.evidence import fit_evidence

    def stage_six(window: int, folder: str) -> dict:
        config, _, articles = plan_quarter(tmp_path / folder, monkeypatch, text_window=window)
        assert main(["plan", "--config", config, "--quarter", "2025Q4", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        return next(s for s in plan["stages"] if s["stage"] == "scored_claims")["by_member"], articles, config

    whole, articles, _ = stage_six(128000, "wide")
    cut, _, _ = stage_six(2000, "narrow")  # a budget of 1,000 tokens: half the window (evidence_context_share)
    assert cut["eyes"] == whole["eyes"]  # the other member still reads every article whole
    # per claim, the text member's veracity rating (+ 2 media ratings for claim 0) lose what fit_evidence left out
    text_calls = [3, 1, 1]
    _, rows = plan_quarter(tmp_path / "rows", monkeypatch)[:2]
    # a cut article's prompt also says where parts were left out: the template's note, once per call
    note = re.search(r'\{% if "\[…\]" in evidence %\}(.*?)\{% endif %\}', (PROMPTS / "_evidence.j2").read_text(),
                     re.DOTALL)
    saved_chars = -len(note.group(1)) * sum(text_calls)
    for calls, row, article in zip(text_calls, rows, articles):
        fitted, left_out = fit_evidence(article.text, row.claim_text, 1000)
        assert left_out and len(fitted) < len(article.text)
        saved_chars += calls * (len(article.text) - len(fitted))
    # prompts are counted at 4 characters a token, floored per call: within one token per call of the exact share
    assert abs((whole["text"]["prompt_tokens"] - cut["text"]["prompt_tokens"]) - saved_chars / 4) <= sum(text_calls)


def test_plan_counts_the_media_rule_where_the_claims_media_carry_their_wording(tmp_path, monkeypatch, capsys):
    """Issue 49: stage 7 keeps a rewrite of a claim whose media carry its wording only if it keeps those words. The
    rule refuses a draft before the checker is asked (a writer call alone), up to the rounds allowed, and a claim
    whose every round it refuses is not re-rated. Every Compromised claim is rewritten here (rectify: all): claim 0,
    with its two images, the same in each quarter but for what stage 5's OCR read in them."""
    claim0 = plan_quarter(tmp_path / "rows", monkeypatch)[1][0].claim_text

    def stage_seven(folder: str, read: str | None) -> tuple[dict, dict]:
        config, _, _ = plan_quarter(tmp_path / folder, monkeypatch, stages={"rectify": "all"})
        if read is not None:
            ocr_read(tmp_path / folder / "data" / "ocr_cache.sqlite", {1: read, 2: "@ x.example"})
        assert main(["plan", "--config", config, "--quarter", "2025Q4", "--json"]) == 0
        plan = json.loads(capsys.readouterr().out)
        return next(s for s in plan["stages"] if s["stage"] == "rectified_claims"), plan

    carrying, plan = stage_seven("carrying", claim0[:40].replace(" ", ""))  # the OCR drops the spaces of a line
    other, _ = stage_seven("other", "Sunset over the harbour, 2019")
    unread, unread_plan = stage_seven("unread", None)  # before stage 5: its OCR has read nothing yet
    rule, rounds = media_rule(2), expected_rounds(2)  # two refine rounds by default: three drafts at most
    assert 0.4 < rule["excluded"] < 0.5 and rule["refused_calls"] > 1.3 and rule["checked_rounds"] < 0.75
    assert carrying["media_rule"] | {"carry_rate": None, "measured_on": None} == {
        "rewrites": 3, "with_media": 1, "read_in_ocr_cache": 1, "read_carrying": 1, "expected_carrying": 1.0,
        "expected_retried": round(rule["retried"], 1), "expected_excluded": round(rule["excluded"], 1),
        "carry_rate": None, "refused_first": rule["retried"], "refused_again": pytest.approx(0.92),
        "rounds_allowed": 3, "measured_on": None}
    assert other["media_rule"]["read_carrying"] == 0 and other["media_rule"]["expected_carrying"] == 0
    # claim 0's rewrite: the writer (text) drafts each refused round again, unchecked; the checker (eyes) sees only
    # the drafts the rule passes; and each member's re-rating (2 media, veracity, coverage) is paid only where the
    # rule did not exclude the claim
    by = {name: {m: v["calls"] for m, v in s["by_member"].items()} for name, s in
          (("carrying", carrying), ("other", other), ("unread", unread))}
    writes = rule["refused_calls"] + rule["checked_rounds"] - rounds
    checks = rule["checked_rounds"] - rounds
    assert by["carrying"]["text"] - by["other"]["text"] == pytest.approx(writes - 4 * rule["excluded"], abs=1)
    assert by["carrying"]["eyes"] - by["other"]["eyes"] == pytest.approx(checks - 4 * rule["excluded"], abs=1)
    assert by["carrying"] != by["other"]
    # without the OCR's text, the claim carries its wording at the rate measured on the rehearsal, and the plan says so
    p = MEDIA_CARRY_RATE["image"]
    assert unread["media_rule"]["read_in_ocr_cache"] == 0 and unread["media_rule"]["expected_carrying"] == round(p, 1)
    assert by["unread"]["text"] - by["other"]["text"] == pytest.approx(p * (writes - 4 * rule["excluded"]), abs=1)
    assert "media rule: ~1 with media carrying their wording" in carrying["basis"]
    assert plan["assumptions"] == [(
        "stage 7: 3 rewrites, 1 with media: ~1 expected to carry their claim's wording (OCR overlap >= 80; 1 read in "
        "stage 5's OCR cache, 1 of them carrying), of which ~0 to need a retry (a writer call, no check) and ~0 to "
        "be excluded after 3 refused rounds, not re-rated (the rule refusing 48% of first drafts and 92% of "
        "retries); rates measured on the default rehearsals of 2026-12-07 (bench/rehearsal.py; simulated quarter "
        "and writer)")]
    assert f"1 not read yet, at the media text overlap rate of image {p:.2f}" in unread_plan["assumptions"][0]
    assert main(["plan", "--config", str(tmp_path / "unread" / "veritas.yaml"), "--quarter", "2025Q4"]) == 0
    assert "  stage 7: 3 rewrites, 1 with media: ~1 expected to carry" in capsys.readouterr().out


def test_on_demand_the_plan_draws_more_candidates_where_the_media_rule_excludes_rewrites(tmp_path, monkeypatch):
    """On demand, stage 7 goes on to the next candidate when the media rule excludes one: a quarter whose candidates'
    media carry their wording plans more rewrites, and more calls, than the same quarter whose media do not."""
    from assets.selection.channels import compact
    from dagster_project.config import load_config
    from dagster_project.stage_settings import stage_settings
    from tests.test_release import claim as scored

    config, _, _ = plan_quarter(tmp_path, monkeypatch)
    llm = LLMResource(**load_config(config)["llm"])
    words = ["harbour", "lantern", "quarry", "violin", "meadow", "tundra", "saffron", "glacier", "orchid", "pylon",
             "compass", "ember", "falcon"]
    text = [" ".join(random.Random(i).sample(words, 7)) + f" {i}" for i in range(70)]
    # 5 Intact claims and 65 Compromised ones, every other one with a picture: a release of 30 at a media share of 0.5
    # lacks 10 Intact variants, and the 30% spare and the share the adversarial filter leaves out ask for 22
    claims = [scored(f"{'i' if i < 5 else 'c'}{i}-o", 0.8 if i < 5 else -0.8, "<image:0> " + text[i], media=[_image(i)])
              if i < 5 or i % 2 else scored(f"c{i}-o", -0.8, text[i]) for i in range(70)]

    def planned(shown):
        planner = Planner(llm, stage_settings({"release_size": 30, "media_share": 0.5}), {})
        planner.media_text = lambda media: [shown(media[0])]
        chosen, _, how = planner.to_rewrite(claims)
        return chosen, how, planner.rectify(chosen, {}, "")

    wording = {_image(i).path: compact(text[i])[:40] for i in range(70)}
    carry, how_carry, est_carry = planned(lambda m: wording[m.path])
    plain, how_plain, est_plain = planned(lambda m: "Sunset over the harbour, 2019")
    assert "10 variants lacking of 65 Compromised" in how_plain and len(plain) == 26
    media = sum(bool(c.media) for c in plain)
    assert 0 < media < len(plain) < len(carry) < 45  # more candidates drawn, and some left
    # the variants expected cover the same variants wanted: REWRITE_SUCCESS per candidate, less the exclusions of
    # those whose media carry their wording
    holds = [REWRITE_SUCCESS * (1 - bool(c.media) * media_rule(2)["excluded"]) for c in carry]
    assert sum(holds[:-1]) < len(plain) * REWRITE_SUCCESS <= sum(holds) + REWRITE_SUCCESS
    assert "less ~6 the media rule excludes (6 more candidates drawn for them)" in how_carry
    assert "media rule" not in how_plain
    assert sum(est_carry.calls.values()) > sum(est_plain.calls.values())
