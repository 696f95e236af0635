"""The stage-yield dashboard: one self-contained HTML page (inline CSS, inline SVG) from ``collect_range`` reports.

No script, no external asset and no URL in any src/href: the page opens from disk, offline, and mails as one file.
"""

import html
import math
from datetime import datetime, timezone
from pathlib import Path

STAGE_ORDER = [
    "reviews", "trusted_reviews", "articles", "appearances", "normalized_claims", "scored_claims",
    "rectified_claims", "release", "predictions", "evaluation",
]
# The ways in of stage 4 in the order Recoverer.recover tries them (assets/scraping/platforms.py), for the tables.
WAY_ORDER = {w: i for i, w in enumerate((
    "ytdlp", "x_api", "firecrawl", "x_syndication", "x_oembed", "instagram_embed", "tiktok_oembed", "youtube_oembed",
    "telegram_embed", "bluesky_api", "page", "linked_archive", "wayback", "archive_today"))}
IN_COLOR, OUT_COLOR = "#c9d6ea", "#2f5d9e"
SERIES_COLORS = ["#2f5d9e", "#e08a2e", "#4c9a5b", "#9b59b6"]
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2733;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde3ea;padding-bottom:4px}
p.meta{color:#5b6876;margin:0 0 12px;font-size:13px}
table{border-collapse:collapse;font-size:13px;margin:8px 0 16px}
th,td{border:1px solid #dde3ea;padding:3px 8px;text-align:right} th{background:#f3f6f9}
td.l,th.l{text-align:left} tr.warn td{background:#fff4e0}
figure.chart{margin:8px 0 16px} figcaption{font-size:13px;color:#5b6876;margin-bottom:4px}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
.note{color:#5b6876;font-size:13px}
"""


def e(value) -> str:
    """Every piece of text goes through here: stage names, reasons and notes come from data."""
    return html.escape("" if value is None else str(value), quote=True)


def fmt_num(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
    return str(value)


def fmt_pct(value) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _number(value):
    """Metadata floats can be NaN (an empty evaluation); the page and JSON show those as missing."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def quarter_summary(report: dict) -> dict:
    """The per-quarter figures of the page: LLM totals over the model stages, fetch and scrape success."""
    stages = report["stages"]
    llm_stages = {}
    for name, s in stages.items():
        extras = s.get("extras", {})
        if "llm/calls" in extras:
            llm_stages[name] = {k.removeprefix("llm/"): _number(v) for k, v in extras.items() if k.startswith("llm/")}
    llm = None
    if llm_stages:
        calls = sum(v.get("calls") or 0 for v in llm_stages.values())
        hits = sum(v.get("cache_hits") or 0 for v in llm_stages.values())
        llm = {
            "calls": calls,
            "cache_hits": hits,
            "hit_rate": hits / calls if calls else None,
            "cost_usd": sum(v.get("cost_usd") or 0.0 for v in llm_stages.values()),
            "errors": sum(v.get("errors") or 0 for v in llm_stages.values()),
            "stages": llm_stages,
        }
    articles = stages.get("articles")
    fetch_rate = scrape_rate = None
    if articles:
        extras = articles.get("extras", {})
        # a quarter with nothing to fetch has no success rate, not a 0 % one
        fetch_rate = _number(extras.get("fetch_success_rate")) if extras.get("fetches", 1) else None
        if articles.get("rows_in"):
            scrape_rate = (articles.get("rows_out") or 0) / articles["rows_in"]
    return {"llm": llm, "fetch_success_rate": fetch_rate, "scrape_success": scrape_rate}


def way_table(extras: dict) -> dict[tuple[str, str], dict]:
    """(platform, way) -> {"tried", "served", "text_only", "failed": {reason: n}} from the appearances stage's
    metadata (``way/<platform>/<way>/...`` counters of ``assets.scraping.appearances.count_ways``)."""
    table: dict[tuple[str, str], dict] = {}
    for key, value in extras.items():
        parts = key.split("/", 4)
        if len(parts) < 4 or parts[0] != "way" or not isinstance(value, (int, float)):
            continue
        row = table.setdefault((parts[1], parts[2]), {"tried": 0, "served": 0, "text_only": 0, "failed": {}})
        if parts[3] == "failed" and len(parts) == 5:
            row["failed"][parts[4]] = row["failed"].get(parts[4], 0) + int(value)
        elif parts[3] in ("tried", "served", "text_only"):
            row[parts[3]] += int(value)
    return dict(sorted(table.items(), key=lambda kv: (kv[0][0], WAY_ORDER.get(kv[0][1], len(WAY_ORDER)), kv[0][1])))


def media_yield(report: dict) -> dict[str, dict]:
    """platform -> {"appearances", "with_media", "share"}: the appearances stage's media yield by platform."""
    extras = report["stages"].get("appearances", {}).get("extras", {})
    out: dict[str, dict] = {}
    for key, value in extras.items():
        parts = key.split("/")
        if len(parts) == 3 and parts[0] == "media_yield" and parts[2] in ("appearances", "with_media"):
            out.setdefault(parts[1], {"appearances": 0, "with_media": 0})[parts[2]] = int(value or 0)
    for row in out.values():
        row["share"] = row["with_media"] / row["appearances"] if row["appearances"] else None
    return dict(sorted(out.items()))


def drop_table(reports: list[dict]) -> list[dict]:
    """One row per (stage, reason) with a non-zero total, in funnel order, then by total descending, then by name."""
    rows: dict[tuple[str, str], dict] = {}
    for report in reports:
        for stage, s in report["stages"].items():
            for reason, count in s.get("drops", {}).items():
                row = rows.setdefault((stage, reason), {"stage": stage, "reason": reason, "total": 0, "by_quarter": {}})
                row["by_quarter"][report["quarter"]] = count or 0
                row["total"] += count or 0
    for row in rows.values():  # a materialized stage without the reason dropped none for it, which is not "n/a"
        for report in reports:
            if row["stage"] in report["stages"]:
                row["by_quarter"].setdefault(report["quarter"], 0)
    order = {name: i for i, name in enumerate(STAGE_ORDER)}
    return sorted(
        (r for r in rows.values() if r["total"]),
        key=lambda r: (order.get(r["stage"], len(order)), -r["total"], r["reason"]),
    )


def _svg(width: int, height: int, body: list[str], label: str) -> str:
    return (
        f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{e(label)}">'
        + "".join(body) + "</svg>"
    )


def _text(x, y, value, size=12, anchor="start", fill="#1d2733", weight="normal") -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
        f'font-weight="{weight}">{e(value)}</text>'
    )


def funnel_svg(reports: list[dict], stages: list[str], columns: int = 3) -> str:
    """Small multiples, one panel per quarter: a pale bar for rows in, a dark bar for rows out, on one shared scale."""
    label_w, bar_w, row_h, head_h, pad = 130, 190, 20, 26, 16
    panel_w, panel_h = label_w + bar_w + 60, head_h + row_h * len(stages) + 8
    top = 22
    scale = max(
        [max(s.get("rows_in") or 0, s.get("rows_out") or 0) for r in reports for s in r["stages"].values()] + [1]
    )
    cols = max(1, min(columns, len(reports)))
    rows = math.ceil(len(reports) / cols) if reports else 1
    width, height = cols * (panel_w + pad), top + rows * (panel_h + pad)
    body = [
        f'<rect x="8" y="6" width="10" height="10" fill="{IN_COLOR}"></rect>', _text(22, 15, "rows in", 11),
        f'<rect x="80" y="6" width="10" height="10" fill="{OUT_COLOR}"></rect>', _text(94, 15, "rows out", 11),
    ]
    for i, report in enumerate(reports):
        x0 = (i % cols) * (panel_w + pad)
        y0 = top + (i // cols) * (panel_h + pad)
        body.append(f'<g class="panel" data-quarter="{e(report["quarter"])}">')
        body.append(f'<rect x="{x0}" y="{y0}" width="{panel_w}" height="{panel_h}" fill="#fafbfc" stroke="#dde3ea"></rect>')
        body.append(_text(x0 + 8, y0 + 18, report["quarter"], 14, weight="bold"))
        for j, stage in enumerate(stages):
            y = y0 + head_h + j * row_h
            s = report["stages"].get(stage)
            body.append(_text(x0 + label_w - 6, y + 13, stage, 11, anchor="end"))
            if s is None:
                body.append(_text(x0 + label_w, y + 13, "not materialized", 10, fill="#8a96a3"))
                continue
            rin, rout = s.get("rows_in") or 0, s.get("rows_out") or 0
            w_in, w_out = bar_w * rin / scale, bar_w * rout / scale
            tip = f"{report['quarter']} {stage}: {rin} in, {rout} out, {s.get('dropped', rin - rout)} dropped"
            body.append(
                f'<rect x="{x0 + label_w}" y="{y + 2}" width="{w_in:.1f}" height="{row_h - 5}" fill="{IN_COLOR}">'
                f"<title>{e(tip)}</title></rect>"
            )
            body.append(
                f'<rect class="bar" data-stage="{e(stage)}" data-quarter="{e(report["quarter"])}" data-rows-out="{rout}" '
                f'x="{x0 + label_w}" y="{y + 2}" width="{w_out:.1f}" height="{row_h - 5}" fill="{OUT_COLOR}">'
                f"<title>{e(tip)}</title></rect>"
            )
            body.append(_text(x0 + label_w + max(w_in, w_out) + 4, y + 13, f"{rout}/{rin}", 11))
        body.append("</g>")
    return _svg(width, height, body, "rows in and out per stage, one panel per quarter")


def bars_svg(quarters: list[str], series: list[tuple[str, list]], y_max: float, fmt, floor: float | None = None) -> str:
    """Vertical grouped bars, one group per quarter; ``None`` values draw no bar and say n/a."""
    left, right, top, bottom, plot_h = 56, 16, 26, 46, 180
    group_w = max(36, 14 * len(series) + 18)
    width = max(left + right + group_w * max(1, len(quarters)), left + 150 * len(series) + 20)
    height = top + plot_h + bottom
    y_max = y_max or 1.0
    body = []
    for k, (name, _values) in enumerate(series):
        color = SERIES_COLORS[k % len(SERIES_COLORS)]
        body.append(f'<rect x="{left + k * 150}" y="6" width="10" height="10" fill="{color}"></rect>')
        body.append(_text(left + k * 150 + 14, 15, name, 11))
    for t in range(5):
        value = y_max * t / 4
        y = top + plot_h - plot_h * t / 4
        body.append(f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e6eaef"></line>')
        body.append(_text(left - 6, y + 4, fmt(value), 10, anchor="end", fill="#5b6876"))
    if floor is not None:
        y = top + plot_h - plot_h * floor / y_max
        body.append(
            f'<line x1="{left}" x2="{width - right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#c0392b" stroke-dasharray="5 4"></line>'
        )
        body.append(_text(width - right, y - 4, f"floor {fmt(floor)}", 10, anchor="end", fill="#c0392b"))
    bar_w = (group_w - 12) / max(1, len(series))
    for i, quarter in enumerate(quarters):
        gx = left + i * group_w + 6
        for k, (name, values) in enumerate(series):
            value = values[i]
            x = gx + k * bar_w
            if value is None:
                body.append(_text(x + bar_w / 2, top + plot_h - 4, "n/a", 9, anchor="middle", fill="#8a96a3"))
                continue
            h = plot_h * min(value, y_max) / y_max
            body.append(
                f'<rect class="bar" data-quarter="{e(quarter)}" data-series="{e(name)}" data-value="{value}" '
                f'x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                f'fill="{SERIES_COLORS[k % len(SERIES_COLORS)]}"><title>{e(f"{quarter} {name}: {fmt(value)}")}</title></rect>'
            )
        body.append(_text(gx + (group_w - 12) / 2, top + plot_h + 16, quarter, 11, anchor="middle"))
    body.append(f'<line x1="{left}" x2="{width - right}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="#5b6876"></line>')
    return _svg(width, height, body, ", ".join(name for name, _ in series) + " per quarter")


def _figure(chart_id: str, caption: str, svg: str) -> str:
    return f'<figure class="chart" id="{e(chart_id)}"><figcaption>{e(caption)}</figcaption>{svg}</figure>'


def _table(head: list[str], rows: list[list], table_id: str, row_classes: list[str] | None = None, left: int = 1) -> str:
    """``rows`` hold already-escaped cell HTML (``<td>...``), so cells can carry data attributes."""
    out = [f'<table id="{e(table_id)}"><thead><tr>']
    out += [f'<th class="{"l" if i < left else ""}">{e(h)}</th>' for i, h in enumerate(head)]
    out.append("</tr></thead><tbody>")
    for i, cells in enumerate(rows):
        cls = f' class="{row_classes[i]}"' if row_classes and row_classes[i] else ""
        out.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def media_sections(shown: list[dict], quarters: list[str]) -> list[str]:
    """Media yield by platform per quarter (appearances with media / appearances), and the ways in of stage 4."""
    parts = ["<h2>Media yield by platform</h2>"]
    yields = {r["quarter"]: media_yield(r) for r in shown}
    platforms = sorted({p for y in yields.values() for p in y})
    if not platforms:
        parts.append('<p class="note" id="no-media-yield">No appearance was recovered in these quarters.</p>')
        return parts
    parts.append(_figure(
        "chart-media-yield", "Share of appearances with media, by platform (one bar per quarter).",
        bars_svg(platforms, [(q, [(yields[q].get(p) or {}).get("share") for p in platforms]) for q in quarters][-4:],
                 1.0, fmt_pct),
    ))
    rows = []
    for p in platforms:
        cells = [f'<td class="l">{e(p)}</td>']
        for q in quarters:
            row = yields[q].get(p)
            text = "n/a" if row is None else f'{row["with_media"]}/{row["appearances"]} ({fmt_pct(row["share"])})'
            cells.append(f'<td data-platform="{e(p)}" data-quarter="{e(q)}" data-field="media_yield">{e(text)}</td>')
        rows.append(cells)
    parts.append(_table(["platform", *quarters], rows, "media-yield-table"))
    totals: dict[tuple[str, str], dict] = {}
    for r in shown:
        for key, row in way_table(r["stages"].get("appearances", {}).get("extras", {})).items():
            total = totals.setdefault(key, {"tried": 0, "served": 0, "text_only": 0, "failed": {}})
            for field in ("tried", "served", "text_only"):
                total[field] += row[field]
            for reason, n in row["failed"].items():
                total["failed"][reason] = total["failed"].get(reason, 0) + n
    if totals:
        parts.append("<h2>Ways in (stage 4)</h2>")
        rows = [[f'<td class="l">{e(p)}</td>', f'<td class="l">{e(w)}</td>',
                 f'<td data-platform="{e(p)}" data-way="{e(w)}" data-field="tried">{t["tried"]}</td>',
                 f'<td data-platform="{e(p)}" data-way="{e(w)}" data-field="served">{t["served"]}</td>',
                 f'<td class="l">{e(", ".join(f"{k}={v}" for k, v in sorted(t["failed"].items(), key=lambda kv: -kv[1])))}</td>']
                for (p, w), t in sorted(totals.items(), key=lambda kv: (kv[0][0], WAY_ORDER.get(kv[0][1], 99)))]
        parts.append(_table(["platform", "way in", "tried", "served", "failed by reason"], rows, "ways-table", left=2))
    return parts


def audit_section(reports: list[dict]) -> list[str]:
    """Per quarter, its release's latest human audit (``yield_report.audit_report``): how far people agree with the
    labels, and the audit's gate (a failed gate is highlighted)."""
    audited = [(r["quarter"], r["audit"]) for r in reports if r.get("audit")]
    parts = ["<h2>Human audit</h2>"]
    if not audited:
        return parts + ['<p class="note" id="no-audit">No release in these quarters has been audited by people yet.</p>']
    rows, classes = [], []
    for q, a in audited:
        gate = {True: "passed", False: "FAILED"}.get(a.get("passed"), "n/a")
        rows.append([f'<td class="l">{e(q)}</td>', f'<td class="l">{e(a.get("release_version"))}</td>']
                    + [f'<td data-quarter="{e(q)}" data-field="{k}">{e(v)}</td>' for k, v in (
                        ("agreement3", fmt_pct(a.get("agreement3"))), ("mse", fmt_num(a.get("mse"))),
                        ("alpha_annotators", fmt_num(a.get("alpha_annotators"))), ("claims", fmt_num(a.get("claims"))),
                        ("annotators", fmt_num(a.get("annotators"))), ("gate", gate))]
                    + [f'<td class="l">{e(a.get("summary"))}</td>'])
        classes.append("" if a.get("passed") is not False else "warn")
    return parts + [_table(["quarter", "release version", "3-bin agreement", "MSE", "alpha (annotators)", "claims",
                            "annotators", "gate", "summary"], rows, "audit-table", classes, left=2)]


def render_html(reports: list[dict], title: str = "veritas stage yields") -> str:
    """The whole page for the given quarter reports (``yield_report.collect_range``); quarters with no data are listed, not drawn."""
    shown = [r for r in reports if r["stages"]]
    empty = [r["quarter"] for r in reports if not r["stages"]]
    quarters = [r["quarter"] for r in shown]
    span = f"{reports[0]['quarter']} to {reports[-1]['quarter']}" if reports else "no quarters"
    stages = [s for s in STAGE_ORDER if any(s in r["stages"] for r in shown)]
    stages += sorted({s for r in shown for s in r["stages"]} - set(stages))
    summaries = {r["quarter"]: quarter_summary(r) for r in shown}
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)} {e(span)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">Quarters {e(span)}; {len(shown)} with materialized stages. Generated {e(generated)} from the '
        "latest materialization of each stage and quarter in the Dagster instance.</p>",
    ]
    if empty:
        parts.append(f'<p class="note" id="empty-quarters">Nothing materialized for: {e(", ".join(empty))}.</p>')
    if not shown:
        parts.append('<p class="note">No stage has been materialized in this range yet.</p>')
        return "".join(parts + audit_section(reports) + ["</body></html>"])

    parts.append("<h2>Funnel</h2>")
    parts.append(_figure("chart-funnel", "Rows in and rows out per stage, one panel per quarter (shared scale).",
                         funnel_svg(shown, stages)))
    head = ["stage"] + [f"{q} {field}" for q in quarters for field in ("in", "out")]
    rows = []
    for stage in stages:
        cells = [f'<td class="l">{e(stage)}</td>']
        for r in shown:
            for field in ("rows_in", "rows_out"):
                s = r["stages"].get(stage)
                value = None if s is None else s.get(field)
                cells.append(
                    f'<td data-stage="{e(stage)}" data-quarter="{e(r["quarter"])}" data-field="{field}">{e(fmt_num(value))}</td>'
                )
        rows.append(cells)
    parts.append(_table(head, rows, "funnel-table"))

    parts.append("<h2>Drop reasons</h2>")
    drops = drop_table(shown)
    if drops:
        rows = [
            [f'<td class="l">{e(d["stage"])}</td>', f'<td class="l reason">{e(d["reason"])}</td>',
             f'<td data-stage="{e(d["stage"])}" data-reason="{e(d["reason"])}" data-field="total">{d["total"]}</td>']
            + [f'<td>{e(fmt_num(d["by_quarter"].get(q)))}</td>' for q in quarters]
            for d in drops
        ]
        parts.append(_table(["stage", "reason", "total", *quarters], rows, "drop-table", left=2))
    else:
        parts.append('<p class="note">No record was dropped in these quarters.</p>')

    parts.append("<h2>Scraping</h2>")
    fetch = [summaries[q]["fetch_success_rate"] for q in quarters]
    scrape = [summaries[q]["scrape_success"] for q in quarters]
    parts.append(_figure(
        "chart-scraping", "Fetch success rate (pages fetched) and scrape success (articles out / in); the WARN band is 50 %.",
        bars_svg(quarters, [("fetch success", fetch), ("scrape success", scrape)], 1.0, fmt_pct, floor=0.5),
    ))
    rows = [
        [f'<td class="l">{e(q)}</td>',
         f'<td data-quarter="{e(q)}" data-field="fetch_success_rate">{e(fmt_pct(summaries[q]["fetch_success_rate"]))}</td>',
         f'<td data-quarter="{e(q)}" data-field="scrape_success">{e(fmt_pct(summaries[q]["scrape_success"]))}</td>']
        for q in quarters
    ]
    parts.append(_table(["quarter", "fetch success", "scrape success"], rows, "scraping-table"))

    parts += media_sections(shown, quarters)

    parts.append("<h2>Model calls</h2>")
    llm_quarters = [q for q in quarters if summaries[q]["llm"]]
    if llm_quarters:
        costs = [summaries[q]["llm"]["cost_usd"] for q in llm_quarters]
        parts.append(_figure("chart-llm-cost", "LLM cost per quarter (USD, litellm's local cost map; local models cost 0).",
                             bars_svg(llm_quarters, [("cost (USD)", costs)], max(costs) or 1.0, lambda v: f"${v:.2f}")))
        parts.append(_figure("chart-llm-cache", "LLM cache hit rate per quarter (all model stages together).",
                             bars_svg(llm_quarters, [("cache hit rate", [summaries[q]["llm"]["hit_rate"] for q in llm_quarters])],
                                      1.0, fmt_pct)))
        rows = []
        for q in llm_quarters:
            llm = summaries[q]["llm"]
            by_stage = ", ".join(f"{stage}: {v.get('calls')}" for stage, v in llm["stages"].items())
            rows.append(
                [f'<td class="l">{e(q)}</td>']
                + [f'<td data-quarter="{e(q)}" data-field="{k}">{e(v)}</td>' for k, v in (
                    ("calls", llm["calls"]), ("cache_hits", llm["cache_hits"]), ("hit_rate", fmt_pct(llm["hit_rate"])),
                    ("cost_usd", f"{llm['cost_usd']:.4f}"), ("errors", llm["errors"]))]
                + [f'<td class="l">{e(by_stage)}</td>']
            )
        parts.append(_table(["quarter", "calls", "cache hits", "hit rate", "cost (USD)", "errors", "calls by stage"],
                            rows, "llm-table"))
    else:
        parts.append('<p class="note" id="no-llm">No model stage was materialized in these quarters.</p>')

    checks = [(r["quarter"], name, c) for r in shown for name, c in sorted(r.get("checks", {}).items())]
    parts.append("<h2>Yield checks</h2>")
    if checks:
        rows, classes = [], []
        for q, name, c in checks:
            rows.append([f'<td class="l">{e(q)}</td>', f'<td class="l">{e(name)}</td>',
                         f'<td class="l">{"passed" if c["passed"] else e(c["severity"])}</td>',
                         f'<td class="l">{e(c.get("note") or "")}</td>'])
            classes.append("" if c["passed"] else "warn")
        parts.append(_table(["quarter", "check", "result", "note"], rows, "check-table", classes, left=4))
    else:
        parts.append('<p class="note">No yield check has run for these quarters.</p>')
    parts += audit_section(reports)
    parts.append("</body></html>")
    return "".join(parts)


def write_html(reports: list[dict], path: str | Path, title: str = "veritas stage yields") -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render_html(reports, title), encoding="utf-8")
    return target
