"""Label rules exact at their edges (issue 25, section 1): each test here fails without the fix it names."""

import json
from datetime import date

import pytest

from assets.ensemble.scoring import (
    aggregate,
    asks_coverage,
    incomplete_property,
    score_claim,
    to_rating,
)
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.simulation.openai_stub import serving
from dagster_project.stage_settings import (
    ClaimRules,
    IngestionSettings,
    ReleaseSettings,
    ScoreSettings,
)
from schemas.answers import MediaRatingAnswer, PropertyAnswer
from schemas.records import NormalizedClaim
from tests.ops_support import rating, rating_reply


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")


def claim(text: str) -> NormalizedClaim:
    return NormalizedClaim(claim_id="c1", review_id="r1", quarter="2020Q2", text=text, original_text=text,
                           normalization="llm", language="en", claim_date=date(2020, 5, 1),
                           review_url="https://fullfact.org/x")


def members(stub, modes, tmp_path) -> LLMResource:
    return LLMResource(cache_path=str(tmp_path / "cache.sqlite"), members=[
        EnsembleMember(name=f"r{i}-{mode}", model="openai/scripted", api_base=stub.base(mode), api_key_env="STUB_KEY",
                       context_window=8192) for i, mode in enumerate(modes)
    ], num_retries=0)


def asked(stub, before: int) -> list[str]:
    return [body["messages"][-1]["content"].rsplit("Rate the claim on ", 1)[-1].split(":")[0]
            for _, body in stub.requests[before:]]


# ---- 1. coverage is not asked at veracity exactly 0 ---------------------------------------------------------
VERACITY_AT_ZERO = {"yes": ("positive", "certain"), "some": ("negative", "rather uncertain"),
                    "most": ("negative", "rather certain")}  # 1, -1/3, -2/3: their float mean is +1.85e-17


def test_a_veracity_mean_of_float_zero_does_not_lean_true():
    ratings = [to_rating(m, "veracity", {"category": c, "certainty": k, "justification": m})
               for m, (c, k) in VERACITY_AT_ZERO.items()]
    veracity = aggregate(ratings, "veracity")
    assert veracity.score != 0.0 and abs(veracity.score) < 1e-15  # the float error the rule must absorb
    assert not asks_coverage(veracity)
    assert incomplete_property(0, {"media_verdicts": [], "veracity": veracity, "context_coverage": None}, 3) == ""


def test_coverage_is_not_asked_when_the_raters_mean_is_zero(tmp_path):
    def reply(mode, body):
        category, certainty = VERACITY_AT_ZERO[mode]
        return rating_reply(body["messages"][-1]["content"], rating("positive"), rating(category, certainty))

    with serving(reply) as stub:
        before = len(stub.requests)
        score_claim(claim("Hot steam cures the virus"), "evidence", members(stub, list(VERACITY_AT_ZERO), tmp_path),
                    ScoreSettings(max_rating_spread=2.0), ClaimRules(), None)
        assert asked(stub, before) == ["veracity"] * 3


# ---- 2. a judgement with certainty "unknown" is an invalid answer, re-asked ----------------------------------
@pytest.mark.parametrize("category", ["positive", "negative"])
def test_a_judgement_without_certainty_is_invalid(category):
    with pytest.raises(ValueError, match="needs a certainty"):
        PropertyAnswer.model_validate({"category": category, "certainty": "unknown", "justification": "j"})
    with pytest.raises(ValueError, match="needs a certainty"):
        MediaRatingAnswer.model_validate({"authenticity": {"category": category, "certainty": "unknown",
                                                           "justification": "j"},
                                          "contextualization": rating("positive")})
    assert PropertyAnswer.model_validate({"category": "unknown", "certainty": "unknown", "justification": "j"})
    assert PropertyAnswer.model_validate({"category": category, "certainty": "rather uncertain", "justification": "j"})


