"""``veritas models check``: one tiny structured request to every configured ensemble member (and one with an image
where ``vision: true``), so a real ensemble is known to work before a quarter spends money on it."""

import argparse
import io
import json
import sys
import uuid

CHECK_STAGE = "models_check"  # the check's calls are in the ledger under this stage (real models cost a little)
# A question whose answer is certain, and an image whose content is certain: a model that gets them wrong is broken.
TEXT_MESSAGES = [
    {"role": "system", "content": "Reply with one JSON object only."},
    {"role": "user", "content": 'Is Paris the capital of France? Reply as {"answer": "yes"} or {"answer": "no"}.'},
]
IMAGE_PROMPT = 'Which colour fills this image? Reply as {"colour": "<one English colour word>"}.'
CHECK_COLOUR = "red"


def check_image() -> bytes:
    """A 64x64 JPEG filled with pure red."""
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), (255, 0, 0)).save(out, format="JPEG", quality=90)
    return out.getvalue()


def declared(llm, member) -> dict:
    """What the bundled litellm model map (or the member's own overrides) says: prices per million tokens, context
    window, vision and response-schema support. The embedded model is free; its window is the server's."""
    from dagster_project.resources.llm import _import_litellm

    info: dict = {}
    if member.is_embedded:
        server = llm._server  # started by the text request; never started again here (a failed start is reported)
        info = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
                "max_input_tokens": server.n_ctx if server is not None else None}
    else:
        try:
            info = dict(_import_litellm().get_model_info(model=member.model))
        except Exception:  # noqa: BLE001 - litellm raises a bare Exception for a model missing from its map
            info = {}
    pin = info.get("input_cost_per_token") if member.input_cost_per_token is None else member.input_cost_per_token
    pout = info.get("output_cost_per_token") if member.output_cost_per_token is None else member.output_cost_per_token
    return {
        "usd_per_m_input": None if pin is None else round(pin * 1e6, 6),
        "usd_per_m_output": None if pout is None else round(pout * 1e6, 6),
        "context_window": info.get("max_input_tokens") or info.get("max_tokens"),
        "map_vision": info.get("supports_vision"),
        "map_response_schema": info.get("supports_response_schema"),
    }


def _outcome(answer) -> str:
    if answer.error is None:
        return "ok"
    return "invalid JSON answer" if answer.error.startswith("invalid_output") else answer.error.split(":", 1)[0]


def check_member(llm, name: str) -> dict:
    """One text request (JSON mode) and, for a vision member, one image request; never answered from the cache."""
    from pydantic import create_model

    from dagster_project.resources.llm import image_part

    YesNo, Colour = create_model("YesNo", answer=str), create_model("Colour", colour=str)  # noqa: N806 - classes
    member = llm.member(name)
    nonce = uuid.uuid4().hex  # a fresh template hash: the check always reaches the model
    text = llm.complete_json(name, TEXT_MESSAGES, YesNo.model_json_schema(), YesNo, template_id="models_check_text",
                             template_hash=nonce, stage=CHECK_STAGE, parse_attempts=1)
    row = {
        "member": name, "model": member.model, "json_mode": member.json_mode,
        "json": _outcome(text), "json_error": text.error or "",
        "correct": text.parsed is not None and text.parsed["answer"].strip().lower() == "yes",
        "latency_s": round(text.latency_s, 3), "vision": "not configured", "vision_latency_s": None,
        "cost_usd": text.cost_usd, **declared(llm, member),
    }
    if member.vision:
        messages = [TEXT_MESSAGES[0], {"role": "user", "content": [{"type": "text", "text": IMAGE_PROMPT},
                                                                   image_part(check_image())]}]
        seen = llm.complete_json(name, messages, Colour.model_json_schema(), Colour, template_id="models_check_image",
                                 template_hash=nonce, media_hashes=["check-red-64"], stage=CHECK_STAGE,
                                 parse_attempts=1)
        if seen.parsed is None:
            row["vision"] = f"failed: {_outcome(seen)}"
            row["vision_error"] = seen.error or ""
        else:
            said = seen.parsed["colour"].strip().lower()
            row["vision"] = "ok" if CHECK_COLOUR in said else f"wrong answer ({said[:30]!r} for a red image)"
        row["vision_latency_s"] = round(seen.latency_s, 3)
        row["cost_usd"] += seen.cost_usd
    row["passed"] = row["json"] == "ok" and row["vision"] in ("ok", "not configured")
    return row


def check_all(llm) -> list[dict]:
    return [check_member(llm, name) for name in llm.member_names()]


def _cell(value) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def format_table(rows: list[dict]) -> str:
    cols = (("member", "member"), ("model", "model"), ("json", "JSON mode"), ("correct", "right answer"),
            ("latency_s", "latency s"), ("vision", "vision"), ("usd_per_m_input", "$/M in"),
            ("usd_per_m_output", "$/M out"), ("context_window", "context"))
    table = [[_cell(r[k]) for k, _ in cols] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, (_, h) in enumerate(cols)]
    lines = ["  ".join(h.ljust(w) for (_, h), w in zip(cols, widths))]
    lines.append("-" * len(lines[0]))
    lines += ["  ".join(c.ljust(w) for c, w in zip(t, widths)) for t in table]
    for r in rows:
        if r["json_error"]:
            lines.append(f"  {r['member']}: {r['json_error'][:300]}")
        if r.get("vision_error"):
            lines.append(f"  {r['member']} (image): {r['vision_error'][:300]}")
    distinct = len({r["model"] for r in rows})
    if rows and distinct < len(rows):
        lines.append(f"  note: {len(rows)} members but {distinct} distinct model(s): their agreement is not independent")
    lines.append(f"{sum(r['passed'] for r in rows)}/{len(rows)} members passed; "
                 f"the check cost ${sum(r['cost_usd'] for r in rows):.6f} (ledger stage {CHECK_STAGE})")
    return "\n".join(lines)


def register(subparsers) -> list[argparse.ArgumentParser]:
    group = subparsers.add_parser("models", help="the configured LLM ensemble")
    actions = group.add_subparsers(dest="models_command", required=True)
    check = actions.add_parser(
        "check", help="one tiny JSON request per member (and one image where vision: true): JSON mode, vision, "
                      "latency, price per million tokens, context window")
    check.add_argument("--json", action="store_true", help="print the results as JSON")
    check.set_defaults(handler=run_check)
    return [group, check]


def run_check(args) -> int:
    from dagster_project.config import load_config
    from dagster_project.resources.llm import LLMResource

    try:
        config = load_config(getattr(args, "config", None))
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    llm = LLMResource(**config["llm"])
    try:
        rows = check_all(llm)
    finally:
        llm.close()
    print(json.dumps(rows, indent=2) if args.json else format_table(rows))
    return 0 if all(r["passed"] for r in rows) else 1
