"""Issue 36, section 3: stage 5 asks the media filter one question per claim, spread over the ensemble by a hash of the
claim and its media, reads the text of images in a pool of OCR workers (each loads the engine once), serves a
re-encoded copy of an image from its perceptual hash, and never reads a medium that cannot be kept. The model sits behind a loopback stub."""

import io
import os
import sqlite3
from collections import Counter

import pytest
from PIL import Image

from assets.claims.normalized_claims import filter_media, filter_order
from assets.rules import media_text
from assets.rules.media_text import OcrPool, TextCache
from dagster_project.resources.llm import EnsembleMember, LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.simulation.openai_stub import serving
from schemas.records import ClaimAppearances, Medium
from tests.test_media_verdicts import as_medium, asked_media, filter_answers, photo


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return MediaStore(str(tmp_path_factory.mktemp("media")))


def reencoded(jpeg: bytes, quality: int) -> bytes:
    out = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).save(out, "JPEG", quality=quality)
    return out.getvalue()


def panel(stub, tmp_path, slots=(16, 16, 16), name="cache"):
    return LLMResource(members=[EnsembleMember(name=f"m{i}", model="openai/scripted", api_base=stub.base(f"m{i}"),
                                               api_key_env="STUB_KEY", max_parallel=n) for i, n in enumerate(slots)],
                       cache_path=str(tmp_path / f"{name}.sqlite"), num_retries=0)


def test_filter_order_spreads_claims_over_members_by_their_slots_and_depends_on_the_claim_alone(tmp_path):
    with serving(filter_answers) as stub:
        llm = panel(stub, tmp_path, slots=(16, 16, 16, 16))
        reviews = [f"{i:064x}" for i in range(2000)]
        first = Counter(filter_order(llm, r, ["m"])[0] for r in reviews)
        assert all(430 <= first[m] <= 570 for m in llm.member_names()), first  # about a quarter each
        assert all(sorted(filter_order(llm, r)) == llm.member_names() for r in reviews[:50])  # every member, once
        # twice the slots, about twice the questions; a claim's order does not depend on when or beside what it is
        # asked, nor on the order of its media
        weighted = Counter(filter_order(panel(stub, tmp_path, slots=(32, 16)), r)[0] for r in reviews)
        assert 0.62 <= weighted["m0"] / len(reviews) <= 0.71, weighted
        assert [filter_order(llm, r) for r in reversed(reviews)] == [filter_order(llm, r) for r in reviews][::-1]
        assert all(filter_order(llm, r, ["a", "b"]) == filter_order(llm, r, ["b", "a"]) for r in reviews[:50])
        assert any(filter_order(llm, r, ["a"]) != filter_order(llm, r, ["b"]) for r in reviews[:50])


def test_members_that_see_images_are_asked_first_and_the_others_only_after_them(tmp_path):
    """A member without vision judges a picture by its alt text: where some members see images, they take every
    claim's question, spread among them by their slots, and the others come after them in each claim's order."""
    with serving(filter_answers) as stub:
        members = [EnsembleMember(name=f"m{i}", model="openai/scripted", api_base=stub.base(f"m{i}"),
                                  api_key_env="STUB_KEY", max_parallel=16, vision=i in (1, 3)) for i in range(4)]
        llm = LLMResource(members=members, cache_path=str(tmp_path / "vision.sqlite"), num_retries=0)
        orders = [filter_order(llm, f"r{i}", [f"{i:064x}"]) for i in range(400)]
    assert all(set(order[:2]) == {"m1", "m3"} and set(order[2:]) == {"m0", "m2"} for order in orders)
    first = Counter(order[0] for order in orders)
    assert 160 <= first["m1"] <= 240 and first["m1"] + first["m3"] == 400, first


def test_one_question_per_claim_goes_to_its_member_and_a_rerun_hits_the_cache(store, tmp_path, monkeypatch):
    monkeypatch.setenv("STUB_KEY", "sk-test")
    media = [as_medium(store.put_image(photo(seed=100 + i)), origin="appearance") for i in range(16)]
    claims = [ClaimAppearances(review_id=f"r{i}", review_url="https://fullfact.org/x", quarter="2020Q2", language="en",
                               claim_text="Masts burn in Hong Kong", media=media[2 * i:2 * i + 2]) for i in range(8)]
    ocr = TextCache(tmp_path / "ocr.sqlite")
    with serving(filter_answers) as stub:
        llm = panel(stub, tmp_path)
        assert all(filter_media(c, "en", llm, store, ocr) == {} for c in claims)
        asked = Counter(mode for mode, _ in stub.requests)
        expected = Counter(filter_order(llm, c.review_id, [m.medium_id for m in c.media])[0] for c in claims)
        assert asked == expected and len(expected) > 1  # not every question to the first member
        assert [len(asked_media(body)) for _, body in stub.requests] == [2] * 8  # both media in one question
        n = len(stub.requests)
        assert all(filter_media(c, "en", panel(stub, tmp_path), store, ocr) == {} for c in claims)  # a re-run
        assert len(stub.requests) == n
    ocr.close()