def test_a_judgement_without_certainty_is_re_asked_not_scored_zero(tmp_path):
    def reply(mode, body):
        re_asked = any("That answer was rejected" in str(m.get("content")) for m in body["messages"])
        veracity = rating("negative", "certain" if re_asked or mode == "fine" else "unknown")
        prompt = [m["content"] for m in body["messages"] if m["role"] == "user"][0]  # the re-ask ends with a correction
        return rating_reply(prompt, rating("positive"), veracity)

    with serving(reply) as stub:
        before = len(stub.requests)
        llm = members(stub, ["sloppy", "fine", "fine"], tmp_path)
        scored, reason = score_claim(claim("Hot steam cures the virus"), "evidence", llm, ScoreSettings(), ClaimRules(),
                                     None)
        assert reason == ""
        assert [r.score for r in scored.ratings] == [-1.0, -1.0, -1.0]  # not 0 for the sloppy member's first answer
        assert scored.integrity.score == -1.0 and scored.integrity.label == "compromised"
        sloppy = [body for mode, body in stub.requests[before:] if mode == "sloppy"]
        assert len(sloppy) == 2 and "needs a certainty" in sloppy[1]["messages"][-1]["content"]
        assert json.loads(sloppy[1]["messages"][-2]["content"])["certainty"] == "unknown"  # its bad answer shown


def test_a_cached_judgement_without_certainty_is_a_failure_not_a_zero():
    from assets.ensemble.asking import ask
    from dagster_project.resources.llm import LLMAnswer

    class CachedOnly:
        """Answers from a cache written before the rule: the answer model is not applied to a cache hit."""

        def is_vision(self, member):
            return False

        def complete_json(self, member, *args, **kwargs):
            parsed = {"category": "positive", "certainty": "unknown", "justification": "old", "tags": []}
            return LLMAnswer(member=member, model="m", parsed=parsed, raw=json.dumps(parsed), error=None, cache_hit=True,
                             prompt_tokens=0, completion_tokens=0, cost_usd=0.0, latency_s=0.0)

    answer = ask(CachedOnly(), "a", "rate_claim", PropertyAnswer, stage="scored_claims", property="veracity",
                 evidence="e", claim="c", language="en", claim_date="")
    assert answer.parsed is None and answer.error.startswith("invalid_output: cached answer")


# ---- 3. a published (rounded) score is binned with the rounding's tolerance ----------------------------------
def test_two_raters_at_one_sixth_publish_017_and_keep_their_7_bin():
    from assets.evaluation.evaluation import confusion, evaluate, metrics
    from assets.release.numbering import _score
    from assets.rules.bins import bin3, bin3_published, bin7, bin7_published
    from tests.test_evaluation import gold, pred

    for first, second in [(("positive", "rather uncertain"), ("unknown", "unknown")),
                          (("negative", "rather uncertain"), ("unknown", "unknown"))]:
        ratings = [to_rating(m, "veracity", {"category": c, "certainty": k, "justification": m})
                   for m, (c, k) in zip("ab", (first, second))]
        exact = aggregate(ratings, "veracity")
        published = _score(exact).score
        assert abs(exact.score) == pytest.approx(1 / 6) and abs(published) == 0.17
        assert bin7(exact.score) == 3 and bin7_published(published) == 3  # bin7(published) was 4 or 2
        assert bin3_published(published) == bin3(exact.score) == "unknown"
        rows = [{"gold": published, "pred": exact.score}]
        assert metrics(rows)["acc7"] == 1.0 and confusion(rows, 7)["matrix"][3][3] == 1
    # every other published value keeps its bin: 0.18 is above the cut, 0.34 above 1/3, 0.83 below 5/6
    assert [bin7_published(x) for x in (0.18, -0.18, 0.83, 0.84, 0.5, 0.49, 0.51)] == [4, 2, 5, 6, 4, 4, 5]
    assert [bin3_published(x) for x in (0.33, 0.34, -0.33, -0.34)] == ["unknown", "intact", "unknown", "compromised"]
    report = evaluate([gold(1, 0.17), gold(2, -0.17)], [pred(1, integrity=1 / 6), pred(2, integrity=-1 / 6)])
    assert report["property"]["integrity"]["acc7"] == 1.0


