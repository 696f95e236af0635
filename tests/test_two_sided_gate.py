"""Issue 49, the two-sided gate: a figure further from chance than noise allows, above OR below, blocks publication
(below chance, a classifier with its sign flipped recovers the signal), and the adversarial filter aims at chance
(the released rewrites' scores match natural claims') instead of keeping the least detectable.

The planted case: a quarter of real AVeriTeC claims, most of the false-rated ones rewritten by a minimal edit (one
word swapped for a word of other real claims), 30% of the rewrites failed (those claims stay natural). A filter that
keeps only the least detectable rewrites releases ones that resemble the very natural claims beside them, and a
classifier turns round on them: the rectified style falls below chance by more than the noise. The matched filter,
on the same pool, passes."""

import random

from assets.release.numbering import ordered_release
from assets.selection import release_selection as rs
from assets.selection.adversarial import detectability
from assets.selection.shortcut_audit import audit_problems, pool_rows, release_rows, shortcut_audit, text_problems
from dagster_project.stage_settings import ClaimRules, ReleaseSettings
from tests.test_adversarial import REAL
from tests.test_release import ORDER_KEY, claim

SIZE = 200


def planted(seed=3, n_intact=10, n_false=440):
    """Natural Intact claims, false-rated claims with a minimal-edit rewrite each (70% of them; the others failed)."""
    rng = random.Random(seed)
    out = [claim(f"n{i}-o", 0.7778, REAL[i]) for i in range(n_intact)]
    vocabulary = " ".join(REAL[n_intact + n_false:]).split()
    for i in range(n_false):
        text = REAL[n_intact + i]
        if rng.random() >= 0.7:
            out.append(claim(f"f{i}-o", -0.7778, text))
            continue
        words = text.split()
        j = rng.randrange(len(words))
        edit = " ".join(words[:j] + [rng.choice(vocabulary)] + words[j + 1:])
        out.append(claim(f"f{i}-o", -0.7778, text, variant_of=f"f{i}-r"))
        out.append(claim(f"f{i}-r", 0.7778, edit, variant="rectified", variant_of=f"f{i}-o")
                   .model_copy(update={"original_text": text}))  # as stage 7 copies its original's fields
    return out


def audit(pool, chosen):
    ordered, release, _, _ = ordered_release(chosen, ORDER_KEY)
    return shortcut_audit(release_rows(release, [c.variant for c in ordered], ordered), pool_rows(pool), seed=2)


def least_detectable(pool):
    """The filter before issue 49 in what matters here: every natural claim trains the classifier, and the release
    keeps the least detectable rewrites, as few as the selection uses (plus its spare), taken least detectable
    first."""
    rules = ReleaseSettings(release_size=SIZE)
    args = (rules.release_size, rules.media_share, rules.text_duplicate_similarity, -1)
    first, _ = rs.select_release(pool, *args, key=ORDER_KEY)
    natural, usable, needed = rs.filter_inputs(pool, first)
    scores, _ = detectability(sorted(natural, key=lambda c: c.claim_id), sorted(usable, key=lambda c: c.claim_id),
                              seed=rs.filter_seed(ORDER_KEY), corpus=[c for c in pool if c.variant == "original"])
    least = sorted((c.claim_id for c in usable), key=lambda i: scores[i])
    out = set(least[rs.filter_spare(needed):])
    chosen, _ = rs.select_release([c for c in pool if c.claim_id not in out], *args, key=ORDER_KEY,
                                  order={i: k for k, i in enumerate(least)})
    return chosen


def test_keeping_the_least_detectable_rewrites_fails_the_two_sided_gate_and_the_matched_filter_passes():
    pool = planted()
    old = audit(pool, least_detectable(pool))
    style = old["rectified_style"]
    # a one-sided gate let it through: the figure is below chance, not above it
    assert not style["above_chance"] and style["below_chance"] and style["off_chance"], style
    assert any(p.startswith("the text tells rewritten claims from natural ones") and "sign flipped" in p
               for p in old["text_problems"]), old["text_problems"]

    chosen, report, adversarial = rs.select_undetectable(pool, ReleaseSettings(release_size=SIZE), ClaimRules(),
                                                         ORDER_KEY)
    assert report["feasible_size"] == SIZE and adversarial["reference"] == report["selected"]["compromised"]
    new = audit(pool, chosen)
    assert not new["rectified_style"]["off_chance"], new["rectified_style"]
    assert "auc" in new["filter_transfer"] and not new["filter_transfer"]["off_chance"], new["filter_transfer"]
    assert new["text_problems"] == [] and new["problems"] == [], (new["text_problems"], new["problems"])


def _figure(accuracy, null_mean=0.50, null_std=0.01, **extra):
    out = {"accuracy": accuracy, "null_mean": null_mean, "null_std": null_std, "margin": max(0.02, 3.5 * null_std),
           "majority_accuracy": 0.5, "macro_f1": accuracy, **extra}
    out["lift"] = round(accuracy - null_mean, 4)
    out["above_chance"] = out["lift"] > out["margin"]
    out["below_chance"] = out["lift"] < -out["margin"]
    out["off_chance"] = out["above_chance"] or out["below_chance"]
    return out


def test_an_id_or_position_figure_below_chance_blocks():
    below = {"features": {"claim_id": _figure(0.40), "position": _figure(0.51)}}
    problems = audit_problems(below)
    assert problems == ["claim_id predicts the label: accuracy 0.40 < chance 0.50 - 0.04"], problems
    assert audit_problems({"features": {"claim_id": _figure(0.48)}}) == []  # within the noise


def test_a_pool_feature_the_selection_turned_below_chance_blocks():
    f = _figure(0.40, group="pipeline", selection={"added": False, "excess_lift": -0.1, "margin": 0.05},
                pool=_figure(0.5))
    problems = audit_problems({"features": {"n_media": f}})
    assert problems and problems[0].startswith("the selection made n_media predict the label below chance"), problems


def test_the_rectified_style_and_the_claim_only_figure_block_below_chance():
    style = _figure(0.40, rectified=50, original=50)
    assert text_problems({"rectified_style": style})[0].startswith(
        "the text tells rewritten claims from natural ones: rectified-style accuracy 0.40")
    assert text_problems({"rectified_style": _figure(0.48)}) == []
    text = _figure(0.30, null_mean=0.45, null_std=0.02)
    found = text_problems({"text": text, "natural_text": {"skipped": "none"}})
    assert len(found) == 1 and found[0].startswith("the claim text predicts the label below chance"), found


def test_a_channel_or_the_transfer_figure_off_chance_blocks_either_way():
    for accuracy in (0.40, 0.60):
        report = {"channels": {"gating": {"fluency": _figure(accuracy)}, "label": {}}}
        assert text_problems(report)[0].startswith("the fluency channel tells rewritten claims"), accuracy
    transfer = _figure(0.30, null_mean=0.5, null_std=0.04)
    transfer["auc"] = transfer.pop("accuracy")
    found = text_problems({"filter_transfer": transfer})
    assert len(found) == 1 and "finds the released ones less like rewrites" in found[0], found
