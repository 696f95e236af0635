"""Failures that used to turn into quiet drops (issue 25, section 2): each stage's error budget, claims with no
evidence, rectification errors with their cause, and a rewrite checked by its own writer."""

import pickle
from datetime import date
from types import SimpleNamespace

import pytest

from assets.claims.rectified_claims import rectify_all
from assets.claims.scored_claims import score_all
from assets.ensemble.scoring import score_claim
from assets.stage.record_errors import (
    ErrorBudget,
    ErrorBudgetExceeded,
    RecordError,
    map_records,
)
from assets.stage.tables import StageYield
from dagster_project.resources.media import MediaStore
from dagster_project.stage_settings import DemandSettings, ErrorBudgetSettings, ScoreSettings
from tests.test_rating_flow import (  # noqa: F401 - the scripted panel, its key
    ARTICLE,
    CLAIM_RULES,
    EVERY,
    PHOTO,
    SCORING,
    STAGE6,
    STAGE7,
    _key,
    claim,
    resource,
    settings,
    stub,
)
from tests.test_release import ORDER_KEY


class Log:
    def __init__(self):
        self.warnings, self.infos = [], []

    def warning(self, msg):
        self.warnings.append(msg)

    def info(self, msg):
        self.infos.append(msg)


def _records(n: int, bad: set[int]) -> list:
    return [SimpleNamespace(claim_id=f"c{i}", review_id=f"r{i}", day="2020-13-01" if i in bad else "2020-06-01")
            for i in range(n)]


def _parse(record):
    return date.fromisoformat(record.day), ""


def test_progress_is_a_line_per_10_records_at_most_one_per_2_seconds(monkeypatch):
    """Records already prefetched go through in well under a second: their progress is the last line alone (every
    line is an event the Dagster instance stores). Slow records get a line per 10, once 2 s have passed."""
    import assets.stage.record_errors as common

    log = Log()
    map_records("s", _records(3000, set()), _parse, StageYield(3000), log)
    assert log.infos == ["s: 3000/3000 done, 3000 kept"]
    monkeypatch.setattr(common, "PROGRESS_EVERY_S", 0.0)
    log = Log()
    map_records("s", _records(25, set()), _parse, StageYield(25), log)
    assert log.infos == ["s: 10/25 done, 10 kept", "s: 20/25 done, 20 kept", "s: 25/25 done, 25 kept"]


def test_the_threads_of_a_prefetched_stage_report_their_progress_while_they_work(monkeypatch):
    import assets.ensemble.rounds as ensemble

    monkeypatch.setattr(ensemble, "PREFETCH_PROGRESS_S", 0.0)
    log = Log()
    work = ensemble.prefetch(list(range(5)), lambda i: i * i, 2, log, "s")
    assert [work(i) for i in range(5)] == [0, 1, 4, 9, 16]
    assert log.infos == [f"s: {n}/5 worked through on 2 threads" for n in range(1, 5)]  # the loop's lines say the 5th
    quiet = Log()
    ensemble.prefetch(list(range(5)), lambda i: i, 1, quiet, "s")  # one worker: the stage's loop does the work
    assert quiet.infos == []


def test_errors_within_the_budget_are_drops_with_their_cause_logged():
    stats, log = StageYield(100), Log()
    out = map_records("s", _records(100, {3, 10, 20, 30, 40}), _parse, stats, log)
    assert len(out) == 95 and dict(stats.drops) == {"error:ValueError": 5}  # 5: the larger of 5 and 2% of 100
    assert len(log.warnings) == 5
    assert log.warnings[0].startswith("s: claim_id=c3, review_id=r3 failed: error:ValueError: month must be in 1..12")
    assert "test_no_quiet_failures.py" in log.warnings[0]  # where it was raised


def test_past_the_budget_the_stage_fails_naming_the_error_a_record_and_the_traceback():
    with pytest.raises(ErrorBudgetExceeded) as caught:
        map_records("scored_claims", _records(100, {3, 10, 20, 30, 40, 50}), _parse, StageYield(100))
    message = str(caught.value)
    assert message.startswith("scored_claims: 6 of 100 records failed with an error, over the error budget of 5 "
                              "(stages.error_budget_share / error_budget_min). Most frequent: error:ValueError x6. "
                              "Example record: claim_id=c3, review_id=r3. error:ValueError: month must be in 1..12; "
                              "raised at ")
    assert "test_no_quiet_failures.py" in message and "Its traceback:\nTraceback (most recent call last)" in message
    # the share counts on large stages: 2% of 1,000 is 20
    bad = set(range(0, 1000, 50))
    assert len(map_records("s", _records(1000, bad), _parse, StageYield(1000))) == 980
    with pytest.raises(ErrorBudgetExceeded, match="21 of 1000 records failed"):
        map_records("s", _records(1000, bad | {7}), _parse, StageYield(1000))
    # the budget is configurable
    strict = ErrorBudget.for_stage(ErrorBudgetSettings(error_budget_share=0.0, error_budget_min=0), "s", 10)
    with pytest.raises(ErrorBudgetExceeded, match="1 of 10 records failed"):
        map_records("s", _records(10, {4}), _parse, StageYield(10), budget=strict)


