"""The longitudinal cut-off view over every released quarter, as VeriTaS's longitudinal experiment reads it: each
system's integrity MSE by quarter, its quarters before its knowledge cut-off against those after, and on the after
side the claims an earlier release already held (marked recurring: the model may have seen them) left out and
counted.

Plain functions over the leaderboard's board (``leaderboard.compute_board``): the per-quarter figures are the
board's own (``quarters[q]``: every claim, missing predictions as 0; ``sums_fresh``: the same without the recurring
claims), so the view and the ranking can never disagree. Written next to the leaderboard as a table (CSV and text),
a JSON and a PNG plot. Where a quarter's release has a human audit (``board["audit_figures"]``), the view adds how far
people agree with its labels: a row per audited quarter, and a line on the plot's own axis.
"""

import csv
import io
from pathlib import Path

from assets.evaluation.evaluation import cutoff_position, quarter_number, save_figure

RELATION = {"clean": "after", "before": "before", "unknown": "unknown"}  # the board's names -> the paper's
COLUMNS = ("system", "knowledge_cutoff", "quarter", "relation", "claims", "recurring", "mse_all", "fresh", "mse_fresh")
AUDIT_COLOUR = "#d4a017"  # the audit's line: a colour no system's series takes (matplotlib's default cycle)


def _mse(sums: dict) -> float | None:
    return sums["se"] / sums["n"] if sums.get("n") else None


def longitudinal_rows(board: dict) -> list[dict]:
    """One row per system and quarter: its relation to the system's cut-off, the claims, how many the release marks
    recurring, the MSE over all of them and over the fresh ones (recurring left out). No submission: no MSE."""
    rows = []
    for s in board["systems"]:
        for q in board["all_quarters"]:
            v = s["quarters"][q]
            answered = v["sums"]["answered"] > 0
            rows.append({"system": s["name"], "knowledge_cutoff": s["knowledge_cutoff"], "quarter": q,
                         "relation": RELATION[v["relation"]], "claims": v["claims"], "recurring": v["recurring"],
                         "mse_all": _mse(v["sums"]) if answered else None, "fresh": v["sums_fresh"]["n"],
                         "mse_fresh": _mse(v["sums_fresh"]) if answered else None})
    return rows


def longitudinal_summary(board: dict) -> list[dict]:
    """Per system: the pooled MSE before its cut-off (every claim) and after it (the fresh claims, with the
    recurring ones counted in ``recurring_left_out``), from the board's "before" and "clean" windows."""
    out = []
    for s in board["systems"]:
        before, after = s["windows"]["before"], s["windows"]["clean"]
        out.append({"system": s["name"], "knowledge_cutoff": s["knowledge_cutoff"], "rank": s["rank"],
                    "before_quarters": len(before["quarters"]), "before_n": before["n"], "before_mse": before["mse"],
                    "after_quarters": len(after["quarters"]), "after_n": after["n"], "after_mse": after["mse"],
                    "recurring_left_out": after["recurring_left_out"]})
    return out


def audit_rows(board: dict) -> list[dict]:
    """One row per quarter whose scored release has a human audit: the version, the annotators' 3-bin agreement with
    its labels, the MSE, the claims judged and whether the audit's gate passed."""
    figures = board.get("audit_figures") or {}
    return [{"quarter": q, "release_version": figures[q]["release_version"], "agreement3": figures[q]["agreement3"],
             "mse": figures[q]["mse"], "claims": figures[q]["n"], "passed": figures[q]["passed"]}
            for q in board["all_quarters"] if q in figures]


def longitudinal_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows:
        writer.writerow({k: "" if r[k] is None else (f"{r[k]:.4f}" if isinstance(r[k], float) else r[k])
                         for k in COLUMNS})
    return buf.getvalue()