def test_ocr_runs_in_a_pool_whose_workers_load_the_engine_once_each(store):
    loads_here = media_text.ENGINE_LOADS
    pool = OcrPool(workers=2)
    try:
        texts = [pool.read_text(store.read(store.put_image(photo("FALSE" if i % 2 else "", seed=200 + i)).path))
                 for i in range(6)]
        loads = pool.engine_loads()
    finally:
        pool.close()
    assert ["FALSE" in t.upper() for t in texts] == [False, True] * 3
    assert os.getpid() not in loads and set(loads.values()) == {1}, loads  # read in the workers, one engine each
    assert media_text.ENGINE_LOADS == loads_here  # never loaded in the stage's own process


def _read_in_a_daemon(jpegs: list[bytes], out) -> None:
    pool = OcrPool(workers=2)
    try:
        out.put((pool.workers, [pool.read_text(j) for j in jpegs], pool.engine_loads()))
    finally:
        pool.close()


def test_a_daemonic_process_reads_in_itself_since_it_may_start_no_worker(store):
    """A Celery worker's prefork child is daemonic: multiprocessing refuses it children, so the stage there reads with
    an engine of its own instead of failing ('daemonic processes are not allowed to have children')."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    jpegs = [store.read(store.put_image(photo("FALSE" if i else "", seed=300 + i)).path) for i in range(2)]
    child = ctx.Process(target=_read_in_a_daemon, args=(jpegs, out), daemon=True)
    child.start()
    workers, texts, loads = out.get(timeout=120)  # a daemon that failed sends nothing
    child.join(60)
    assert child.exitcode == 0 and workers == 0
    assert ["FALSE" in t.upper() for t in texts] == [False, True]
    assert loads == {child.pid: 1}  # one engine, in the daemon itself


def test_the_phash_cache_serves_a_reencoded_copy_but_not_a_stamped_one(tmp_path):
    clean, stamped = photo(seed=7), photo("FALSE", seed=7, size=30)  # the small stamp leaves the 64-bit pHash as is
    assert media_text.image_hashes(clean)[0] == media_text.image_hashes(stamped)[0]
    first = TextCache(tmp_path / "ocr.sqlite")
    assert "FALSE" not in first.read_text(clean).upper()
    first.close()
    later = TextCache(tmp_path / "ocr.sqlite")  # a later quarter: the same photo, encoded again
    copy = reencoded(clean, 70)
    assert copy != clean and later.read_text(copy) == later.read_text(reencoded(clean, 95))
    assert (later.misses, later.phash_hits) == (0, 2)
    assert "FALSE" in later.read_text(stamped).upper() and later.misses == 1  # read, not served the clean one's text
    later.close()
    with sqlite3.connect(tmp_path / "ocr.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM ocr_phash").fetchone()[0] == 2


def test_media_that_cannot_be_kept_are_never_read(store, tmp_path, monkeypatch):
    """Past max_media (the preferred ones kept), and every medium of a claim whose check already failed, are never
    read by the OCR (the claim's one question asked about them all); the plain drops are neither read nor asked
    about."""
    monkeypatch.setenv("STUB_KEY", "sk-test")
    media = [as_medium(store.put_image(photo(seed=300 + i)), origin="appearance") for i in range(4)]
    tiny = Medium(medium_id="tiny", kind="image", path=media[0].path, width=60, height=60)
    claim = ClaimAppearances(review_id="r", review_url="https://fullfact.org/x", claim_text="Masts burn in Hong Kong",
                             quarter="2020Q2", language="en", media=[tiny, *media])

    def read(cache_name):
        with sqlite3.connect(tmp_path / cache_name) as db:
            return {row[0] for row in db.execute("SELECT sha256 FROM ocr_text")}

    with serving(filter_answers) as stub:
        ocr = TextCache(tmp_path / "limit.sqlite")
        assert filter_media(claim, "en", panel(stub, tmp_path), store, ocr, max_media=2) == {}
        ocr.close()
        # one question about the four; the OCR reads the first two the model keeps
        assert read("limit.sqlite") == {media[0].medium_id, media[1].medium_id} and len(stub.requests) == 1
        gone = media[0].model_copy(update={"medium_id": "gone", "path": "images/gone.jpg"})
        ocr = TextCache(tmp_path / "failed.sqlite")
        verdicts = filter_media(claim.model_copy(update={"media": [gone, *media[1:]]}), "en",
                                panel(stub, tmp_path, name="failed"), store, ocr, max_media=4)
        ocr.close()
        assert verdicts == {"gone": "ocr_failed:FileNotFoundError"}
        assert read("failed.sqlite") == set() and len(stub.requests) == 2  # nothing else read, nothing more asked