def test_the_card_states_the_rounding_tolerance():
    from assets.release.card import card_text

    meta = {"claim_counts": {"total": 2, "intact": 1, "compromised": 1, "nei": 0},
            "media_counts": {"images": 0, "videos": 0}, "languages": ["en"]}
    text = card_text({"2025Q4": meta}, {"2025Q4": "claims.parquet"}, "VeriTaS")
    scheme = text.split("## Label scheme", 1)[1]
    assert "rounded to 2 decimals" in scheme and "within 0.005 of a bin's cut" in scheme


# ---- 4. region-tagged languages read their base language's verdict list --------------------------------------
def ifcn_rows() -> list[dict]:
    import csv
    from pathlib import Path

    rows = []
    for name in ("ifcn_excerpt.csv", "ifcn_publishers_excerpt.csv"):
        with open(Path(__file__).parent / "fixtures" / name, encoding="utf-8") as f:
            rows += list(csv.DictReader(f))
    return rows


def slug_text(url: str) -> str:
    """A real fact-check's URL slug as words ("e-falso-que-alcool-..." -> "e falso que alcool ...")."""
    return url.rstrip("/").rsplit("/", 1)[-1].replace("-", " ")


@pytest.mark.parametrize("organization,tag", [
    ("Aos Fatos", "pt-BR"), ("Agência Lupa", "pt-br"), ("OjoPúblico", "es-419"), ("Chequeado", "es-419"),
    ("Animal Político", "es-MX"),
])
def test_region_tagged_languages_read_the_base_languages_verdict_words(organization, tag):
    from assets.rules.claim_text import base_language, verdict_leak

    texts = [slug_text(r["fact_check_url"]) for r in ifcn_rows()
             if r["organization"] == organization and " falso " in f" {slug_text(r['fact_check_url'])} "]
    assert texts, organization  # real Latin American and Brazilian fact-checks whose headline says "falso"
    for text in texts:
        # the vocabulary of the tag's base language is what this test is about: the slug lower-cases the headline
        # ("falso suavitel ..."), and where "falso" stands is the positional rules' matter (issue 48: a lower-case
        # word that agrees with it makes it an adjective), so the word is looked for anywhere
        assert verdict_leak(text, tag, positional=False) == "falso", text
        assert verdict_leak(text, base_language(tag), positional=False) == "falso"
        assert verdict_leak(text, "en", positional=False) == ""  # English's list alone has no "falso"
    assert base_language(tag) in ("pt", "es")


def test_the_quarters_ratings_count_for_every_tag_of_their_language():
    from assets.rules.claim_text import LeakVocabulary

    class Review:
        def __init__(self, rating_text, language):
            self.rating_text, self.language = rating_text, language

    leaks = LeakVocabulary.from_reviews([Review("Enganoso", "pt-BR"), Review("Sin evidencia", "es-419")])
    assert "enganoso" in leaks.words("pt") and "sin evidencia" in leaks.words("es-AR")
    assert "sin evidencia" not in leaks.words("pt-BR")


# ---- 5. near-duplicates: token_set_ratio and a length guard, in one place for the release and recurring claims --
def averitec(*indices: int) -> list[str]:
    """Real claims of the AVeriTeC dev set, by their index in it."""
    import gzip
    from pathlib import Path

    with gzip.open(Path(__file__).parent / "fixtures" / "averitec_dev.json.gz", "rt", encoding="utf-8") as f:
        claims = json.load(f)
    return [claims[i]["claim"] for i in indices]


SUBSETS = [(457, 425), (148, 493)]  # a claim, and a longer, different claim that contains its words
REWORDINGS = [(203, 221), (199, 202), (204, 228), (210, 225), (194, 204)]  # one claim, reworded or re-punctuated


def scored_claim(cid: str, text: str):
    from schemas.records import Integrity, ScoredClaim

    return ScoredClaim(claim_id=cid, review_id=cid, quarter="2025Q3", text=text, original_text=text,
                       normalization="original", review_url=f"https://example.org/{cid}",
                       integrity=Integrity(score=-1.0, decisive_property="veracity", label="compromised"))