def longitudinal_text(board: dict) -> str:
    """The summary per system, then one line per quarter: MSE before and after each system's cut-off."""
    def fmt(v):
        return "-" if v is None else f"{v:.4f}"

    summary = longitudinal_summary(board)
    lines = [f"{'system':28} {'cut-off':10} {'before n':>8} {'MSE':>7} {'after n':>8} {'MSE':>7} {'recurring out':>13}"]
    for s in summary:
        lines.append(f"{s['system'][:28]:28} {s['knowledge_cutoff']:10} {s['before_n']:>8} {fmt(s['before_mse']):>7} "
                     f"{s['after_n']:>8} {fmt(s['after_mse']):>7} {s['recurring_left_out']:>13}")
    names = [s["name"] for s in board["systems"]]
    rows = {(r["system"], r["quarter"]): r for r in longitudinal_rows(board)}
    lines += ["", "MSE on the fresh claims by quarter (b: before the system's cut-off, a: after; recurring: the "
              "claims left out)", f"{'quarter':8} {'claims':>6} {'recurring':>9} "
              + " ".join(f"{n[:16]:>18}" for n in names)]
    for q in board["all_quarters"]:
        first = rows[(names[0], q)] if names else {"claims": 0, "recurring": 0}
        cells = [f"{fmt(rows[(n, q)]['mse_fresh'])} {rows[(n, q)]['relation'][0]}" for n in names]
        lines.append(f"{q:8} {first['claims']:>6} {first['recurring']:>9} " + " ".join(f"{c:>18}" for c in cells))
    audited = audit_rows(board)
    if audited:
        lines += ["", "People's agreement with the labels (the human audit of the release scored)",
                  f"{'quarter':8} {'3-bin':>6} {'MSE':>7} {'claims':>6}  gate"]
        lines += [f"{r['quarter']:8} {fmt(r['agreement3']):>6} {fmt(r['mse']):>7} {r['claims']:>6}  "
                  f"{'passed' if r['passed'] else 'below'}" for r in audited]
    return "\n".join(lines) + "\n"


def plot_longitudinal(board: dict, path: Path) -> Path:
    """Each system's MSE on the fresh claims by quarter (solid; on all claims, dashed), its cut-off a dotted line of
    its colour; grey bars below: the claims left out as recurring, per quarter."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    quarters = board["all_quarters"]
    xs = [quarter_number(q) for q in quarters]
    fig, ax = plt.subplots(figsize=(max(7.0, 0.38 * len(quarters) + 2), 4.6), dpi=100)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    rows = longitudinal_rows(board)
    for i, s in enumerate(board["systems"]):
        mine = [r for r in rows if r["system"] == s["name"]]
        colour = colours[i % len(colours)]
        fresh = [(quarter_number(r["quarter"]), r["mse_fresh"]) for r in mine if r["mse_fresh"] is not None]
        every = [(quarter_number(r["quarter"]), r["mse_all"]) for r in mine if r["mse_all"] is not None]
        if fresh:
            ax.plot(*zip(*fresh), marker="o", markersize=3, color=colour, label=f"{s['name']} (recurring left out)")
        if every:
            ax.plot(*zip(*every), linestyle="--", linewidth=0.8, alpha=0.6, color=colour)
        cut = cutoff_position(s["knowledge_cutoff"]) if s["knowledge_cutoff"] != "unknown" else None
        if cut is not None and xs and xs[0] - 1 <= cut <= xs[-1] + 1:
            ax.axvline(cut, color=colour, linestyle=":", linewidth=1.2, label=f"cut-off {s['knowledge_cutoff']}")
    recurring = [board["systems"][0]["quarters"][q]["recurring"] if board["systems"] else 0 for q in quarters]
    if any(recurring):
        twin = ax.twinx()
        twin.bar(xs, recurring, color="grey", alpha=0.25, width=0.6, label="recurring (left out)")
        twin.set_ylabel("claims marked recurring")
        twin.set_ylim(0, max(recurring) * 4)
    audited = [(quarter_number(r["quarter"]), r["agreement3"]) for r in audit_rows(board) if r["agreement3"] is not None]
    if audited:
        people = ax.twinx()
        if any(recurring):  # the recurring bars hold the first right axis: this one sits further out
            people.spines["right"].set_position(("axes", 1.1))
        people.plot(*zip(*audited), marker="s", markersize=5, linewidth=1.5, color=AUDIT_COLOUR,
                    label="people agree with the labels (3-bin, human audit)")
        people.set_ylim(0, 1.05)
        people.set_ylabel("people's 3-bin agreement with the labels", color=AUDIT_COLOUR)
        people.legend(loc="upper right", fontsize=7)
    ax.set_xticks(xs)
    ax.set_xticklabels(quarters, rotation=60, fontsize=7)
    ax.set_ylabel("integrity MSE (scores in [-1, 1])")
    ax.set_ylim(bottom=0)
    ax.set_title("Integrity MSE by quarter, before and after each system's knowledge cut-off")
    ax.legend(loc="upper left", fontsize=7)
    return save_figure(fig, path)
