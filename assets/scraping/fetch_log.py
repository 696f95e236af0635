"""What stages 3 and 4 fetched, as yield metadata: the web resource's fetch log summed (success rate, archive hits,
retries, bytes, errors by kind)."""





def fetch_metadata(entries: list[dict]) -> dict[str, float | int]:
    """Numeric yield metadata from the web resource's fetch log (what this stage fetched)."""
    out: dict[str, float | int] = {"fetches": len(entries)}
    if not entries:
        return {**out, "fetch_success_rate": 0.0}
    ok = sum(1 for e in entries if e.get("error") is None and 200 <= (e.get("status") or 0) < 300)
    out["fetch_success_rate"] = round(ok / len(entries), 3)
    out["fetch_from_archive"] = sum(1 for e in entries if e.get("from_archive"))
    out["fetch_retries"] = sum(max(0, int(e.get("attempts") or 0) - 1) for e in entries)
    out["fetch_bytes"] = sum(int(e.get("bytes") or 0) for e in entries)
    for e in entries:
        if e.get("error"):
            key = f"fetch_error/{e['error']}"
            out[key] = int(out.get(key, 0)) + 1
    return out
