"""The retrieval verifier: temporal guard, knowledge store from the demo WARC, few-shot choice, question strategies,
and the end-to-end run release -> predictions -> evaluation report with plots (scripted model on loopback)."""

import json
import re
from datetime import date
from pathlib import Path

import dagster as dg
import pytest
from PIL import Image
from warcio.archiveiterator import ArchiveIterator

from assets.evaluation.evaluation import evaluation
from assets.evaluation.knowledge import KnowledgeStore, admissible, page_date, wayback_date
from assets.evaluation.predictions import predictions
from assets.evaluation.verifier import (
    NO_ANSWER,
    FewShotPool,
    ToolResult,
    Verifier,
    default_backends,
)
from dagster_project.config import PROJECT_ROOT
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import ErrorBudgetSettings, VerifierSettings
from schemas.frames import from_frame, to_frame
from schemas.records import Article, NormalizedClaim, Prediction
from dagster_project.simulation.openai_stub import serving
from tests.ops_support import rating, rating_reply

WARC = PROJECT_ROOT / "demo/snapshot/pages.warc.gz"
HONJO_IMAGE = "https://web.archive.org/web/20200422093011im_/"  # prefix of the archived Facebook image (2020-04-22)


def warc_body(prefix: str) -> bytes:
    with open(WARC, "rb") as f:
        for r in ArchiveIterator(f):
            if r.rec_type == "response" and (r.rec_headers.get_header("WARC-Target-URI") or "").startswith(prefix):
                return r.content_stream().read()
    raise KeyError(prefix)


@pytest.fixture(scope="module")
def knowledge():
    return KnowledgeStore.from_warc([WARC])


# ------------------------------------------------------------------------------------ temporal guard


def test_admissible_rules():
    assert admissible("2020-04-01", "2020-04-05") == (True, "")
    assert admissible("2020-04-05", date(2020, 4, 5)) == (True, "")  # the claim's own day is allowed
    assert admissible("2020-04-06", "2020-04-05") == (False, "after_claim_date")
    assert admissible("", "2020-04-05") == (False, "undated")
    assert admissible("", "2020-04-05", allow_undated=True) == (True, "")
    assert admissible("2020-04-01", None) == (False, "undated_claim")


def test_guard_rejects_a_later_dated_document():
    store = KnowledgeStore()
    store.add_document("https://a.example/before", "The mayor opened the new bridge over the river.", "2020-03-01", "htmldate")
    store.add_document("https://a.example/after", "The mayor opened the new bridge; it was later found unsafe.",
                       "2020-06-01", "htmldate")
    store.add_document("https://a.example/undated", "The mayor and the new bridge, an undated page.", "", "none")
    hits, rejected = store.text_search("mayor bridge", "2020-04-01", k=5)
    assert [h.url for h in hits] == ["https://a.example/before"]
    assert rejected == {"after_claim_date": 1, "undated": 1}
    hits, _ = store.text_search("mayor bridge", "2020-04-01", k=5, allow_undated=True)
    assert sorted(h.url for h in hits) == ["https://a.example/before", "https://a.example/undated"]
    hits, _ = store.text_search("mayor bridge", "2020-07-01", k=5)  # once the claim is later, the document is fair
    assert sorted(h.url for h in hits) == ["https://a.example/after", "https://a.example/before"]


def test_demo_warc_store_dates_and_guard(knowledge):
    stats = knowledge.stats()
    assert (stats["documents"], stats["images"]) == (40, 66)
    assert set(stats["passage_date_sources"]) <= {"htmldate", "archive", "capture"}
    assert wayback_date("https://web.archive.org/web/20200430151204/https://twitter.com/x") == "2020-04-30"
    assert page_date("<html><body>no date here</body></html>", "https://x.org/p", "2026-06-01T12:00:00Z") == \
        ("2026-06-01", "capture")
    # PolitiFact's 5G article is dated 2020-04-07: a claim from 2020-04-05 may not see it, one from 2020-04-10 may.
    early, rejected = knowledge.text_search("video China 5G poles tearing down", "2020-04-05", k=10)
    assert early and all(h.published for h in early)  # something admissible was found, and every hit is dated
    assert all(h.published <= "2020-04-05" for h in early) and rejected == {"after_claim_date": 73}
    assert "politifact.com" not in " ".join(h.url for h in early)
    late, _ = knowledge.text_search("video China 5G poles tearing down", "2020-04-10", k=10)
    assert late and all(h.published and h.published <= "2020-04-10" for h in late)
    assert any("politifact.com" in h.url for h in late)
    # Reverse image search over perceptual hashes: the archived copy is found only from its capture date on.
    data = warc_body(HONJO_IMAGE)
    found, _ = knowledge.reverse_image_search(data, "2020-04-28")
    assert found and found[0].extra["distance"] == 0 and found[0].published == "2020-04-22"
    assert knowledge.reverse_image_search(data, "2020-04-21")[0] == []


