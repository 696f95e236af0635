"""Evidence scoring (METEOR + Hungarian) on real AVeriTeC dev claims and a real AFP article.

Runs with and without the system's WordNet (Debian ``wordnet-base``): numbers that differ between the
two modes are asserted per mode; the synonym path itself is also checked on a tiny WordNet built here.
"""

import gzip
import json
from pathlib import Path

import pytest

from assets.evaluation import evidence_scoring as es

FIXTURES = Path(__file__).parent / "fixtures"
DEV = json.loads((FIXTURES / "averitec_dev_excerpt.json").read_text(encoding="utf-8"))
WORDNET_ON = es.load_wordnet() is not None


def self_score(text: str) -> float:
    """METEOR of a text against itself: one chunk, so only the fragmentation penalty 0.5 / n**3 remains."""
    n = len(es.tokenize(text))
    return 1 - 0.5 / n**3


def self_items():
    return [{**r, "pred_label": r["label"], "pred_questions": r["questions"]} for r in DEV]


def shuffled_items():
    """Claim i+1's gold record and label, but claim i's gold evidence as the prediction."""
    n = len(DEV)
    return [
        {**DEV[(i + 1) % n], "pred_label": DEV[(i + 1) % n]["label"], "pred_questions": DEV[i]["questions"]}
        for i in range(n)
    ]


# ------------------------------------------------------------------------------------ fixture shape


def test_fixture_is_real_averitec_dev_shape():
    assert len(DEV) == 20
    assert {r["label"] for r in DEV} == {
        "Refuted", "Supported", "Not Enough Evidence", "Conflicting Evidence/Cherrypicking"
    }
    for r in DEV:
        assert r["questions"] and r["justification"]
        for q in r["questions"]:
            assert q["question"] and q["answers"]


# ---------------------------------------------------------------------------------------- WordNet


def test_synonym_flag_matches_load_wordnet():
    assert es.meteor.synonyms is WORDNET_ON
    res = es.evidence_recall(["a b c"], ["a b c"])
    assert res["scorer"] == "meteor" and res["synonyms"] is WORDNET_ON
    assert es.averitec_score(self_items()[:1])["synonyms"] is WORDNET_ON


def test_load_wordnet_returns_none_without_database(tmp_path):
    assert es.load_wordnet(tmp_path) is None
    assert es.load_wordnet(tmp_path / "missing") is None
    # All but lexnames: nltk's reader needs it, so the folder is refused rather than crashing later.
    for name in es.WORDNET_REQUIRED_FILES[1:]:
        (tmp_path / name).write_text("")
    assert es.load_wordnet(tmp_path) is None


def _tiny_wordnet(folder: Path) -> Path:
    """A two-word WordNet 3.0 database (car = auto) in the real file format."""
    for name in es.WORDNET_REQUIRED_FILES:
        (folder / name).write_text("")
    (folder / "lexnames").write_text(
        "".join(f"{i:02d}\t{name}\t{cat}\n" for i, (name, cat) in enumerate(
            [("adj.all", 3), ("adj.pert", 3), ("adv.all", 4), ("noun.Tops", 1), ("noun.act", 1),
             ("noun.animal", 1), ("noun.artifact", 1)]))
    )
    header = "  1 tiny test database in WordNet 3.0 format\n"
    offset = len(header.encode())
    (folder / "data.noun").write_text(
        header + f"{offset:08d} 06 n 02 car 0 auto 0 000 | a motor vehicle with four wheels  \n"
    )
    (folder / "index.noun").write_text(
        header + f"auto n 1 0 1 0 {offset:08d}  \ncar n 1 0 1 0 {offset:08d}  \n"
    )
    return folder


def test_synonym_matching_with_a_wordnet_database(tmp_path, monkeypatch):
    reader = es.load_wordnet(_tiny_wordnet(tmp_path))
    assert reader is not None
    assert sorted(reader.synsets("car")[0].lemma_names()) == ["auto", "car"]
    on, off = es.Meteor(wordnet=reader), es.Meteor(wordnet=None)
    assert on.synonyms is True and off.synonyms is False
    # With synonyms all three words align in one chunk; without, 2 of 3 in two chunks.
    assert on("the auto crashed", "the car crashed") == pytest.approx(1 - 0.5 / 27)
    assert off("the auto crashed", "the car crashed") == pytest.approx(1 / 3)
    # nltk looks synonyms up on Porter stems ("automobil"), so this one finds nothing.
    assert reader.synsets("automobil") == []
    assert on("the automobile", "the car") == off("the automobile", "the car")
    res = es.evidence_recall(["the auto crashed"], ["the car crashed"], on)
    assert res["synonyms"] is True and res["recall"] == pytest.approx(1 - 0.5 / 27)
    # The environment variable points the default search at a folder.
    monkeypatch.setenv("VERITAS_WORDNET_DIR", str(tmp_path))
    assert es.load_wordnet() is not None


