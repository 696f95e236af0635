"""Multimodal messages (images as data URLs, videos as their frames) and the per-member limits of the resource."""

import base64
import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image

from assets.ensemble.asking import ask
from dagster_project.resources.llm import EnsembleMember, LLMResource, RateLimiter
from dagster_project.resources.media import MediaStore
from dagster_project.simulation.openai_stub import OpenAIStub
from schemas.answers import PropertyAnswer
from schemas.records import Medium

ANSWER = json.dumps({"category": "positive", "certainty": "certain", "justification": "ok", "tags": []})


def jpeg(color) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (200, 150), color).save(buf, "JPEG")
    return buf.getvalue()


@pytest.fixture()
def stub(monkeypatch):
    monkeypatch.setenv("MEDIA_STUB_KEY", "sk-test")
    s = OpenAIStub(lambda mode, body: (200, ANSWER))
    yield s
    s.close()


def member(stub, name, **kw):
    return EnsembleMember(name=name, model="openai/m", api_base=stub.base(name), api_key_env="MEDIA_STUB_KEY", **kw)


def test_images_go_as_data_urls_and_videos_as_their_frames(stub, tmp_path):
    store = MediaStore(str(tmp_path / "media"))
    photo = store.put_image(jpeg((200, 0, 0)))
    frames = [store.put_image(jpeg((0, 40 * i, 0))) for i in range(1, 4)]
    media = [
        Medium(medium_id="v" * 64, kind="video", path="videos/vv/v.mp4", frame_paths=[f.path for f in frames],
               alt="clip of a flood"),
        Medium(medium_id=photo.sha256, kind="image", path=photo.path, width=200, height=150, alt="a red square"),
    ]
    llm = LLMResource(members=[member(stub, "seeing", vision=True), member(stub, "blind")],
                      cache_path=str(tmp_path / "c.sqlite"))
    inputs = {"claim": "<video:0> <image:1> Floods in Paris.", "language": "en", "claim_date": "2024-01-01",
              "evidence": "", "property": "veracity"}
    for name in ("seeing", "blind"):
        assert ask(llm, name, "rate_claim", PropertyAnswer, stage="t", media=media, media_store=store, **inputs).error is None
    seen = {mode: body for mode, body in stub.requests}
    parts = seen["seeing"]["messages"][-1]["content"]
    assert parts[0]["type"] == "text" and "<video:0>" in parts[0]["text"]
    urls = [p["image_url"]["url"] for p in parts[1:]]
    assert len(urls) == 4  # three frames of the video, then the photo
    decoded = [base64.b64decode(u.removeprefix("data:image/jpeg;base64,")) for u in urls]
    assert decoded == [store.read(f.path) for f in frames] + [store.read(photo.path)]
    # a text-only member gets one plain string with the media's alt texts instead of pixels
    blind = seen["blind"]["messages"][-1]["content"]
    assert isinstance(blind, str) and "clip of a flood" in blind and "a red square" in blind
    # the media hashes are part of the cache key: other media, another call
    other = [media[1].model_copy(update={"medium_id": "x" * 64})]
    before = len(stub.requests)
    assert not ask(llm, "blind", "rate_claim", PropertyAnswer, stage="t", media=other, media_store=store, **inputs).cache_hit
    assert ask(llm, "blind", "rate_claim", PropertyAnswer, stage="t", media=media, media_store=store, **inputs).cache_hit
    assert len(stub.requests) == before + 1


def test_max_parallel_caps_requests_in_flight(tmp_path, monkeypatch):
    monkeypatch.setenv("MEDIA_STUB_KEY", "sk-test")
    lock, state = threading.Condition(), {"now": 0, "max": 0}

    def slow(mode, body):
        with lock:
            state["now"] += 1
            state["max"] = max(state["max"], state["now"])
            lock.notify_all()
            # wait (not a fixed 50 ms) for a second caller, so that a loaded machine still fills both slots
            lock.wait_for(lambda: state["now"] >= 2, timeout=5)
        time.sleep(0.2)  # long enough for any caller beyond the cap to pile up
        with lock:
            state["now"] -= 1
        return 200, ANSWER

    s = OpenAIStub(slow)
    try:
        llm = LLMResource(members=[member(s, "capped", max_parallel=2)], cache_path=str(tmp_path / "c.sqlite"))
        schema = {"type": "object"}
        calls = [[{"role": "user", "content": f"claim {i}"}] for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda m: llm.complete_json("capped", m, schema, PropertyAnswer, template_id="t",
                                                                template_hash="h"), calls))
    finally:
        s.close()
    assert all(a.error is None for a in answers) and s.count("capped") == 8
    assert state["max"] == 2
    # eight callers on two slots: both slots stay held from the first call to the last
    assert 0.8 <= llm.slot_busy("")["capped"] <= 1.0 and llm.slot_busy("another stage") == {}


class FakeClock:
    def __init__(self):
        self.now, self.slept = 1000.0, []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(round(seconds, 6))
        self.now += seconds


def test_rpm_limit_waits_for_the_window():
    clock = FakeClock()
    limiter = RateLimiter(rpm=2, clock=clock, sleep=clock.sleep)
    assert limiter.acquire() == 0 and limiter.acquire() == 0
    clock.now += 10
    assert limiter.acquire() == pytest.approx(50)  # the first request leaves the 60 s window at t+60
    assert clock.slept == [50.0]
    clock.now += 60
    assert limiter.acquire() == 0


def test_tpm_limit_waits_until_enough_tokens_leave_the_window():
    clock = FakeClock()
    limiter = RateLimiter(tpm=1000, clock=clock, sleep=clock.sleep)
    limiter.acquire()
    limiter.used(600)
    clock.now += 5
    limiter.acquire()
    limiter.used(500)  # 1,100 tokens in the window: over the limit
    clock.now += 5
    assert limiter.wait_time() == pytest.approx(50)  # the 600 of t+0 leave at t+60, leaving 500 < 1000
    assert limiter.acquire() == pytest.approx(50)
    assert RateLimiter().acquire() == 0  # no limits: never waits