@pytest.mark.parametrize("pair", SUBSETS + REWORDINGS)
def test_near_duplicates_of_real_claims(pair):
    from rapidfuzz import fuzz

    from assets.release.recurring import match_recurring
    from assets.rules.near_duplicates import SCORER, compared_text, near_duplicate
    from assets.selection.release_selection import remove_near_duplicates

    similarity = ReleaseSettings().text_duplicate_similarity
    short, long = averitec(*pair)
    a, b = compared_text(short), compared_text(long)
    assert SCORER is fuzz.token_set_ratio and SCORER(a, b) >= similarity  # the scorer alone calls both kinds one
    same = pair in REWORDINGS
    assert near_duplicate(a, b, similarity) is same and near_duplicate(b, a, similarity) is same
    kept, dropped = remove_near_duplicates([scored_claim("a", short), scored_claim("b", long)], similarity)
    assert dropped == int(same) and [c.claim_id for c in kept] == (["a"] if same else ["a", "b"])
    earlier = {"2025Q2": [{"id": 7, "text": b, "phashes": []}]}
    found = match_recurring([scored_claim("a", short)], earlier, similarity, -1)
    assert found == ({"a": {"quarter": "2025Q2", "id": 7, "by": "text"}} if same else {})
    found = match_recurring([scored_claim("b", long)], {"2025Q2": [{"id": 7, "text": a, "phashes": []}]}, similarity, -1)
    assert bool(found) is same


def test_a_subset_does_not_hide_a_rewording_further_on():
    from assets.rules.near_duplicates import compared_text, first_near_duplicate

    fox, radio, nigeria, reworded = (compared_text(t) for t in averitec(425, 457, 203, 221))
    assert first_near_duplicate(radio, [fox], 92) is None
    assert first_near_duplicate(nigeria, [fox, radio, reworded], 92) == 2


# ---- 6. an MSE that counts a skipped claim as "don't know" (0), with coverage, per quarter and overall ----------
def test_skipping_hard_claims_does_not_pay_on_the_mse_with_missing_as_0():
    from assets.evaluation.evaluation import evaluate_quarters, text_table
    from schemas.records import Prediction
    from tests.test_evaluation import gold

    def run(answers: dict[int, float]) -> dict:
        quarters = {}
        for q, offset in (("2025Q4", 0), ("2026Q1", 10)):
            g = [gold(offset + c, score) for c, score in ((1, 1.0), (2, -1.0), (3, 1.0), (4, -1.0))]
            p = [Prediction(claim_id=offset + c, quarter=q, system="s", integrity=x) for c, x in answers.items()]
            quarters[q] = (g, p)
        return evaluate_quarters(quarters, cutoff="2025Q4", system="s")

    honest = run({1: 0.5, 2: -0.5, 3: 0.5, 4: -0.5})  # every claim answered, each 0.5 off
    skipper = run({1: 1.0, 2: -1.0})  # the easy ones exactly, the hard ones (3, 4) skipped
    for report in [*honest["quarters"].values(), honest["overall"]]:
        assert report["coverage"] == 1.0
        assert report["property"]["integrity"]["mse"] == pytest.approx(0.25)
        assert report["mse_missing_as_0"] == pytest.approx(0.25)
    for report in [*skipper["quarters"].values(), skipper["overall"]]:
        assert report["coverage"] == 0.5
        assert report["property"]["integrity"]["mse"] == 0.0  # today's figure: the skipper looks better than honest
        assert report["mse_missing_as_0"] == pytest.approx(0.5)  # (0 + 0 + 1 + 1) / 4: it is not
    table = text_table(skipper)
    for name, n, total in (("2025Q4", 2, 4), ("2026Q1", 2, 4), ("overall", 4, 8)):
        assert (f"integrity {name}: coverage=0.5000 ({n}/{total} claims) MSE answered=0.0000 "
                f"MSE missing as 0=0.5000") in table