def test_an_error_reason_from_a_worker_process_keeps_its_cause_and_counts_against_the_budget():
    try:
        date.fromisoformat("2020-13-01")
    except ValueError as err:
        reason = pickle.loads(pickle.dumps(RecordError.of(err)))  # as it crosses back from an extraction worker
    assert reason == "error:ValueError" and reason.message == "month must be in 1..12"
    assert "test_no_quiet_failures.py" in reason.where and "Traceback" in reason.trace
    items = [(f"r{i}", (None, reason)) for i in range(6)]
    with pytest.raises(ErrorBudgetExceeded, match=r"6 of 6 records failed.*month must be in 1\.\.12; raised at .*test_no_q"):
        map_records("articles", items, lambda pair: pair[1], StageYield(6))


def _compromised(stub, tmp_path, n: int):  # noqa: F811
    llm = resource(stub, tmp_path)
    original, _ = score_claim(claim("<image:0> OUT-OF-CONTEXT crowd in Hong Kong yesterday", [PHOTO]), "e", llm,
                              SCORING, CLAIM_RULES, None)
    assert original.integrity.label == "compromised"
    return [original.model_copy(update={"claim_id": f"c{i}", "review_id": "r1"}) for i in range(n)]


def test_rectification_errors_are_logged_with_their_cause_and_counted_against_the_budget(stub, tmp_path):  # noqa: F811
    vision = resource(stub, tmp_path)
    vision = vision.model_copy(update={"members": [m.model_copy(update={"vision": True}) for m in vision.members]})
    empty_store = MediaStore(str(tmp_path / "media"))  # the claims' image is not in it: reading it raises
    log = Log()
    out, stats = rectify_all(_compromised(stub, tmp_path, 3), {"r1": ARTICLE}, vision, **EVERY, media_store=empty_store,
                             log=log)
    assert len(out) == 3 and all(c.variant == "original" for c in out)  # the originals stay
    assert stats.extra["not_rectified/error:FileNotFoundError"] == 3
    failed = [w for w in log.warnings if "error:FileNotFoundError" in w]
    assert len(failed) == 3 and "pp/p.jpg" in failed[0] and "dagster_project/resources/media.py:" in failed[0]
    with pytest.raises(ErrorBudgetExceeded, match="rectified_claims: 6 of 6 records failed .*error:FileNotFoundError x6"):
        rectify_all(_compromised(stub, tmp_path, 6), {"r1": ARTICLE}, vision, **EVERY, media_store=empty_store)


def test_a_writer_that_checks_its_own_rewrite_is_recorded(stub, tmp_path):  # noqa: F811
    originals = _compromised(stub, tmp_path, 1)
    log = Log()
    alone = resource(stub, tmp_path, ("agree",))
    one_rater = settings(STAGE7, scoring=ScoreSettings(min_ratings=1), demand=DemandSettings(rectify="all"))
    _, stats = rectify_all(originals, {"r1": ARTICLE}, alone, **one_rater, media_store=None, log=log)
    assert stats.extra["rectify/self_checked"] is True
    assert stats.extra["rectify/writer"] == stats.extra["rectify/checker"] == "r0-agree"
    assert any("checks its own rewrites" in w for w in log.warnings)
    _, stats = rectify_all(originals, {"r1": ARTICLE}, resource(stub, tmp_path), **EVERY, media_store=None)
    assert stats.extra["rectify/self_checked"] is False and stats.extra["rectify/checker"] != stats.extra["rectify/writer"]


def test_a_claim_without_evidence_is_a_drop_reason_not_rated_from_memory(stub, tmp_path):  # noqa: F811
    llm = resource(stub, tmp_path)
    claims = [claim("Hot steam cures the virus").model_copy(update={"claim_id": f"c{i}", "review_id": f"r{i}"})
              for i in range(3)]
    empty = ARTICLE.model_copy(update={"review_id": "r1", "text": "  "})
    before = len(stub.requests)
    out, stats = score_all(claims, {"r0": ARTICLE.model_copy(update={"review_id": "r0"}), "r1": empty}, llm,
                           **settings(STAGE6), media_store=None, key=ORDER_KEY)
    assert [c.claim_id for c in out] == ["c0"] and dict(stats.drops) == {"no_evidence": 2}
    asked = stub.requests[before:]
    assert len(asked) == 3  # one claim, three members, one question (a false claim skips context coverage)
    assert all("2019 protest in Paris" in b["messages"][-1]["content"] for _, b in asked)  # each with its evidence
    originals = _compromised(stub, tmp_path, 1)
    _, stats = rectify_all(originals, {}, llm, **EVERY, media_store=None)
    assert stats.extra["not_rectified/no_evidence"] == 1 and stats.extra.get("rectified", 0) == 0