def test_knowledge_store_round_trip(tmp_path, knowledge):
    path = knowledge.save(tmp_path / "ks.json")
    again = KnowledgeStore.load(path)
    assert again.stats() == knowledge.stats()
    q = ("Tasuku Honjo coronavirus", "2020-04-28")
    assert [h.url for h in again.text_search(*q)[0]] == [h.url for h in knowledge.text_search(*q)[0]]


# ------------------------------------------------------------------------------------------ few-shot


def test_fewshot_examples_chosen_by_bm25():
    pool = FewShotPool.load()
    assert len(pool.examples) == 60 and all(q["tool"] in ("text_search", "image_search")
                                            for e in pool.examples for q in e["questions"])
    target = pool.examples[17]
    chosen = pool.select(target["claim"], 3)
    assert len(chosen) == 3 and chosen[0]["claim"] == target["claim"]
    # An AVeriTeC-format training file is read as is (tools from the answers' source medium).
    raw = json.loads((Path(__file__).parent / "fixtures/averitec_dev_excerpt.json").read_text())
    assert FewShotPool.load(Path(__file__).parent / "fixtures/averitec_dev_excerpt.json").examples[0]["claim"] == raw[0]["claim"]


# ------------------------------------------------------------------------------------ scripted model


MEMORY = {}  # claim keyword -> paragraphs the scripted model "remembers"


def scripted(mode: str, body: dict):
    system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
    if "planning how to verify" in system:
        n = 1 if "single most useful next question" in user else int(re.search(r"Ask (\d+) different", user).group(1))
        done = len(re.findall(r"^\s*A\d+:", user, re.MULTILINE))
        keywords = re.search(r'"(.+?)"', user.split("Claim (")[1]).group(1)
        tools = ["text_search", "reverse_image_search", "vqa"] if "<image:0>" in user else ["text_search"]
        qs = [{"question": f"Question {done + i + 1}: what was reported about this before?", "tool": tools[(done + i) % len(tools)],
               "query": keywords, "medium_index": 0 if "<image:0>" in user else -1} for i in range(n)]
        return 200, json.dumps({"questions": qs})
    if "answer one fact-checking question from the retrieved evidence" in system:
        first = re.search(r"^\[0\] (\S+) \(([^)]*)\): (.*)$", user, re.MULTILINE)
        return 200, json.dumps({"answer": first.group(3)[:150], "answerable": True, "source": 0})
    if "visual question answering" in system:
        return 200, json.dumps({"answer": "A screenshot of a social media post.", "answerable": True, "source": -1})
    if "Write the fact-check article" in system:
        paragraphs = next((v for k, v in MEMORY.items() if k in user), ["I have no knowledge of this claim."])
        return 200, json.dumps({"paragraphs": paragraphs})
    if "You extract evidence from a fact-check article" in system:
        article = user.split('"""')[1]
        sentences = [s.strip() for s in re.split(r"(?<=[.!?])\s+", article) if len(s.split()) >= 4]
        return 200, json.dumps({"statements": sentences[:10]})
    if "You compare a piece of evidence" in system:
        reference, prediction = user.split('"""')[1].strip(), user.split('"""')[3].strip()
        return 200, json.dumps({"covered": "yes" if reference == prediction else "no"})
    return rating_reply(user, rating("negative"), rating("negative", why="earlier sources contradict it"))


@pytest.fixture(scope="module")
def stub():
    with serving(scripted) as s:
        yield s


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")


