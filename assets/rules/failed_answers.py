"""Failed model answers of stage 6 (refusals, timeouts, invalid answers): their kinds, and their counts as the stage
metadata, ``veritas yields`` and the release card show them. No Dagster or model import at the top: the card and the
CLI read it. The release puts ``stage_failed_answers`` into its manifest as ``failed_answers``."""

from typing import NamedTuple

FAILURE_KINDS = ("refusal", "timeout", "invalid_output", "transport")


class FailedAnswer(NamedTuple):
    """One member's question that got no valid rating: the properties it would have rated, and why (failure_kind)."""

    member: str
    properties: tuple[str, ...]
    medium_index: int
    kind: str
    error: str


def failure_kind(error: str | None) -> str:
    """refusal (the model declined), timeout, invalid_output (no valid answer after the re-ask), or transport (a
    connection or server error the Router's retries did not get past), from an answer's ``error``."""
    head, _, rest = (error or "").partition(":")
    if head == "refusal":
        return "refusal"
    if head == "transport":
        return "timeout" if "timeout" in rest.split(":", 1)[0].casefold() else "transport"
    return "invalid_output"


def failed_answers_report(meta: dict) -> dict:
    """Stage 6's ``failed_answers/*`` and ``refusals/*`` metadata as one record (the manifest's ``failed_answers``,
    which the card reads): kinds, member -> property -> kind -> count, the claims lost and kept, and the refusal
    losses by media kind and category."""
    by_member: dict = {}
    for key, n in meta.items():
        parts = key.split("/")
        if parts[0] == "failed_answers" and len(parts) == 4 and parts[1] in FAILURE_KINDS:
            by_member.setdefault(parts[2], {}).setdefault(parts[3], {})[parts[1]] = int(n)
    return {
        "kinds": {k: int(meta.get(f"failed_answers/{k}", 0)) for k in FAILURE_KINDS},
        "by_member": by_member,
        "claims_lost": int(meta.get("failed_answers/claims_lost", 0)),
        "claims_kept": int(meta.get("failed_answers/claims_kept", 0)),
        "refusal_losses": {key.removeprefix("refusals/lost_share/"): {
            "lost": int(meta.get(key.replace("/lost_share/", "/lost/"), 0)), "share": meta[key]}
            for key in sorted(meta) if key.startswith("refusals/lost_share/")},
    }


def failed_answers_lines(report: dict) -> list[str]:
    """A few lines for terminals (``veritas yields``) and the card: failed answers by kind and member, the claims
    lost to them, and where refusals cost claims (media kind / category: lost, share of those attempted)."""
    if not report or not any(report.get("kinds", {}).values()):
        return []
    kinds = ", ".join(f"{k} {n}" for k, n in report["kinds"].items() if n)
    lines = [f"failed answers (stage 6): {kinds}; {report['claims_lost']} claims lost, {report['claims_kept']} kept "
             "with the other members' ratings"]
    for member, props in sorted(report["by_member"].items()):
        lines.append(f"  {member}: " + "; ".join(
            f"{prop} " + ", ".join(f"{k} {n}" for k, n in sorted(by_kind.items())) for prop, by_kind in sorted(props.items())))
    losses = [f"{group} {r['lost']} ({r['share']:.1%})" for group, r in report["refusal_losses"].items() if r["lost"]]
    if losses:
        lines.append("  claims lost to refusals (media kind/category, share of those scored): " + ", ".join(losses))
    return lines


def failed_answers_markdown(report: dict, heading: str = "##") -> str:
    """The card's section on failed answers, '' when there were none."""
    if not report or not any(report.get("kinds", {}).values()):
        return ""
    rows = "\n".join(f"| {member} | {prop} | " + " | ".join(str(by_kind.get(k, 0)) for k in FAILURE_KINDS) + " |"
                     for member, props in sorted(report["by_member"].items()) for prop, by_kind in sorted(props.items()))
    losses = "\n".join(f"| {group.replace('/', ' | ')} | {r['lost']} | {r['share']:.1%} |"
                       for group, r in report["refusal_losses"].items())
    return (
        f"{heading} Failed model answers\n\nStage 6 asked each ensemble member about each property; these answers "
        f"failed. {report['claims_lost']} claims were lost to them, and {report['claims_kept']} kept with the other "
        "members' ratings (a refused property needs one rating fewer per refusal, down to "
        "`stages.refusal_min_ratings`).\n\n| member | property | " + " | ".join(FAILURE_KINDS) + " |\n|---|---|"
        + "---|" * len(FAILURE_KINDS) + f"\n{rows}\n\nClaims lost to refusals, by media kind and by the category "
        "the fact-checker's rating predicts, as a share of the claims scored in that group: what this release "
        f"under-represents.\n\n| media | category | lost | share |\n|---|---|---|---|\n{losses}")


def stage_failed_answers(instance, quarter: str) -> dict:
    """The failed answers of a quarter's latest stage-6 run (its metadata's ``failed_answers_json``) as the manifest's
    ``failed_answers`` that the card reads; {} before stage 6 ran or when it recorded none."""
    from dagster_project.core.instance_records import latest_json

    return latest_json(instance, "scored_claims", quarter, "failed_answers_json")
