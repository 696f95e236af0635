"""Stage 1's rules for a review URL: ``url_problem`` normalises one or names why it is refused (not http, no
host, credentials, a port that is no port, a backslash or a look-alike host), and ``without_credentials`` takes
the ``user:password@`` out of every URL in a record before the quarantine keeps it: a credential is never stored.

The look-alike test is our own, in a few lines: the confusables tables (Unicode TR 39) ship with no library this
project installs, and a host only needs the letters that pass for Latin ones in Cyrillic and Greek.
"""

import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit

from dagster_project.core.config_file import hide_userinfo

_SPACE = re.compile(r"\s")  # the same characters as str.isspace, found in C
# Cyrillic and Greek letters drawn like Latin ones (lower and upper case): a host label of only these, or one that
# mixes them with Latin letters, reads as a Latin name that it is not
_LATIN_LOOKING = set("аеорсухіјѕԁԛԝһӏԌԍвкмнтАВЕКМНОРСТХІЈЅοαινρτυκχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ")


def _script(char: str) -> str:
    """A letter's script, as the first word of its Unicode name (LATIN, CYRILLIC, GREEK, ARABIC...)."""
    return unicodedata.name(char, "?").split(" ", 1)[0]


def lookalike_host(host: str) -> bool:
    """Whether a host has a label that passes for Latin letters it is not made of: Latin mixed with another script,
    or only Cyrillic and Greek letters that look Latin (``fасtly.in`` with Cyrillic а and с, ``раураl.com``)."""
    for label in host.split("."):
        if label.isascii():
            continue
        letters = [c for c in label if c.isalpha()]
        scripts = {_script(c) for c in letters}
        if len(scripts) > 1 or (letters and all(c in _LATIN_LOOKING for c in letters)):
            return True
    return False


def url_problem(url: Any) -> tuple[str, str]:
    """(normalised url, "") or ("", reason) for a review URL."""
    if url is None or url == "":
        return "", "missing_review_url"
    if not isinstance(url, str):
        return "", "review_url_not_a_string"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "", "malformed_review_url"
    if parts.scheme.lower() not in ("http", "https"):
        return "", "non_http_review_url"
    if "@" in parts.netloc:  # user:password@, or a host that hides behind one (factly.in\@evil.example)
        return "", "review_url_with_credentials"
    if not parts.hostname or _SPACE.search(url) or "\\" in parts.netloc:
        return "", "malformed_review_url"
    try:
        parts.port  # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError:
        return "", "invalid_review_url_port"
    if lookalike_host(parts.hostname):
        return "", "lookalike_review_host"
    return parts.scheme.lower() + url[len(parts.scheme):], ""


def without_credentials(value: Any) -> Any:
    """A parsed record with ``user:password@`` taken out of every http(s) URL in it, at any depth."""
    if isinstance(value, str):
        return hide_userinfo(value, "[credentials removed]")
    if isinstance(value, dict):
        return type(value)((k, without_credentials(v)) for k, v in value.items())
    if isinstance(value, list):
        return [without_credentials(v) for v in value]
    return value