def llm_for(stub, tmp_path) -> LLMResource:
    member = EnsembleMember(name="scripted", model="openai/scripted", api_base=stub.base("v"), api_key_env="STUB_KEY")
    return LLMResource(members=[member], cache_path=str(tmp_path / "cache.sqlite"), num_retries=0)


def plans_asked(stub, before: int) -> list[str]:
    out = []
    for _, body in stub.requests[before:]:
        if "planning how to verify" in body["messages"][0]["content"]:
            user = body["messages"][-1]["content"]
            out.append("1" if "single most useful" in user else re.search(r"Ask (\d+) different", user).group(1))
    return out


TEXT_CLAIM = NormalizedClaim(
    claim_id="c2", review_id="r2", quarter="2020Q2", normalization="original", language="en",
    text="A video shows people in China tearing down 5G poles because the network spreads coronavirus.",
    original_text="x", claim_date=date(2020, 4, 5),
    review_url="https://www.politifact.com/factchecks/2020/apr/07/viral-image/no-video-doesnt-show-people-china-destroying-5g-po/",
)


@pytest.mark.parametrize(("strategy", "expected"), [("parallel", ["4"]), ("dynamic", ["1"] * 4), ("hybrid", ["2", "1", "1"])])
def test_question_strategies(stub, tmp_path, knowledge, strategy, expected):
    llm = llm_for(stub, tmp_path)
    verifier = Verifier(llm, "scripted", default_backends(knowledge, llm, "scripted", None), strategy=strategy,
                        n_questions=4, n_parallel=2, fewshot=FewShotPool.load())
    before = len(stub.requests)
    qa, rejected = verifier.questions_and_answers(TEXT_CLAIM)
    assert plans_asked(stub, before) == expected
    assert len(qa) == 4 and len({q.question for q in qa}) == 4
    assert rejected == 292  # the PolitiFact article and other later pages were withheld
    assert sum(len(item.published) for item in qa) > 0  # the guard is checked on real evidence, not on none
    for item in qa:
        assert item.tool == "text_search"
        assert item.published and len(item.published) == len(item.urls)
        assert all(d and d <= "2020-04-05" for d in item.published)
        assert TEXT_CLAIM.review_url not in item.urls
    # The few-shot examples reached the prompt.
    first_plan = next(b for _, b in stub.requests[before:] if "planning how to verify" in b["messages"][0]["content"])
    assert "Examples of how fact-checkers verified similar claims" in first_plan["messages"][-1]["content"]


def test_a_backend_that_ignores_dates_is_caught(stub, tmp_path):
    from assets.evaluation.knowledge import Hit

    def leaky(req):
        return ToolResult(hits=[Hit("https://late.example", "The fact-check says false.", "2020-05-01", "htmldate", 9.0)])

    llm = llm_for(stub, tmp_path)
    verifier = Verifier(llm, "scripted", {"text_search": leaky}, strategy="parallel", n_questions=2)
    before = len(stub.requests)
    qa, rejected = verifier.questions_and_answers(TEXT_CLAIM)
    assert rejected == 2 and [q.answer for q in qa] == [NO_ANSWER, NO_ANSWER] and all(not q.urls for q in qa)
    # No answer prompt was sent: the later-dated text never reached the model (whose planning requests were sent).
    assert len(stub.requests) > before
    assert all("The fact-check says false" not in json.dumps(b) for _, b in stub.requests[before:])


# --------------------------------------------------------------------------------------- end to end


def release_claim(cid, text, when, review_url, integrity, veracity, media=()):
    return {"id": cid, "text": text, "date": when, "language": "en", "review_url": review_url, "media": list(media),
            "veracity": {"score": veracity, "justification": "gold"}, "context_coverage": None,
            "integrity": {"score": integrity, "decisive_property": "veracity"}}