def test_debian_layout_without_lexnames_is_read(tmp_path):
    """Debian's wordnet-base ships no lexnames: the WordNet 3.0 table is supplied, for 3.0 databases only."""
    folder = _tiny_wordnet(tmp_path)
    (folder / "lexnames").unlink()
    reader = es.load_wordnet(folder)
    assert reader is not None and not (folder / "lexnames").exists()  # nothing written into the database folder
    assert sorted(reader.synsets("car")[0].lemma_names()) == ["auto", "car"]
    assert reader.synsets("car")[0].lexname() == "noun.artifact"  # file number 06 in the supplied table
    assert es.lexnames_text().splitlines()[44] == "44\tadj.ppl\t3" and len(es.WORDNET30_LEXNAMES) == 45
    (folder / "data.noun").write_text("  1 some other WordNet 2.1 database\n")
    assert es.load_wordnet(folder) is None


@pytest.mark.skipif(not Path("/usr/share/wordnet/data.noun").exists(), reason="Debian wordnet-base not installed")
def test_system_wordnet_gives_synonyms():
    reader = es.load_wordnet("/usr/share/wordnet")
    assert reader is not None and "auto" in reader.synsets("car")[0].lemma_names()
    assert es.Meteor(wordnet=reader)("the auto crashed", "the car crashed") == pytest.approx(1 - 0.5 / 27)


# ------------------------------------------------------------------------------ METEOR / strings


def test_meteor_self_score_and_tokenizer():
    text = "Scoopertino is an imaginary news organization devoted to Apple stories"
    assert es.tokenize("Don't panic: COVID-19 Ärzte, 2020!") == ["Don't", "panic", "COVID", "19", "Ärzte", "2020"]
    plain = es.Meteor(identical_is_one=False)
    assert plain(text, text) == pytest.approx(self_score(text), abs=1e-12)
    assert plain("one", "one") == 0.5  # METEOR's fragmentation penalty at n = 1
    # The default scorer gives an identical statement (case aside) exactly 1.0.
    assert es.meteor(text, text) == 1.0 and es.meteor("one", "ONE") == 1.0
    assert es.meteor(text + " too", text) < 1.0
    assert es.meteor("", text) == 0.0 and es.meteor(text, "...") == 0.0
    assert es.Meteor(wordnet=None)("apple stories", "totally different words") == 0.0


def test_qa_to_text_formats():
    q = DEV[0]["questions"][0]
    assert es.qa_to_text(q) == (
        "Where was the claim first published It was first published on Sccopertino"
    )
    flat = {"question": "Is it true?", "answer": "No", "boolean_explanation": "The site is satire"}
    assert es.qa_to_text(flat) == "Is it true? No. The site is satire"
    multi = next(q for r in DEV for q in r["questions"] if len(q["answers"]) > 1)
    assert all(es.answer_text(a) in es.qa_to_text(multi) for a in multi["answers"])


# ------------------------------------------------------------------------------------- Hungarian


def test_hungarian_beats_greedy_on_handcrafted_matrix():
    table = {
        ("p0", "r0"): 0.9, ("p0", "r1"): 0.8,
        ("p1", "r0"): 0.85, ("p1", "r1"): 0.1,
        ("p2", "r0"): 0.2, ("p2", "r1"): 0.3,
    }

    def lookup(pred, ref):
        return table[pred, ref]

    res = es.evidence_recall(["p0", "p1", "p2"], ["r0", "r1"], lookup)
    # Greedy (p0-r0 then p2-r1) would give 1.2; the optimum is p1-r0 + p0-r1 = 1.65.
    assert res["pairs"] == [(1, 0, 0.85), (0, 1, 0.8)]
    assert res["recall"] == pytest.approx(1.65 / 2)
    assert res["precision"] == pytest.approx(1.65 / 3)
    assert res["scorer"] == "lookup" and res["synonyms"] is None


def test_hungarian_with_meteor_strings():
    refs = ["the photo was taken in 2016", "her mother died in 2009"]
    preds = ["her mother died in 2009", "the football match ended late", "the photo was taken in 2016"]
    res = es.evidence_recall(preds, refs)
    assert [(i, j) for i, j, _ in res["pairs"]] == [(2, 0), (0, 1)]
    assert res["recall"] == 1.0
    assert res["precision"] == pytest.approx(2 / 3, abs=1e-12)
    assert es.evidence_recall([], refs)["recall"] == 0.0
    assert es.evidence_recall(preds, [])["precision"] == 0.0


# --------------------------------------------------------------------------- AVeriTeC on real data


