"""The simulated model panel of the dress rehearsal (dagster_project/simulation/panel.py) on its own: prompts rendered by the
real templates go in, answers that follow the planted truth come out, and over HTTP it serves its faults and names
itself simulated. The whole simulated quarter through every stage is tests/test_rehearsal_e2e.py."""

import json

import pytest

from dagster_project.simulation.panel import PanelConfig, PanelServer


# ---- the panel alone: real prompts in, answers that follow the planted truth -------------------------------
TRUTH = {"claims": {
    "a": {"claim": "A photo shows the flooded airport in Dubai last week.", "category": "compromised_ooc",
          "rectified": "There is no evidence that a photo shows the flooded airport in Dubai last week."},
    "b": {"claim": "The city council approved the new park in March.", "category": "intact",
          "rectified": "There is no evidence that the city council approved the new park in March."},
}}
MEDIA = [{"kind": "image", "alt": "", "caption": "", "source": "https://pbs.twimg.com/media/S1.jpg"}]


def ask(panel, member: str, prompt: str, **inputs) -> dict:
    from prompts import render

    status, message, *_ = panel(member, {"messages": render(prompt, media=MEDIA, **inputs)})
    assert status == 200
    panel.settle(True)  # what the HTTP stub says once the answer went out
    return json.loads(message["content"])


def test_the_panel_answers_from_the_planted_truth():
    from dataclasses import replace

    from dagster_project.simulation.panel import DEFAULT_MEMBERS, Panel

    careful = tuple(replace(m, flip=0.0) for m in DEFAULT_MEMBERS)  # no opposite answers: the truth itself
    panel = Panel(TRUTH, PanelConfig(members=careful, latency_median_s=0.0, faults={}))
    base = {"language": "en", "claim_date": "2025-07-02", "evidence": "The article."}
    ooc = {**base, "claim": "<image:0> " + TRUTH["claims"]["a"]["claim"]}
    rated = ask(panel, "sim-alpha", "rate_media", medium_kind="image", medium_index=0, **ooc)
    assert rated["contextualization"]["category"] == "negative" and rated["authenticity"]["category"] == "positive"
    assert ask(panel, "sim-beta", "rate_claim", property="veracity", **{**base, "claim": TRUTH["claims"]["b"]["claim"]}
               )["category"] == "positive"
    rewrite = ask(panel, "sim-alpha", "rectify_claim", decisive_property="contextualization", justification="",
                  max_words=70, max_sentences=2, **ooc)["claim"]
    assert rewrite == TRUTH["claims"]["a"]["rectified"]
    # the rewrite is found again: it is rated as the Intact variant
    again = ask(panel, "sim-gamma", "rate_media", medium_kind="image", medium_index=0, **{**base, "claim": rewrite})
    assert again["contextualization"]["category"] == "positive"
    media = [{"kind": "image", "alt": "", "caption": "", "origin": origin, "source": source} for origin, source in (
        ("appearance", "https://pbs.twimg.com/media/S1.jpg"), ("article", "https://fullfact.org/static/img/rating-1a.jpg"))]
    verdicts = ask(panel, "sim-alpha", "media_filter", claim=TRUTH["claims"]["a"]["claim"], candidates=media)
    assert verdicts == {"medium_1": {"keep": "yes", "reason": "part_of_claim"},
                        "medium_2": {"keep": "no", "reason": "verdict_stamp"}}
    counters = panel.counters()
    assert counters["unmatched"] == {} and counters["served"] == 5
    assert counters["by_member"]["sim-alpha"] == {"rate_media": 1, "rectify_claim": 1, "media_filter": 1}


def test_the_panel_serves_faults_over_http_and_labels_itself_simulated():
    import urllib.error
    import urllib.request

    from prompts import render

    config = PanelConfig(latency_median_s=0.0, retry_after_s=2.0, faults={"rate_limit": 1.0})
    with PanelServer(TRUTH, config) as server:
        body = json.dumps({"model": "sim/alpha-large", "messages": render(
            "rate_claim", media=[], property="veracity", claim=TRUTH["claims"]["b"]["claim"], language="en",
            claim_date="", evidence="")}).encode()

        def post():
            request = urllib.request.Request(server.base("sim-alpha") + "/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
            return urllib.request.urlopen(request, timeout=10)

        with pytest.raises(urllib.error.HTTPError) as first:  # a fault hits a request the first time only
            post()
        assert first.value.code == 429 and first.value.headers["retry-after"] == "2.0"
        reply = json.loads(post().read())
        members = server.llm_members()
    assert reply["model"] == "sim/alpha-large" and reply["system_fingerprint"] == "simulated"
    assert json.loads(reply["choices"][0]["message"]["content"])["category"] == "positive"
    assert reply["usage"]["prompt_tokens"] == sum(len(m["content"]) for m in json.loads(body)["messages"]) // 4
    assert [m["model"] for m in members] == ["openai/sim/alpha-large", "openai/sim/beta-medium",
                                             "openai/sim/gamma-small", "openai/sim/delta-open"]
    assert all(m["api_base"].startswith("http://127.0.0.1:") and m["input_cost_per_token"] > 0 for m in members)


def test_an_answer_to_a_client_that_hung_up_is_abandoned_not_served():
    """A timed-out request (or a killed process) never gets its answer: the panel counts it apart, so that a prompt
    asked again afterwards is not counted as answered twice."""
    import socket
    import time

    from prompts import render

    config = PanelConfig(latency_median_s=0.3, latency_sigma=0.0, faults={})
    with PanelServer(TRUTH, config) as server:
        body = json.dumps({"model": "sim/alpha-large", "messages": render(
            "rate_claim", media=[], property="veracity", claim=TRUTH["claims"]["b"]["claim"], language="en",
            claim_date="", evidence="")}).encode()
        request = (f"POST /sim-alpha/v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                   f"application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body

        def post(wait: bool) -> bytes:
            with socket.create_connection(("127.0.0.1", server.stub.port)) as conn:
                conn.sendall(request)
                return conn.recv(65536) if wait else b""  # not waiting: the client hangs up at once

        post(wait=False)
        # the panel makes its answer (0.3 s) and finds no one to give it to; waited for, not timed, so a loaded
        # machine cannot read the counters before the panel got there
        deadline = time.monotonic() + 30
        while server.panel.counters()["abandoned"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.panel.counters()["abandoned"] == 1 and server.panel.counters()["served"] == 0
        assert post(wait=True).startswith(b"HTTP/1.1 200")
        # the panel counts the answer as served once it has sent it, which the client may see first: waited for too
        deadline = time.monotonic() + 30
        while server.panel.counters()["served"] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        counters = server.panel.counters()
        assert counters["served"] == 1 and counters["abandoned"] == 1 and counters["answered_twice"] == 0
        assert 0.6 <= counters["in_flight_s"] < 6.0  # two requests of 0.3 s each (at least), on a possibly loaded machine