def make_release(store: StoreResource) -> list[dict]:
    """A three-claim 2020Q2 release (VeriTaS format) of demo claims, one with an image from the demo WARC."""
    release = store.base / "releases/2020Q2/v1"
    (release / "images").mkdir(parents=True)
    (release / "images/11.jpg").write_bytes(warc_body(HONJO_IMAGE))
    honjo_url = "https://fullfact.org/online/tasuku-honjo-coronavirus/"
    claims = [
        release_claim(1, "Nobel laureate Professor Tasuku Honjo said the coronavirus is not natural and was "
                         "manufactured in China. <image:11>", "2020-04-28", honjo_url, -1.0, -1.0,
                      [{"type": "image", "id": 11, "file_path": "images/11.jpg",
                        "authenticity": {"score": 1.0, "justification": ""},
                        "contextualization": {"score": -1.0, "justification": ""}}]),
        release_claim(2, TEXT_CLAIM.text, "2020-04-05", TEXT_CLAIM.review_url, -0.67, -0.67),
        release_claim(3, "Inhaling hot steam and drinking hot tea kills the coronavirus and cures COVID-19.",
                      "2020-04-20", "https://africacheck.org/fbcheck/no-hot-steam-and-tea-cant-cure-covid-19/", 0.0, 0.0),
    ]
    (release / "claims.json").write_text(json.dumps({"claims": claims}))
    (release / "meta.json").write_text(json.dumps({"year": 2020, "quarter": 2}))
    (release.parent / "LATEST").write_text("v1")
    return claims


def test_closed_book_mode_through_the_assets(stub, tmp_path):
    store = StoreResource(root=str(tmp_path / "data"))
    make_release(store)
    resources = {"verifier": VerifierSettings(knowledge_cutoff="2024Q4"), "error_budget": ErrorBudgetSettings(),
                 "store": store, "llm": llm_for(stub, tmp_path),
                 "web": WebResource(warc_paths=[str(WARC)], archive_dir=str(tmp_path / "warc"))}
    before = len(stub.requests)
    assert dg.materialize([predictions, evaluation], partition_key="2020-04", resources=resources).success
    preds = from_frame(store.read_table("predictions", "2020Q2"), Prediction)
    assert {p.system for p in preds} == {"closed_book:scripted"} and all(not p.qa and not p.evidence for p in preds)
    # No retrieval: the raters' prompts carry no evidence block, and no question was planned.
    assert plans_asked(stub, before) == []
    payload = json.loads((store.base / "reports/2020Q2/evaluation.json").read_text())
    assert payload["longitudinal"]["closed_book:scripted"]["by_quarter"][0]["relation"] == "before"


