"""Instruction-like text in a claim, its title or its article (a prompt injection), and whether the config drops
the claims that carry it (``injection_policy``)."""

import re

from dagster_project.stage_settings import ClaimRules

# Phrases that address the model instead of the reader; articles quoting them are flagged, never obeyed.
_INJECTION = re.compile(
    r"(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+)?(?:of\s+)?"
    r"(?:your|previous|prior|above|earlier|the\s+(?:above|previous|prior|system))"
    r"(?:\s+\w+)?\s+(?:instructions|rules|prompts?|guidelines|directives)"
    r"|\b(?:rate|score|label|mark|classify)\s+(?:this|it|the\s+claim|this\s+claim)\s+(?:as\s+)?"
    r"(?:true|false|intact|compromised|positive|negative|accurate|correct)\b"
    r"|\byou\s+are\s+now\s+(?:a|an|the)\b|\bnew\s+instructions\s*:|\bsystem\s+prompt\b|<\|im_start\|>"
    r"|ignoriere\s+(?:alle\s+)?(?:deine|die|vorherigen)\s+(?:\w+\s+)?anweisungen"
    r"|ignore[sz]?\s+(?:toutes\s+)?(?:tes|vos|les)\s+(?:\w+\s+)?instructions"
    r"|ignora\s+(?:todas\s+)?(?:tus|las)\s+(?:\w+\s+)?instrucciones",
    re.IGNORECASE,
)


def injection_flags(*texts: str) -> list[str]:
    """The instruction-like phrases found in untrusted text (claims, articles), lower-cased and de-duplicated."""
    found = {" ".join(m.group(0).lower().split()) for text in texts if text for m in _INJECTION.finditer(text)}
    return sorted(found)


def drops_flagged(claim_rules: ClaimRules) -> bool:
    """Whether claims flagged for injection are left out (``injection_policy: drop``) or kept and recorded."""
    if claim_rules.injection_policy not in ("keep", "drop"):
        raise ValueError(f"stages.injection_policy must be keep or drop, not {claim_rules.injection_policy!r}")
    return claim_rules.injection_policy == "drop"