def test_gold_evidence_against_itself():
    res = es.averitec_score(self_items())
    assert res["n_claims"] == 20 and res["synonyms"] is WORDNET_ON
    for claim, record in zip(res["claims"], DEV):
        gold = [es.qa_to_text(q) for q in record["questions"]]
        # Each QA pair is matched to itself and scores exactly 1.0.
        assert [(i, j) for i, j, _ in claim["evidence_pairs"]] == [(k, k) for k in range(len(gold))]
        assert claim["evidence_recall"] == 1.0 and claim["question_recall"] == 1.0
    assert res["evidence_recall"] == 1.0
    # Plain nltk METEOR: the 0.5/n**3 fragmentation penalty keeps each pair just under 1.0.
    plain = es.averitec_score(self_items(), scorer=es.Meteor(identical_is_one=False))
    for claim, record in zip(plain["claims"], DEV):
        expected = sum(self_score(es.qa_to_text(q)) for q in record["questions"]) / len(record["questions"])
        assert claim["evidence_recall"] == pytest.approx(expected, abs=1e-12)
    assert plain["evidence_recall"] == pytest.approx(0.99990, abs=1e-5)  # measured, both modes
    assert res["label_accuracy"] == 1.0
    assert res["accuracy"] == {0.2: 1.0, 0.25: 1.0, 0.3: 1.0}


def test_shuffled_evidence_scores_low():
    res = es.averitec_score(shuffled_items())
    recalls = [c["evidence_recall"] for c in res["claims"]]
    # Gold labels are the predictions, so only the evidence condition can fail.
    assert res["label_accuracy"] == 1.0
    assert res["evidence_recall"] < 0.3 and res["question_recall"] < 0.3
    for t, acc in res["accuracy"].items():
        assert acc == pytest.approx(sum(r >= t for r in recalls) / 20)
    above_all = max(recalls) + 0.01
    assert es.averitec_score(shuffled_items(), thresholds=(above_all,))["accuracy"] == {above_all: 0.0}
    # Measured without synonyms: mean 0.0827, max 0.2855, questions 0.0570; with WordNet 3.0 synonyms
    # (Debian wordnet-base): mean 0.0875, max 0.2855, questions 0.0610.  Gold against itself: 1.0.
    assert res["evidence_recall"] == pytest.approx(0.0875 if WORDNET_ON else 0.0827, abs=0.002)
    assert max(recalls) == pytest.approx(0.2855, abs=0.002)
    assert res["question_recall"] == pytest.approx(0.0610 if WORDNET_ON else 0.0570, abs=0.002)
    assert res["accuracy"] == {0.2: 0.05, 0.25: 0.05, 0.3: 0.0}


def test_wrong_labels_score_zero_even_with_gold_evidence():
    items = [{**it, "pred_label": "Supported" if it["label"] != "Supported" else "Refuted"} for it in self_items()]
    res = es.averitec_score(items)
    assert res["label_accuracy"] == 0.0 and res["accuracy"] == {0.2: 0.0, 0.25: 0.0, 0.3: 0.0}
    assert res["evidence_recall"] > 0.999


def test_max_evidence_cap_and_flat_predictions():
    record = DEV[2]  # five QA pairs
    flat = [{"question": q["question"], "answer": q["answers"][0]["answer"]} for q in record["questions"]]
    item = {**record, "pred_label": record["label"], "pred_questions": flat}
    full = es.averitec_score([item])["claims"][0]
    capped = es.averitec_score([item], max_evidence=2)["claims"][0]
    assert full["evidence_recall"] > 0.999
    assert len(capped["evidence_pairs"]) == 2
    assert capped["evidence_recall"] == pytest.approx(
        sum(s for _, _, s in full["evidence_pairs"][:2]) / 5, abs=1e-12
    )


def test_judge_hook_replaces_meteor():
    calls = []

    def exact_judge(prediction: str, reference: str) -> float:
        calls.append((prediction, reference))
        return 1.0 if prediction == reference else 0.0

    res = es.averitec_score(self_items(), judge=exact_judge)
    assert res["scorer"] == "exact_judge" and res["synonyms"] is None
    assert res["evidence_recall"] == 1.0 and res["question_recall"] == 1.0
    assert res["accuracy"] == {0.2: 1.0, 0.25: 1.0, 0.3: 1.0}
    assert len(calls) == 2 * sum(len(r["questions"]) ** 2 for r in DEV)
    assert es.averitec_score(shuffled_items(), judge=exact_judge)["evidence_recall"] == 0.0


# ---------------------------------------------------------------------------------- contamination

_SYNONYMS_DE = {
    "falsche": "unwahre", "Behauptungen": "Aussagen", "Hantavirus": "Hanta-Virus",
    "Nutzerinnen und Nutzer": "User", "zum Beispiel": "etwa", "Impfstoffe": "Vakzine",
    "Jedoch": "Allerdings", "online": "im Netz",
}


