"""Issue 33, item 2: adversarial filtering of rewritten claims before selection; issue 49: aimed at chance.

Half of the rewrites carry a correction template ("In reality, ..."), half are minimal edits of real claims; the
filter leaves out most templates and keeps rewrites whose scores match the natural claims' (neither the least nor the
most detectable first), and the release's rectified style comes back to chance."""

import gzip
import json
import random
from pathlib import Path

from assets.release.numbering import ordered_release
from assets.selection.adversarial import filter_detectable
from assets.selection.release_selection import select_release
from assets.selection.shortcut_audit import release_rows, shortcut_audit
from tests.test_release import ORDER_KEY, claim

REAL = [c["claim"] for c in json.load(gzip.open(Path(__file__).parent / "fixtures" / "averitec_dev.json.gz"))]
random.Random(0).shuffle(REAL)  # the dev set's order clusters topics: natural and rewritten claims draw alike


def quarter(n_natural=60, n_false=200, template_share=0.5):
    """Natural Intact claims, Compromised ones each with a rewrite: a template over the claim, or a minimal edit (one
    word swapped for a word of another real claim), both made of real AVeriTeC claims."""
    rng = random.Random(3)
    out = [claim(f"n{i}-o", 0.7778, REAL[i]) for i in range(n_natural)]
    vocabulary = " ".join(REAL[300:400]).split()
    for i in range(n_false):
        text = REAL[n_natural + i]
        words = text.split()
        j = rng.randrange(len(words))
        edit = " ".join(words[:j] + [rng.choice(vocabulary)] + words[j + 1:])
        rewrite = f"In reality, {edit}" if i < template_share * n_false else edit
        out.append(claim(f"f{i}-o", -0.7778, text, variant_of=f"f{i}-r"))
        out.append(claim(f"f{i}-r", 0.7778, rewrite, variant="rectified", variant_of=f"f{i}-o"))
    return out


def test_the_filter_leaves_out_the_templates_and_keeps_rewrites_that_score_like_natural_claims():
    """Issue 49 changed what this expects: the filter no longer keeps every minimal edit below a threshold and sorts
    them least detectable first; it keeps variants whose held-out scores match the natural claims' (the minimal edits
    it leaves out are those that score beyond what natural claims reach), in an order with no preference either way."""
    claims = quarter()
    natural = [c for c in claims if c.variant == "original" and c.integrity.label == "intact"]
    variants = [c for c in claims if c.variant == "rectified"]
    order, left_out, report = filter_detectable(natural, variants, seed=1)
    templates = {c.claim_id for c in variants if c.text.startswith("In reality")}
    assert len(left_out & templates) >= 0.6 * len(templates), report
    assert len(left_out - templates) < len(left_out & templates), report  # most of what goes is the templates
    assert set(order) == {c.claim_id for c in variants} and sorted(order.values()) == list(range(len(variants)))
    assert report["kept"] == len(variants) - len(left_out) >= report["matched"] > 0, report
    assert report["kept_auc"] <= 0.55 and report["left_out_auc"] > 0.7, report
    # the kept ones are taken in an order that follows the score bins of natural claims, not the least detectable
    # first (Spearman's rho of place against score was 1 before issue 49)
    assert abs(report["order_vs_score"]) < 0.25, report


def test_selection_after_the_filter_brings_the_rectified_style_to_chance():
    claims = quarter(n_natural=100, n_false=400, template_share=0.8)
    natural = [c for c in claims if c.variant == "original" and c.integrity.label == "intact"]
    variants = [c for c in claims if c.variant == "rectified"]

    def style(pool, order=None):
        chosen, _ = select_release(pool, 500, 0.8, 92, dedupe=False, key=ORDER_KEY, order=order)
        ordered, release, _, _ = ordered_release(chosen, ORDER_KEY)
        return shortcut_audit(release_rows(release, [c.variant for c in ordered]), [], seed=2)["rectified_style"]

    plain = style(claims)
    assert plain["above_chance"], plain  # without the filter the templates tell the rewrites
    order, left_out, _ = filter_detectable(natural, variants, seed=1)
    filtered = style([c for c in claims if c.claim_id not in left_out], order)
    assert not filtered["off_chance"] and filtered["lift"] < plain["lift"] / 2, (plain, filtered)


def test_too_few_natural_claims_to_train_on_is_said_not_guessed():
    claims = quarter(n_natural=3, n_false=20)
    natural = [c for c in claims if c.variant == "original" and c.integrity.label == "intact"]
    scores, left_out, report = filter_detectable(natural, [c for c in claims if c.variant == "rectified"])
    assert scores == {} and left_out == set() and "fewer than 5 natural claims" in report["skipped"]


