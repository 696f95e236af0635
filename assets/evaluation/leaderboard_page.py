"""The leaderboard page: one self-contained HTML file (inline CSS, SVG and script; nothing fetched, no URL).

The table, the per-axis tables and the charts are rendered here for the board's window, so the page reads without
a script. The inline script only re-pools the per-quarter sums it carries when the reader picks another window of
quarters, the after-cut-off switch or a sort column (state in the URL fragment: #from=..&to=..&after=1&sort=mse).
Bootstrap intervals need the claims, so they are shown for the window the page was written with only.
"""

import json
from datetime import UTC, datetime

from assets.evaluation.evaluation import cutoff_position, quarter_number
from dagster_project.core.dashboard import CSS as DASHBOARD_CSS
from dagster_project.core.dashboard import SERIES_COLORS, e

CSS = DASHBOARD_CSS + """
form#window{display:flex;gap:16px;align-items:center;font-size:13px;margin:8px 0}
table#board th[data-key]{cursor:pointer;user-select:none} table#board th[aria-sort=ascending]::after{content:" \\25B2"}
table#board th[aria-sort=descending]::after{content:" \\25BC"} table#board tr.unranked td{color:#8a96a3}
table#board tr.partial td[data-field=coverage]{color:#c0392b;font-weight:bold}
.out{opacity:.25} .charts{display:flex;flex-wrap:wrap;gap:12px}
"""

COLUMNS = [  # key, header, left-aligned
    ("rank", "rank", False), ("name", "system", True), ("kind", "kind", True), ("cutoff", "cut-off", True),
    ("input", "input", True),
    ("quarters", "quarters", False), ("n", "claims scored", False), ("coverage", "coverage", False),
    ("mse", "MSE", False), ("ci", "MSE 95% CI", False),
    ("mae", "MAE", False), ("acc3", "3-bin acc.", False), ("acc7", "7-bin acc.", False),
    ("flagged", "flagged share", False), ("clean", "clean MSE", False), ("before", "before MSE", False),
]


LEFT, ASCENDING = ' class="l"', ' aria-sort="ascending"'


def _head(labels: list[str], left: int) -> str:
    return "".join(f"<th{LEFT if i < left else ''}>{e(h)}</th>" for i, h in enumerate(labels))


