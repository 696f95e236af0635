"""The raters' evidence: the whole fact-check article up to each member's token budget, else its end and its
parts most relevant to the claim (BM25), with what was left out recorded."""

import pytest

from assets.ensemble.evidence import (
    GAP,
    context_window,
    count_tokens,
    evidence_budgets,
    fit_evidence,
    member_evidence,
)
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.stage_settings import EvidenceSettings
from schemas.records import Article

CLAIM = "A video shows 5G masts burning in Hong Kong in 2020."
FILLER = [f"Paragraph {i} describes the history of telecommunication regulation in country number {i}, "
          f"with tariffs, spectrum auctions and licensing rules that changed over the decades." for i in range(120)]
RELEVANT = "The video of burning 5G masts was filmed in Hong Kong during the 2019 protests, not in 2020."
CONCLUSION = "Conclusion: the masts in the video burned in 2019; the claim gives the wrong year."


def long_article() -> str:
    paragraphs = FILLER[:60] + [RELEVANT] + FILLER[60:] + [CONCLUSION]
    return "\n".join(paragraphs)


def test_short_articles_are_given_whole():
    text = "\n".join(FILLER[:3] + [CONCLUSION])
    assert fit_evidence(text, CLAIM, 1000) == (text, [])


def test_long_articles_keep_the_relevant_part_and_the_conclusion_within_budget():
    text = long_article()
    assert (len(text), count_tokens(text)) == (20835, 3648)
    evidence, left_out = fit_evidence(text, CLAIM, 600)
    assert count_tokens(evidence) <= 600
    assert RELEVANT in evidence and CONCLUSION in evidence  # a 3,000-character cut kept neither
    assert RELEVANT not in text[:3000] and CONCLUSION not in text[:3000]
    # what was left out is recorded as spans of the article; what is kept and left out add up to the article
    kept = [line for line in evidence.split("\n") if line != GAP]
    assert all(line in text for line in kept)
    assert evidence.count(GAP) == len(left_out)
    shown = sum(len(line) for line in kept)
    hidden = sum(b - a for a, b in left_out)
    assert shown + hidden + text.count("\n") >= len(text) - 2 * len(left_out)
    assert all(text[a:b] not in evidence for a, b in left_out)


def test_budgets_come_from_each_members_context_window():
    members = [EnsembleMember(name="big", model="gpt-4o"), EnsembleMember(name="own", model="openai/x", context_window=8000),
               EnsembleMember(name="demo", model="local/smollm2")]
    llm = LLMResource(members=members, cache_path="unused.sqlite")
    assert context_window(llm, "big") == 128000  # litellm's model info
    assert context_window(llm, "demo") == 4096  # the embedded server's n_ctx
    evidence = EvidenceSettings()
    assert evidence_budgets(llm, evidence) == {"big": 64000, "own": 4000, "demo": 750}
    # a 40,000-character article fits the large member whole; the demo member reads its most relevant parts
    article = Article(review_id="r", review_url="https://x.org", final_url="https://x.org", raw_chars=1, text=long_article())
    texts, cuts = member_evidence(article, CLAIM, evidence_budgets(llm, evidence))
    assert texts["big"] == texts["own"] == article.text
    assert [c.members for c in cuts] == [["demo"]] and cuts[0].budget_tokens == 750
    assert cuts[0].kept_chars == len(article.text) - sum(b - a for a, b in cuts[0].left_out) < len(article.text)
    unknown = LLMResource(members=[EnsembleMember(name="x", model="openai/unknown-model")], cache_path="unused.sqlite")
    with pytest.raises(ValueError, match="set context_window"):
        context_window(unknown, "x")