def _article_paragraphs() -> list[str]:
    body = json.loads((FIXTURES / "afp_B2LA2G3_expected.json").read_text(encoding="utf-8"))["V1"]["body"]
    return list(body["summary"]) + [p for s in body["sections"] for p in s["paragraphs"]]


def _reword(paragraph: str) -> str:
    """Light, deterministic rewording: a few German synonyms, and every sixth word left out."""
    for old, new in _SYNONYMS_DE.items():
        paragraph = paragraph.replace(old, new)
    return " ".join(w for i, w in enumerate(paragraph.split()) if i % 6 != 5)


def test_contamination_ordering_on_real_article():
    article = _article_paragraphs()
    assert len(article) == 19
    reworded = [_reword(p) for p in article]
    assert reworded != article
    unrelated = [r["justification"] for r in DEV]

    same = es.contamination_score(article, article)
    light = es.contamination_score(reworded, article)
    half = es.contamination_score(reworded[: len(reworded) // 2], article)
    other = es.contamination_score(unrelated, article)
    padded = es.contamination_score(reworded + unrelated, article)

    assert same > light > half > other
    assert same > 0.9999
    assert 0.7 < light < 0.95
    assert 0.3 < half < 0.5  # 9 of 19 paragraphs reproduced
    assert other < 0.1
    assert padded >= light  # extra statements can never lower the matched sum...
    assert es.evidence_recall(reworded + unrelated, article)["precision"] < light  # ...but cost precision
    if not WORDNET_ON:
        # Measured without synonyms: 0.8229 reworded, 0.3809 half, 0.0136 unrelated.
        assert light == pytest.approx(0.8229, abs=0.002)
        assert half == pytest.approx(0.3809, abs=0.002)
        assert other == pytest.approx(0.0136, abs=0.002)
        assert padded == pytest.approx(light, abs=1e-12)

    assert es.flag_contaminated(light, 0.5) and es.flag_contaminated(0.5, 0.5)
    assert not es.flag_contaminated(other, 0.5)


FULL_DEV = FIXTURES / "averitec_dev.json.gz"  # the whole dev set (gzipped), so the test runs everywhere


def test_full_averitec_dev_set():
    """All 500 dev claims: gold evidence against itself scores recall 1.0; a shuffled pairing scores 0.08."""
    dev = json.loads(gzip.decompress(FULL_DEV.read_bytes()).decode("utf-8"))
    n = len(dev)
    own_items = [{**r, "pred_label": r["label"], "pred_questions": r["questions"]} for r in dev]
    own = es.averitec_score(own_items, max_evidence=None)  # one claim has 12 gold QA pairs, over the cap of 10
    shuffled = es.averitec_score([
        {**dev[(i + 1) % n], "pred_label": dev[(i + 1) % n]["label"], "pred_questions": dev[i]["questions"]}
        for i in range(n)
    ])
    assert n == 500
    assert own["evidence_recall"] == 1.0 and own["question_recall"] == 1.0
    assert own["accuracy"] == {0.2: 1.0, 0.25: 1.0, 0.3: 1.0}
    capped = es.averitec_score(own_items[414:415])["claims"][0]
    assert capped["evidence_recall"] == pytest.approx(10 / 12)
    # Measured: with WordNet synonyms evidence 0.0802, questions 0.0758, accuracy 0.02 / 0.008 / 0.006.
    assert shuffled["evidence_recall"] < 0.1 and shuffled["question_recall"] < 0.1
    if WORDNET_ON:
        assert shuffled["evidence_recall"] == pytest.approx(0.0802, abs=0.001)
        assert shuffled["accuracy"] == pytest.approx({0.2: 0.02, 0.25: 0.008, 0.3: 0.006})


def test_averitec_score_command(tmp_path, capsys):
    from dagster_project.cli import main

    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps(DEV[:4]))
    # Submission shape: flat question/answer evidence; claim 3 gets claim 0's evidence and a wrong label.
    preds = [{"claim_id": i, "pred_label": r["label"],
              "evidence": [{"question": q["question"], "answer": es.answer_text(q["answers"][0])} for q in r["questions"]]}
             for i, r in enumerate(DEV[:3])]
    preds.append({"claim_id": 3, "pred_label": "Supported", "evidence": preds[0]["evidence"]})
    pfile, out = tmp_path / "preds.json", tmp_path / "result.json"
    pfile.write_text(json.dumps(preds))
    assert main(["averitec-score", "--gold", str(gold), "--predictions", str(pfile), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    result = json.loads(out.read_text())
    assert result["n_claims"] == 4 and result["label_accuracy"] == 0.75
    assert result["accuracy"] == {"0.2": 0.75, "0.25": 0.75, "0.3": 0.75}
    assert [c["evidence_recall"] == 1.0 for c in result["claims"]] == [True, True, True, False]
    assert "accuracy at evidence recall >= 0.25: 0.7500" in printed