def test_end_to_end_release_to_report(stub, tmp_path):
    store = StoreResource(root=str(tmp_path / "data"))
    claims = make_release(store)
    honjo_url = claims[0]["review_url"]
    # The real fact-check articles (from the demo WARC) are the contamination check's oracle.
    import trafilatura

    real = {c["review_url"]: trafilatura.extract(warc_body(c["review_url"]).decode()) for c in claims[:2]}
    store.write_table("articles", "2020Q2", to_frame([
        Article(review_id=f"r{i}", review_url=u, final_url=u, raw_chars=len(t), text=t) for i, (u, t) in enumerate(real.items())
    ], Article))
    # The scripted model "remembers" the Honjo article almost verbatim: that claim must be flagged.
    MEMORY["Tasuku Honjo"] = [s for s in re.split(r"(?<=[.!?])\s+", real[honjo_url]) if len(s.split()) >= 4][:8]

    verifier = VerifierSettings(verifier_mode="retrieval", verifier_strategy="hybrid", verifier_questions=3,
                                verifier_parallel_questions=2, knowledge_warc_paths=[str(WARC)],
                                knowledge_cutoff="2020Q1", contamination_check=True)
    resources = {"verifier": verifier, "error_budget": ErrorBudgetSettings(), "store": store,
                 "llm": llm_for(stub, tmp_path),
                 "web": WebResource(warc_paths=[str(WARC)], archive_dir=str(tmp_path / "warc"))}
    result = dg.materialize([predictions, evaluation], partition_key="2020-04", resources=resources)
    assert result.success

    preds = {p.claim_id: p for p in from_frame(store.read_table("predictions", "2020Q2"), Prediction)}
    assert set(preds) == {1, 2, 3}
    claim_dates = {c["id"]: c["date"] for c in claims}
    for cid, p in preds.items():
        assert p.system == "retrieval-hybrid:scripted" and p.integrity is not None and not p.error
        assert len(p.qa) == 3
        for ev in p.evidence:  # the guard: nothing dated after the claim, never the claim's own fact-check
            assert ev.published and ev.published <= claim_dates[cid] and ev.url != claims[cid - 1]["review_url"]
    assert {q.tool for q in preds[1].qa} == {"text_search", "reverse_image_search", "vqa"}
    reverse = next(q for q in preds[1].qa if q.tool == "reverse_image_search")
    assert reverse.urls and reverse.published == ["2020-04-22"]  # the archived copy, found by perceptual hash
    assert preds[2].rejected_evidence == 234 and preds[2].evidence
    assert preds[1].media[0].id == 11 and preds[1].media[0].contextualization == pytest.approx(-1.0)

    report_dir = store.base / "reports/2020Q2"
    payload = json.loads((report_dir / "evaluation.json").read_text())
    system = "retrieval-hybrid:scripted"
    integrity = payload["systems"][system]["property"]["integrity"]
    assert integrity["n"] == 3
    assert payload["longitudinal"][system]["by_quarter"][0]["relation"] == "after"  # 2020Q2 is after a 2020Q1 cut-off
    for png in ("mse_by_quarter.png", "confusion_integrity.png"):
        with Image.open(report_dir / system.replace(":", "_") / png) as im:
            assert im.format == "PNG"
    assert (report_dir / system.replace(":", "_") / "evaluation.txt").read_text().startswith("system: " + system)
    # Contamination: the remembered article reproduces the oracle evidence; the other claim does not.
    contamination = json.loads((report_dir / "contamination.json").read_text())
    scores = {c["claim_id"]: c for c in contamination["claims"]}
    # 8 remembered sentences reproduce 8 of the oracle's 10 extracted statements exactly; plain METEOR (the
    # official AVeriTeC scorer's) gives each of them 1 - 0.5 / n**3 for its n nltk tokens, then / 10.
    from assets.evaluation.evidence_scoring import nltk_tokens
    shared = [s for s in scores[1]["oracle_statements"] if s in scores[1]["model_statements"]]
    assert scores[1]["n_oracle"] == 10 and len(shared) == 8
    assert scores[1]["score"] == pytest.approx(sum(1 - 0.5 / len(nltk_tokens(s)) ** 3 for s in shared) / 10, abs=1e-9)
    assert scores[1]["contaminated"] is True
    assert scores[2]["contaminated"] is False and scores[2]["score"] < 0.1
    assert scores[3]["score"] is None and scores[3]["reason"] == "no_oracle_evidence"
    assert contamination["models"]["scripted"]["flagged"] == [1]
    assert payload["contamination_controlled"][system]["property"]["integrity"]["n"] == 2


def test_llm_judge_option_for_averitec_scoring(stub, tmp_path):
    from assets.evaluation.evidence_scoring import averitec_score
    from assets.evaluation.verifier_judge import LLMJudge

    raw = json.loads((Path(__file__).parent / "fixtures/averitec_dev_excerpt.json").read_text())[:2]
    judge = LLMJudge(llm_for(stub, tmp_path), "scripted")
    own = averitec_score([{**r, "pred_label": r["label"], "pred_questions": r["questions"]} for r in raw], judge=judge)
    assert own["scorer"] == "llm_judge:scripted" and own["evidence_recall"] == 1.0
    swapped = averitec_score([{**raw[0], "pred_label": raw[0]["label"], "pred_questions": raw[1]["questions"]}], judge=judge)
    assert swapped["evidence_recall"] == 0.0 and swapped["accuracy"] == {0.2: 0.0, 0.25: 0.0, 0.3: 0.0}
    assert judge.failures == 0


def test_text_search_reranker_hook_sees_only_admissible_hits(knowledge):
    from assets.evaluation.verifier import LocalTextSearch, ToolRequest

    seen = []

    def shortest_first(query, hits):
        seen.extend(hits)
        return sorted(hits, key=lambda h: len(h.text))

    search = LocalTextSearch(knowledge, k=3, reranker=shortest_first, candidates=10)
    claim = TEXT_CLAIM.model_copy(update={"claim_date": date(2020, 5, 15)})
    result = search(ToolRequest("Is it true?", "coronavirus COVID-19 cure virus", claim))
    assert len(seen) == 10 and all(h.published <= "2020-05-15" for h in seen)
    assert [h.text for h in result.hits] == [h.text for h in sorted(seen, key=lambda h: len(h.text))[:3]]
    assert result.rejected == {"after_claim_date": 39}