def fmt(value, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def fmt_ci(ci) -> str:
    return "-" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def page_data(board: dict) -> dict:
    """What the script needs: per system and quarter the additive sums, the relation and the contamination counts."""
    return {
        "quarters": board["all_quarters"],
        "window": {k: board["window"][k] for k in ("from", "to", "after_cutoff")},
        "systems": [{
            "name": s["name"], "kind": s["kind"], "cutoff": s["knowledge_cutoff"], "input": system_input(s),
            "ci": {w: s["windows"][w]["ci"]["mse"] for w in ("all", "clean")},
            "rejected": sorted({r["quarter"] for r in s.get("rejected", [])}),
            # "fresh": the quarter's sums without its recurring claims, which the clean window pools
            "quarters": {q: {**v["sums"], "fresh": v.get("sums_fresh", v["sums"]), "relation": v["relation"],
                             "contamination": v["contamination"]}
                         for q, v in s["quarters"].items()},
        } for s in board["systems"]],
    }


def system_input(s: dict) -> str:
    """The file a system was given (a board written before systems said so: the whole release)."""
    return s.get("input") or "full_release"


def fmt_coverage(coverage) -> str:
    """The answered share; a partial submission says so in words, not in colour alone."""
    return fmt(coverage, 3) + (" partial" if coverage and coverage < 1 else "")


def _cells(s: dict, rank_window: str) -> dict:
    m = s["windows"][rank_window]
    return {"rank": s["rank"], "name": s["name"], "kind": s["kind"], "cutoff": s["knowledge_cutoff"],
            "input": system_input(s),
            "quarters": len(m["quarters"]), "n": m["n"], "coverage": fmt_coverage(m.get("coverage")),
            "mse": fmt(m["mse"]), "ci": fmt_ci(m["ci"]["mse"]),
            "mae": fmt(m["mae"]), "acc3": fmt(m["acc3"]), "acc7": fmt(m["acc7"]), "flagged": fmt(m["flagged_share"], 3),
            "clean": fmt(s["windows"]["clean"]["mse"]), "before": fmt(s["windows"]["before"]["mse"])}


def board_table_html(board: dict) -> str:
    rank_window = board["window"]["rank_window"]
    head = "".join(f'<th data-key="{k}"{LEFT if left else ""}{ASCENDING if k == "rank" else ""}>{e(label)}</th>'
                   for k, label, left in COLUMNS)
    rows = []
    for s in board["systems"]:
        cells = _cells(s, rank_window)
        tds = "".join(f'<td data-field="{k}"{LEFT if left else ""}>{e("-" if cells[k] is None else cells[k])}</td>'
                      for k, _, left in COLUMNS)
        classes = " ".join(c for c, on in (("unranked", not s["rank"]), ("partial", s.get("partial"))) if on)
        attr = f' class="{classes}"' if classes else ""
        rows.append(f'<tr data-system="{e(s["name"])}"{attr}>{tds}</tr>')
    return f'<table id="board"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def rejected_html(board: dict) -> str:
    """The prediction files that could not be read, each with its reason (their systems are left unranked)."""
    items = "".join(f'<li data-system="{e(r["system"])}" data-quarter="{e(r["quarter"])}"><b>{e(r["system"])}</b> '
                    f'{e(r["quarter"])}: {e(r["reason"])}</li>' for r in board.get("rejected") or [])
    return f'<h2>Rejected submissions</h2><ul id="rejected">{items}</ul>' if items else ""


def axis_table_html(board: dict, axis: str) -> str:
    """Integrity per modality or per language on the ranking window, with the MSE interval."""
    rank_window = board["window"]["rank_window"]
    rows = []
    for s in board["systems"]:
        for group, m in s["windows"][rank_window][axis].items():
            rows.append(f'<tr data-system="{e(s["name"])}" data-group="{e(group)}"><td class="l">{e(s["name"])}</td>'
                        f'<td class="l">{e(group)}</td><td data-field="n">{m["n"]}</td>'
                        f'<td data-field="mse">{fmt(m["mse"])}</td><td>{fmt_ci(m["ci"]["mse"])}</td>'
                        f'<td data-field="acc3">{fmt(m["acc3"])}</td><td data-field="acc7">{fmt(m["acc7"])}</td></tr>')
    if not rows:
        return '<p class="note">No scored claim in this window.</p>'
    head = _head(["system", axis, "n", "MSE", "MSE 95% CI", "3-bin acc.", "7-bin acc."], 2)
    return f'<table id="{axis}-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def quarter_table_html(board: dict) -> str:
    """Every system on every quarter: relation to its cut-off, claims, metrics, contamination share."""
    rows = []
    for s in board["systems"]:
        for q, v in s["quarters"].items():
            rows.append(f'<tr data-system="{e(s["name"])}" data-quarter="{e(q)}"><td class="l">{e(s["name"])}</td>'
                        f'<td class="l">{e(q)}</td><td class="l">{e(v["relation"])}</td><td>{v["claims"]}</td>'
                        f'<td data-field="n">{v["n"]}</td><td data-field="mse">{fmt(v["mse"])}</td>'
                        f'<td data-field="mae">{fmt(v["mae"])}</td><td>{fmt(v["acc3"])}</td><td>{fmt(v["acc7"])}</td>'
                        f'<td>{fmt(v["flagged_share"], 3)}</td></tr>')
    head = _head(["system", "quarter", "relation", "claims", "n", "MSE", "MAE", "3-bin acc.", "7-bin acc.",
                  "flagged share"], 3)
    return f'<table id="quarter-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def audit_table_html(board: dict) -> str:
    """Per quarter: the release version scored and how far people agree with its labels (its human audit)."""
    figures, rows = board.get("audit_figures") or {}, []
    for q in board["all_quarters"]:
        a = figures.get(q)
        version = (board.get("release_versions") or {}).get(q, "-")
        if a is None:
            rows.append(f'<tr data-quarter="{e(q)}"><td class="l">{e(q)}</td><td class="l">{e(version)}</td>'
                        '<td class="l" data-field="line" colspan="6">not audited yet</td></tr>')
            continue
        gate, warn = ("passed", "") if a["passed"] else (f"below {a['min_agreement']:.0%}", ' class="warn"')
        rows.append(f'<tr data-quarter="{e(q)}"{warn}><td class="l">{e(q)}</td>'
                    f'<td class="l">{e(version)}</td><td class="l" data-field="line">{e(board["audit"][q])}</td>'
                    f'<td data-field="agreement3">{fmt(a["agreement3"], 3)}</td><td data-field="mse">{fmt(a["mse"])}</td>'
                    f'<td data-field="alpha">{fmt(a["alpha_annotators"], 3)}</td><td data-field="n">{a["n"]}</td>'
                    f'<td class="l" data-field="gate">{e(gate)}</td></tr>')
    head = _head(["quarter", "release version", "people agree with the labels", "3-bin agreement", "MSE",
                  "alpha (annotators)", "claims", "gate"], 3)
    return f'<table id="audit-table"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def mse_chart(board: dict, s: dict, index: int, y_max: float, width: int = 420, height: int = 220) -> str:
    """One system's integrity MSE per quarter on a time axis, its knowledge cut-off as a dashed red line."""
    quarters = board["all_quarters"]
    cut = cutoff_position(s["knowledge_cutoff"]) if s["knowledge_cutoff"] != "unknown" else None
    xs = [quarter_number(q) for q in quarters]
    lo, hi = min(xs + ([cut] if cut is not None else [])) - 0.5, max(xs + ([cut] if cut is not None else [])) + 0.5
    left, right, top, bottom = 44, 12, 24, 40
    px = lambda v: left + (v - lo) / (hi - lo) * (width - left - right)  # noqa: E731
    py = lambda v: top + (1 - v / y_max) * (height - top - bottom)  # noqa: E731
    color = SERIES_COLORS[index % len(SERIES_COLORS)]
    body = [f'<line x1="{left}" y1="{py(0):.1f}" x2="{width - right}" y2="{py(0):.1f}" stroke="#8a96a3"/>',
            f'<line x1="{left}" y1="{top}" x2="{left}" y2="{py(0):.1f}" stroke="#8a96a3"/>']
    for tick in (0.0, y_max / 2, y_max):
        body.append(f'<text x="{left - 4}" y="{py(tick) + 4:.1f}" font-size="10" text-anchor="end">{tick:.2f}</text>')
    for q, x in zip(quarters, xs):
        body.append(f'<text class="tick" data-quarter="{e(q)}" x="{px(x):.1f}" y="{height - bottom + 14}" font-size="10" '
                    f'text-anchor="middle">{e(q)}</text>')
    if cut is not None:
        body.append(f'<line class="cutoff" data-cutoff="{e(s["knowledge_cutoff"])}" x1="{px(cut):.1f}" y1="{top}" '
                    f'x2="{px(cut):.1f}" y2="{py(0):.1f}" stroke="#c0392b" stroke-width="2" stroke-dasharray="5,4"/>')
        # in the right half the label goes left of the line, so it stays inside the chart
        label_x, anchor = (px(cut) - 4, "end") if px(cut) > (left + width - right) / 2 else (px(cut) + 4, "start")
        body.append(f'<text x="{label_x:.1f}" y="{top + 10}" font-size="10" text-anchor="{anchor}" fill="#c0392b">'
                    f'cut-off {e(s["knowledge_cutoff"])}</text>')
    else:
        body.append(f'<text x="{width - right}" y="{top + 10}" font-size="10" text-anchor="end" fill="#c0392b">'
                    "cut-off unknown</text>")
    points = [(x, s["quarters"][q]["mse"], q) for q, x in zip(quarters, xs) if s["quarters"][q]["mse"] is not None]
    if len(points) > 1:
        path = " ".join(f"{px(x):.1f},{py(v):.1f}" for x, v, _ in points)
        body.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
    for x, v, q in points:
        body.append(f'<circle class="point" data-quarter="{e(q)}" data-mse="{v!r}" cx="{px(x):.1f}" cy="{py(v):.1f}" '
                    f'r="4" fill="{color}"><title>{e(q)}: MSE {v:.4f}</title></circle>')
    body.append(f'<text x="{left}" y="14" font-size="12" font-weight="bold">{e(s["name"])}</text>')
    return (f'<figure class="chart" id="mse-{index}" data-system="{e(s["name"])}"><svg width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" role="img" aria-label="integrity MSE by quarter, {e(s["name"])}">'
            + "".join(body) + "</svg></figure>")


SCRIPT = r"""
(function () {
  var D = JSON.parse(document.getElementById("board-data").textContent);
  var Q = D.quarters, form = document.getElementById("window");
  var fromSel = form.elements.from, toSel = form.elements.to, after = form.elements.after;
  var sortKey = "rank", sortDir = 1;
  var COLS = ["rank", "name", "kind", "cutoff", "input", "quarters", "n", "coverage", "mse", "ci", "mae", "acc3", "acc7", "flagged", "clean", "before"];
  function fx(v, d) { return v === null || v === undefined ? "-" : v.toFixed(d === undefined ? 4 : d); }
  function pool(s, qs, fresh) {
    var n = 0, se = 0, ae = 0, h3 = 0, h7 = 0, fl = 0, sc = 0, an = 0;
    qs.forEach(function (q) {
      var x = s.quarters[q]; if (!x) return;
      if (fresh) x = Object.assign({}, x, x.fresh);
      n += x.n; se += x.se; ae += x.ae; h3 += x.hit3; h7 += x.hit7; an += x.answered === undefined ? x.n : x.answered;
      if (x.contamination) { fl += x.contamination.flagged; sc += x.contamination.scored; }
    });
    var claims = n;
    if (!an) n = 0;  // nothing answered: no submission to score, never a row of zeros
    return {n: n, quarters: qs.length, coverage: claims ? an / claims : null, mse: n ? se / n : null, mae: n ? ae / n : null, acc3: n ? h3 / n : null,
            acc7: n ? h7 / n : null, flagged: sc ? fl / sc : null};
  }
  function readHash() {
    var h = new URLSearchParams(location.hash.slice(1));
    if (Q.indexOf(h.get("from")) >= 0) fromSel.value = h.get("from");
    if (Q.indexOf(h.get("to")) >= 0) toSel.value = h.get("to");
    if (h.has("after")) after.checked = h.get("after") === "1";
    if (COLS.indexOf(h.get("sort")) >= 0) { sortKey = h.get("sort"); sortDir = h.get("dir") === "desc" ? -1 : 1; }
  }
  function render() {
    var i0 = Q.indexOf(fromSel.value), i1 = Q.indexOf(toSel.value);
    var win = Q.slice(Math.min(i0, i1), Math.max(i0, i1) + 1), rankWin = after.checked ? "clean" : "all";
    var exact = win[0] === D.window.from && win[win.length - 1] === D.window.to && after.checked === D.window.after_cutoff;
    var rows = D.systems.map(function (s) {
      var rel = function (q) { return s.quarters[q] ? s.quarters[q].relation : null; };
      var all = pool(s, win), clean = pool(s, win.filter(function (q) { return rel(q) === "clean"; }), true);
      var before = pool(s, win.filter(function (q) { return rel(q) === "before"; }));
      var m = rankWin === "clean" ? clean : all, ci = exact ? s.ci[rankWin] : null;
      var used = rankWin === "clean" ? win.filter(function (q) { return rel(q) === "clean"; }) : win;
      var rejected = (s.rejected || []).some(function (q) { return used.indexOf(q) >= 0; });
      return {name: s.name, kind: s.kind, cutoff: s.cutoff, input: s.input, quarters: m.quarters, n: m.n, coverage: m.coverage,
              rejected: rejected, mse: m.mse,
              ci: ci ? "[" + fx(ci[0]) + ", " + fx(ci[1]) + "]" : "-", mae: m.mae, acc3: m.acc3, acc7: m.acc7,
              flagged: m.flagged, clean: clean.mse, before: before.mse, rank: null};
    });
    rows.filter(function (r) { return r.mse !== null && r.coverage > 0 && !r.rejected; })
        .sort(function (a, b) { return a.mse - b.mse || (a.name < b.name ? -1 : 1); })
        .forEach(function (r, i) { r.rank = i + 1; });
    rows.sort(function (a, b) {
      var x = a[sortKey], y = b[sortKey];
      if (x === null || x === "-") return (y === null || y === "-") ? 0 : 1;
      if (y === null || y === "-") return -1;
      return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
    });
    var body = document.querySelector("#board tbody");
    body.textContent = "";
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-system", r.name);
      tr.className = [r.rank === null ? "unranked" : "", r.coverage > 0 && r.coverage < 1 ? "partial" : ""]
        .join(" ").trim();
      COLS.forEach(function (k) {
        var td = document.createElement("td"), v = r[k];
        td.setAttribute("data-field", k);
        if (k === "name" || k === "kind" || k === "cutoff" || k === "input") td.className = "l";
        td.textContent = k === "coverage" ? (v === null ? "-" : fx(v, 3) + (v > 0 && v < 1 ? " partial" : ""))
                       : typeof v === "number" && ["rank", "quarters", "n"].indexOf(k) < 0 ? fx(v, k === "flagged" ? 3 : 4)
                       : (v === null ? "-" : String(v));
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    document.querySelectorAll("#board th[data-key]").forEach(function (th) {
      var k = th.getAttribute("data-key");
      if (k === sortKey) th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
      else th.removeAttribute("aria-sort");
    });
    document.querySelectorAll("figure.chart [data-quarter]").forEach(function (el) {
      el.classList.toggle("out", win.indexOf(el.getAttribute("data-quarter")) < 0);
    });
    document.getElementById("ci-note").textContent = exact ? "" :
      "Intervals need the claims: run `veritas leaderboard --from " + win[0] + " --to " + win[win.length - 1] +
      (after.checked ? " --after-cutoff" : "") + " --html FILE` for this window's.";
    document.getElementById("window-label").textContent = win[0] + " to " + win[win.length - 1] +
      (after.checked ? ", quarters after each system's cut-off only" : ", every quarter");
    var h = "from=" + win[0] + "&to=" + win[win.length - 1] + "&after=" + (after.checked ? 1 : 0) + "&sort=" + sortKey +
            (sortDir < 0 ? "&dir=desc" : "");
    if (location.hash.slice(1) !== h) {
      try { history.replaceState(null, "", "#" + h); } catch (err) { /* some browsers refuse it on file: pages */ }
    }
  }
  document.querySelectorAll("#board th[data-key]").forEach(function (th) {
    th.addEventListener("click", function () {
      var k = th.getAttribute("data-key");
      sortDir = k === sortKey ? -sortDir : 1; sortKey = k; render();
    });
  });
  form.addEventListener("change", render);
  window.addEventListener("hashchange", function () { readHash(); render(); });
  readHash();
  render();
})();
"""


def render_page(board: dict, title: str = "veritas leaderboard") -> str:
    """The whole page for a board from ``leaderboard.compute_board``."""
    w = board["window"]
    quarters = board["all_quarters"]
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    options = lambda chosen: "".join(  # noqa: E731
        f'<option value="{e(q)}"{" selected" if q == chosen else ""}>{e(q)}</option>' for q in quarters)
    label = (f"{w['from']} to {w['to']}, " + ("quarters after each system's cut-off only" if w["after_cutoff"]
                                                else "every quarter"))
    # inside <script> no "<", ">" or "&" may appear raw: JSON's \u escapes keep names from closing the element
    data = json.dumps(page_data(board)).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    y_max = max([v["mse"] for s in board["systems"] for v in s["quarters"].values() if v["mse"] is not None] + [0.25])
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        f'<p class="meta">Integrity scores of {len(board["systems"])} systems on {len(quarters)} released quarters. '
        "A quarter is <b>clean</b> for a system when it starts after the system's knowledge cut-off. Ranked by "
        f"integrity MSE (lower is better); intervals: {int(w['confidence'] * 100)}% percentile bootstrap over claims, "
        f"{w['resamples']} resamples. Every claim of the window counts: a claim a system left without a prediction "
        "is scored 0 (don't know); coverage is the share it answered, and a partial submission is marked. "
        "<b>input</b> is the file a system was given: <code>inputs_only</code> (<code>veritas export "
        "--inputs-only</code>: the claims, their media, dates and languages) or <code>full_release</code> (the "
        "VeriTaS-format release, whose <code>review_url</code> names the fact-check that states the verdict). "
        f"Generated {e(generated)}.</p>",
        '<form id="window"><label>from <select name="from">' + options(w["from"]) + "</select></label>"
        '<label>to <select name="to">' + options(w["to"]) + "</select></label>"
        f'<label><input type="checkbox" name="after"{" checked" if w["after_cutoff"] else ""}> '
        "only quarters after each system's cut-off</label></form>",
        f'<h2>Ranking: <span id="window-label">{e(label)}</span></h2>',
        board_table_html(board), '<p class="note" id="ci-note"></p>', rejected_html(board),
        "<h2>Integrity MSE by quarter</h2>",
        '<p class="note">One panel per system on a shared scale; the dashed red line is its knowledge cut-off.</p>',
        '<div class="charts">' + "".join(mse_chart(board, s, i, y_max) for i, s in enumerate(board["systems"])) + "</div>",
        "<h2>By modality</h2>", axis_table_html(board, "modality"),
        "<h2>By language</h2>", axis_table_html(board, "language"),
        "<h2>Every quarter</h2>", quarter_table_html(board),
        "<h2>Human audit</h2>",
        '<p class="note">Per quarter, the release version scored and, once people have audited it (a secret sample '
        "judged blind, published beside the release), how far they agree with its labels: the 3-bin agreement and "
        "MSE of the annotators' mean against the release, Krippendorff's alpha among the annotators, and the "
        "audit's gate.</p>", audit_table_html(board),
        f'<script type="application/json" id="board-data">{data}</script>',
        f"<script>{SCRIPT}</script></body></html>",
    ]
    return "".join(parts)
