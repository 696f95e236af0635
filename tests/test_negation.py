"""Negation and hedge words per language (assets/rules/negation.py), the guard of the near-duplicate measures."""

import pytest

from assets.rules.negation import HEDGE, NEGATION, hedges, negations
from prompts import label_scheme


def test_every_verdict_language_has_both_lists():
    for language in label_scheme()["verdict_words"]:
        assert NEGATION.get(language) and HEDGE.get(language), language


@pytest.mark.parametrize("text, language, found", [
    ("Video shows Muslims celebrating in London", "en", set()),
    ("Video does not show Muslims celebrating in London", "en", {"not"}),
    ("Biden didn\u2019t sign the order", "en", {"not"}),  # one form for each negation (issue 48): n't, cannot: not
    ("Das Foto zeigt keine Demonstration", "de-DE", {"keine"}),
    ("Ce n'est pas une photo de Paris", "fr", {"ne", "pas"}),
    ("यह निर्णय सही है", "hi", set()),  # न inside a word with its vowel sign is no negation
    ("यह वीडियो भारत का नहीं है", "hi", {"नहीं"}),
    ("Det er ikke sant", "nb", {"ikke"}),  # babel's Bokmål code reads Norwegian's list
    ("Hindi totoo ang balita", "fil", {"hindi"}),
    ("ภาพนี้ไม่ใช่ของจริง", "th", {"ไม่", "ไม่ใช่"}),
    ("这不是真的", "zh-Hans", {"不"}),
    ("不过他说了", "zh", set()),  # 不过 "but" holds 不 without negating
    ("本当かもしれない", "ja", set()),
    ("ليس صحيحا", "ar", {"ليس"}),
    ("Nothing happened", "xx", {"nothing"}),  # a language without lists reads English's
])
def test_negations(text, language, found):
    assert negations(text, language) == found


@pytest.mark.parametrize("text, language, found", [
    ("He may have lied about the vaccine", "en", {"may"}),
    ("He lied about the vaccine", "en", set()),
    ("本当かもしれない", "ja", {"かもしれない"}),
    ("Il pourrait s'agir d'un montage", "fr", {"pourrait"}),
])
def test_hedges(text, language, found):
    assert hedges(text, language) == found
