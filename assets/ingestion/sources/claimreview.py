"""schema.org ClaimReview objects to review rows, the mapping every reader shares: ``Triple`` (the
``(row | None, reason, raw)`` shape each source yields), ``claimreview_to_row`` (a feed's or a page's ClaimReview
to a row), ``normalize_claim_text`` (the claim text of the review key), ``language_code`` and the small field
readers (``_text``, ``_language``, ``_required``) that the ``claims:search`` reader uses too.
"""

import re
import unicodedata
from functools import lru_cache
from typing import Any

from dagster_project.core.config_file import hide_userinfo

Triple = tuple[dict | None, str, Any]


# ---- ClaimReview objects to rows ----------------------------------------------------------------------------------


def normalize_claim_text(text: str) -> str:
    """The claim text used in the review key: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).split()).casefold()  # split() drops the same spaces as \s


def _text(value: Any) -> str:
    if type(value) is str:  # the usual case first: this runs ten times per record
        return value.strip()
    if value is None:
        return ""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value).strip()
    if isinstance(value, dict):
        return _text(value.get("name") or value.get("alternateName") or value.get("@value"))
    if isinstance(value, list) and value:
        return _text(value[0])
    return ""


def _language(value: Any) -> str:
    """``inLanguage`` as a code, a name, or a Language object; the code is preferred, a name becomes its code."""
    if isinstance(value, dict):
        code = _text(value.get("alternateName"))
        return language_code(code or _text(value.get("name")))
    return language_code(_text(value))


@lru_cache(maxsize=1)
def _language_names() -> dict[str, str]:
    """English language names -> ISO codes (babel's CLDR data), e.g. 'spanish' -> 'es'."""
    from babel import Locale

    names = {}
    for code, name in Locale("en").languages.items():
        if "_" not in code:
            names.setdefault(name.casefold(), code)
    return names


@lru_cache(maxsize=4096)
def language_code(value: str) -> str:
    """A language as written in a feed ('en', 'pt-BR', 'Spanish') -> a lower-case code; unknown names kept."""
    text = value.strip().lower()
    if not text or re.fullmatch(r"[a-z]{2,3}([-_][a-z0-9]{2,8})*", text):
        return text.replace("_", "-")
    return _language_names().get(text.casefold(), text)




def _urls(value: Any) -> list[str]:
    items = value if isinstance(value, list) else [value]
    out = []
    for item in items:
        url = item.get("url") if isinstance(item, dict) else item
        if isinstance(url, str) and url.strip().startswith(("http://", "https://")):
            if "@" not in url.strip().split("/", 3)[2]:  # a URL with user:password@ is never kept (nor stored)
                out.append(url.strip())
    return out


def _required(value: Any) -> Any:
    """A required text field: stripped if it is a string, else kept as is for clean_row to reject by type."""
    return value.strip() if isinstance(value, str) else value


_NO_FIELDS: dict = {}  # read-only stand-in for an absent or malformed sub-object


def _one_object(value: Any, field: str) -> dict:
    """A sub-object given in another schema.org shape: a list of one object is that object; a list of several
    different ones is ambiguous (which claim's date, which rating?) and raises ``ambiguous_<field>``."""
    if not isinstance(value, list):
        return _NO_FIELDS
    objects = [v for v in value if isinstance(v, dict)]
    if not objects:
        return _NO_FIELDS
    if any(o != objects[0] for o in objects[1:]):
        raise ValueError(f"ambiguous_{field}")
    return objects[0]


def claimreview_to_row(item: dict, source: str) -> dict:
    """One schema.org ClaimReview object (feed or page markup) to a review row; raises ValueError if unusable."""
    if not isinstance(item, dict):
        raise ValueError("not_an_object")
    # this runs once per record of a feed: plain strings are stripped inline, other shapes go through _text
    get = item.get
    reviewed = get("itemReviewed")
    if not isinstance(reviewed, dict):
        reviewed = _one_object(reviewed, "itemReviewed")
    rating = get("reviewRating")
    if not isinstance(rating, dict):
        rating = {"alternateName": rating} if isinstance(rating, str) else _one_object(rating, "reviewRating")
    author = get("author")
    if isinstance(author, list) and author:
        author = author[0]
    if not isinstance(author, dict):
        author = {"name": author}
    appearance, first = reviewed.get("appearance"), reviewed.get("firstAppearance")
    appearances = (_urls(appearance) if appearance is not None else []) + (_urls(first) if first is not None else [])
    if isinstance(reviewed.get("url"), str):
        appearances += _urls(reviewed["url"])
    return {
        "review_url": v.strip() if type(v := get("url")) is str else _required(v),
        "claim_text": v.strip() if type(v := get("claimReviewed")) is str else _required(v),
        "claim_date": reviewed.get("datePublished"),
        "review_date": get("datePublished"),
        "publisher_name": v.strip() if type(v := author.get("name")) is str else _text(v),
        "publisher_site": hide_userinfo(v.strip() if type(v := author.get("url")) is str else _text(v)),
        "rating_text": v.strip() if type(v := rating.get("alternateName")) is str else _text(v),
        "rating_value": v.strip() if type(v := rating.get("ratingValue")) is str else _text(v),
        "rating_best": v.strip() if type(v := rating.get("bestRating")) is str else _text(v),
        "rating_worst": v.strip() if type(v := rating.get("worstRating")) is str else _text(v),
        "language": language_code(v.strip()) if type(v := get("inLanguage")) is str else _language(v),
        "claim_author": v.strip() if type(v := reviewed.get("author")) is str else _text(v),
        "title": v.strip() if type(v := get("name") or get("headline")) is str else _text(v),
        "appearance_urls": list(dict.fromkeys(appearances)) if len(appearances) > 1 else appearances,
        "sources": [source],
    }