def test_a_single_rewrite_is_judged_at_chance_not_a_crash():
    """A small quarter (issue 36's 25-quarter world) may hold one rectified claim: it is never held out of the
    classifier's training, so it scores 0.5 and stays; before, its half was empty and the fit had one class."""
    claims = quarter(n_natural=8, n_false=1)
    natural = [c for c in claims if c.variant == "original" and c.integrity.label == "intact"]
    variants = [c for c in claims if c.variant == "rectified"]
    order, left_out, report = filter_detectable(natural, variants, seed=1)
    assert order == {variants[0].claim_id: 0} and left_out == set() and report["rounds"] == 1, report


def test_with_nothing_to_keep_the_filter_can_leave_out_every_rewrite():
    """Stage 7 measures the share the release's filter would leave out with nothing it must keep: rewrites that are
    all templates can all go (the last round once had no rewrite left to train on and crashed)."""
    claims = quarter(n_natural=60, n_false=40, template_share=1.0)
    natural = [c for c in claims if c.variant == "original" and c.integrity.label == "intact"]
    variants = [c for c in claims if c.variant == "rectified"]
    _, left_out, report = filter_detectable(natural, variants, keep_at_least=0, seed=1)
    assert len(left_out) >= 0.9 * len(variants) and report["kept"] == len(variants) - len(left_out), report


def test_with_a_short_release_allowed_the_filter_leaves_out_what_it_tells_apart():
    """A small quarter whose candidates ran out kept every rewrite, and its gate read 0.69 against 0.51 + 0.16 (a
    25-quarter world of 100 reviews each, where short releases are allowed): the filter there may go below what the
    selection uses, and the release comes out smaller instead of blocked."""
    from assets.selection.release_selection import select_undetectable
    from dagster_project.stage_settings import ClaimRules, ReleaseSettings

    claims = quarter(n_natural=60, n_false=200, template_share=0.5)  # half the rewrites templates, none to spare

    def released(allow_short: bool):
        chosen, report, adversarial = select_undetectable(
            claims, ReleaseSettings(release_size=300, allow_short_release=allow_short), ClaimRules(), ORDER_KEY)
        ordered, release, _, _ = ordered_release(chosen, ORDER_KEY)
        audit = shortcut_audit(release_rows(release, [c.variant for c in ordered]), [], seed=2)
        return len(chosen), adversarial, audit["rectified_style"]

    size, adversarial, style = released(False)  # the filter keeps what the selection uses: the templates stay
    assert adversarial["kept"] >= adversarial["needed"] and style["above_chance"], (adversarial, style)
    short, adversarial, style = released(True)
    assert adversarial["kept"] < adversarial["needed"] and adversarial["restored"] == 0, adversarial
    assert short < size and not style["above_chance"], (short, size, style)


def test_template_only_rewriting_is_published_only_with_its_figure_named(tmp_path):
    """With every rewrite a template there is nothing undetectable to prefer: the filter keeps as many as the release
    needs, and publication is blocked with the rectified-style figure and what to change."""
    from assets.release.card import rewrite_markdown
    from assets.release.provenance import rewrite_summary
    from assets.selection.release_selection import select_undetectable
    from dagster_project.stage_settings import ClaimRules, ReleaseSettings

    claims = quarter(n_natural=100, n_false=400, template_share=1.0)
    chosen, report, adversarial = select_undetectable(claims, ReleaseSettings(release_size=400), ClaimRules(),
                                                      ORDER_KEY)
    assert report["feasible_size"] == 400 and adversarial["kept"] >= adversarial["needed"] > 0
    # what it kept filled 398 (near-duplicate rewrites go at the selection): the least detectable it left out came
    # back, as few as fill the release
    assert 0 < adversarial["restored"] < adversarial["left_out"], adversarial
    card = rewrite_markdown({"rectification": rewrite_summary(chosen, adversarial)})
    assert f"left out {adversarial['left_out']} of {adversarial['variants']} rewrites" in card
    assert f"the {adversarial['restored']} nearest of those came back" in card
    ordered, release, _, _ = ordered_release(chosen, ORDER_KEY)
    audit = shortcut_audit(release_rows(release, [c.variant for c in ordered]), [], seed=2)
    assert audit["text_problems"][0].startswith(
        "the text tells rewritten claims from natural ones: rectified-style accuracy")
    assert "stages.rectify_surplus" in audit["text_problems"][0]
