"""The audit as people read it: a card section (``<version>.audit.md`` beside the release, in Markdown) and the
leaderboard's one line per quarter. Plain functions over the published addendum."""

#: The addendum's name beside its release version, ``<version>.audit.json`` (here, so that the readers that do not
#: load Dagster, the export's card, find it without importing the asset).
ADDENDUM_SUFFIX = ".audit.json"


def _pct(value) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def _num(value, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def leaderboard_line(addendum: dict) -> str:
    """"people agree with the labels: 3-bin 93%, MSE 0.067, 80 claims" (and the gate, when below it)."""
    o = addendum["overall"]
    line = f"people agree with the labels: 3-bin {_pct(o['agreement3'])}, MSE {_num(o['mse'])}, {o['n']} claims"
    return line if addendum["passed"] else line + f" (below the gate {_pct(addendum['min_agreement'])})"


def card_line(addendum: dict) -> str:
    """The line a release's card gives its audit: the leaderboard's, Krippendorff's alpha and the gate's result."""
    o = addendum["overall"]
    gate = "passed" if addendum["passed"] else "failed, look at the disputed claims"
    return (f"{leaderboard_line(addendum)}; Krippendorff's alpha {_num(o['alpha_annotators'])} among the annotators, "
            f"{_num(o['alpha_with_ensemble'])} with the ensemble; the gate (3-bin agreement at least "
            f"{_pct(addendum['min_agreement'])}) {gate}")


def audit_card(addendum: dict) -> str:
    """The audit's card: who judged what, the agreement per property and by media kind and language, the errata."""
    o = addendum["overall"]
    release = addendum["release"]
    lines = [
        f"# Human audit of release {addendum['quarter']} ({release['version']})", "",
        f"{leaderboard_line(addendum)}." + ("" if addendum["passed"] else
                                            " **Below the gate: look at the disputed claims below.**"), "",
        f"{addendum['claims']} claims of the release's {addendum['sample']['drawn_from']}, drawn secretly (stratified by "
        f"label, media kind, language, rectified or natural), were judged blind by {addendum['annotators']} "
        f"annotators ({addendum['annotations']} complete annotations, at least {addendum['min_annotators']} per claim), "
        "from the claim, its media and the fact-check article. "
        f"The 3-bin agreement's 95% interval is {o['agreement3_ci']}; Krippendorff's alpha (interval) is "
        f"{_num(o['alpha_annotators'])} among the annotators and {_num(o['alpha_with_ensemble'])} with the ensemble "
        "as one more rater.", "",
        f"This addendum does not change the release: it names it by content id {release['content_id']} and manifest "
        f"SHA-256 {release['manifest_sha256']}.", "",
        "| property | claims | MSE | 3-bin agreement | alpha (annotators) | alpha (with the ensemble) |",
        "|---|---|---|---|---|---|",
    ]
    for prop, m in addendum["properties"].items():
        lines.append(f"| {prop} | {m['n']} | {_num(m['mse'])} | {_pct(m['agreement3'])} | "
                     f"{_num(m['alpha_annotators'])} | {_num(m['alpha_with_ensemble'])} |")
    for group, title in (("by_media_kind", "media kind"), ("by_language", "language")):
        lines += ["", f"| {title} | claims | integrity MSE | 3-bin agreement |", "|---|---|---|---|"]
        for value, props in addendum[group].items():
            m = props["integrity"]
            lines.append(f"| {value} | {m['n']} | {_num(m['mse'])} | {_pct(m['agreement3'])} |")
    lines += ["", f"Disputed claims (the annotators' mean in another 3-bin label): {len(addendum['disputed'])}; "
              f"errata (every annotator gives that other label): "
              f"{', '.join(map(str, addendum['errata'])) or 'none'}."]
    return "\n".join(lines) + "\n"