# ---- 7. the manifest records who saw the images; the run and the card warn when media met blind raters ---------
def release_run(tmp_path, vision: tuple[bool, ...]):
    import dagster as dg

    from assets.release.asset import release
    from dagster_project.resources.llm import EnsembleMember
    from dagster_project.resources.store import StoreResource
    from schemas.frames import to_frame
    from schemas.records import Medium, ScoredClaim
    from tests.test_release import TOPICS, claim, jpeg

    store = StoreResource(root=str(tmp_path / "data"))
    photos = [store.media_store().put_image(jpeg(c)) for c in [(200, 30, 30), (30, 30, 200)]]
    media = [Medium(medium_id=p.sha256, kind="image", path=p.path, width=p.width, height=p.height, phash=p.phash)
             for p in photos]
    claims = [claim("c1-o", -1.0, f"<image:0> {TOPICS[0]}", [media[0]]), claim("c2-o", -0.6667, TOPICS[1]),
              claim("c6-o", 0.6667, f"<image:0> {TOPICS[7]}", [media[1]]), claim("c7-o", 1.0, TOPICS[8])]
    store.write_table("rectified_claims", "2020Q2", to_frame(claims, ScoredClaim), "run0")
    llm = LLMResource(cache_path=str(tmp_path / "cache.sqlite"), members=[
        EnsembleMember(name=f"m{i}", model=f"openai/m{i}", api_base="http://127.0.0.1:9/v1", vision=v)
        for i, v in enumerate(vision)])
    instance = dg.DagsterInstance.ephemeral()
    result = dg.materialize([release], partition_key="2020-04", instance=instance, resources={
        "store": store, "release_rules": ReleaseSettings(release_size=4, media_share=0.8), "claim_rules": ClaimRules(),
        "ingestion": IngestionSettings(), "llm": llm})
    assert result.success
    folder = store.latest_release("2020Q2")
    warnings = [e.user_message for e in instance.all_logs(result.run_id) if e.level >= 30]
    return json.loads((folder / "manifest.json").read_text()), (folder / "README.md").read_text(), warnings


def test_media_rated_by_members_that_cannot_see_them_are_recorded_and_warned(tmp_path):
    manifest, card, warnings = release_run(tmp_path, (False, True, False))
    assert [(m["name"], m["vision"]) for m in manifest["models"]] == [("m0", False), ("m1", True), ("m2", False)]
    assert manifest["selection"]["media_claims"] == 2
    sentence = "2 of the released claims have media, and 2 of the 3 ensemble members (m0, m2) cannot see images"
    assert sum(sentence in w for w in warnings) == 1
    assert sentence in card.split("## Media seen by the raters", 1)[1]


def test_an_ensemble_that_sees_the_media_gets_no_warning(tmp_path):
    manifest, card, warnings = release_run(tmp_path, (True, True))
    assert [m["vision"] for m in manifest["models"]] == [True, True]
    assert not any("cannot see images" in w for w in warnings) and "cannot see images" not in card


# ---- 8. the registry keeps a signatory that IFCN lists, and says where each status comes from -----------------
def test_medical_dialogues_is_a_signatory_with_its_ifcn_profile_as_source():
    from collections import Counter

    from assets.ingestion.publisher_registry import read_registry_rows
    from assets.ingestion.publishers import load_registry
    from dagster_project.config import PROJECT_ROOT
    from schemas.records import Review
    from tests.test_trusted_reviews import filter_trusted

    registry = PROJECT_ROOT / "registry" / "publishers.csv"
    rows = {r["publisher_id"]: r for r in read_registry_rows(registry)}
    row = rows["medical-dialogues"]
    assert row["ifcn_status"] == "active"
    assert "ifcncodeofprinciples.poynter.org/profile/medical-dialogues-" in row["source"]
    assert "no IFCN or EFCSN listing found" not in row["source"]
    urls = ["https://medicaldialogues.in/fact-check-methodology",  # its own pages, as its reviews link them
            "https://health.medicaldialogues.in/fact-check-methodology"]
    reviews = [Review(review_id=u, review_url=u, claim_text="c", quarter="2025Q4") for u in urls]
    kept, stats, unknown = filter_trusted(reviews, load_registry(str(registry)))
    assert [k.publisher_id for k in kept] == ["medical-dialogues"] * 2
    assert unknown == Counter() and "not_a_signatory" not in dict(stats.drops)
    # every row without a status says why: on no list, or a list that is not a signatory listing
    for pid, r in rows.items():
        if not r["ifcn_status"] and not r["efcsn_status"]:
            assert "no IFCN/EFCSN" in r["source"] or "no status" in r["source"], pid

