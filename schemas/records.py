"""Every record that crosses a stage boundary. Tables between stages are polars frames of these."""

import re
from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

Property = Literal["authenticity", "contextualization", "veracity", "context_coverage"]
CLAIM_PROPERTIES: tuple[str, ...] = ("veracity", "context_coverage")
MEDIA_PROPERTIES: tuple[str, ...] = ("authenticity", "contextualization")


class Record(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=False)


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """Text with each lone surrogate (a JSON escape such as ``\\ud800``, or a byte that was not UTF-8 as the
    ``surrogateescape`` decoder holds it) written as its ``\\uXXXX`` escape: valid UTF-8, and the input recoverable."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _SURROGATE.search(text) else text


class QuarantineRecord(Record):
    """A row that failed validation or parsing; kept with the reason, never silently dropped. It holds any text it
    is given: lone surrogates are escaped (``escape_surrogates``), so writing the quarantine never fails on them."""

    stage: str
    quarter: str
    reason: str
    source: str = ""
    record: str  # the offending input, as JSON text

    @field_validator("stage", "quarter", "reason", "source", "record", mode="after")
    @classmethod
    def _writable(cls, value: str) -> str:
        return escape_surrogates(value)


class Review(Record):
    """Stage 1: one ClaimReview, keyed by (review URL, normalised claim text)."""

    review_id: str
    review_url: str
    claim_text: str = Field(min_length=1, max_length=5000)
    claim_date: date | None = None
    review_date: date | None = None
    quarter: str
    publisher_name: str = ""
    publisher_site: str = ""
    rating_text: str = ""  # the publisher's own textual rating, kept as is, never mapped to a score
    rating_value: str = ""
    rating_best: str = ""
    rating_worst: str = ""
    language: str = ""
    language_detected: bool = False  # no source named the language: py3langid guessed it from the claim text
    claim_author: str = ""
    title: str = ""
    appearance_urls: list[str] = []
    sources: list[str] = []  # provenance: "feed:<path>#<index>", "api:<path>#<index>", ...

    @field_validator("review_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not v.startswith(("http://", "https://")):
            raise ValueError("review_url is not an http(s) URL")
        return v


class Publisher(Record):
    """A professional fact-checking organisation from the shipped registry."""

    publisher_id: str
    name: str
    aliases: list[str] = []
    domains: list[str] = []
    country: str = ""
    ifcn_status: str = ""  # "active" / "expired" / ""
    efcsn_status: str = ""
    signatory_since: str = ""
    ifcn_date: str = ""  # ISO date of the IFCN status (signed or renewed), from the signatory page
    efcsn_date: str = ""

    @property
    def trusted(self) -> bool:
        return "active" in (self.ifcn_status, self.efcsn_status)


class TrustedReview(Review):
    """Stage 2: a review whose publisher is an active IFCN/EFCSN signatory."""

    publisher_id: str
    publisher_country: str = ""


class ImageRef(Record):
    src: str
    alt: str = ""
    caption: str = ""
    srcset: str = ""  # the page's srcset as written (src is its largest entry)


class LinkContext(Record):
    """The words around one of an article's links: its anchor text and the sentence it sits in (for an embedded
    post, the sentence before the embed)."""

    url: str
    anchor: str = ""
    sentence: str = ""


class Article(Record):
    """Stage 3: the fact-check article behind a review."""

    review_id: str
    review_url: str
    final_url: str
    raw_chars: int
    text: str
    title: str = ""
    published: str = ""
    language: str = ""
    images: list[ImageRef] = []
    video_urls: list[str] = []
    links: list[str] = []
    link_contexts: list[LinkContext] = []  # for the links of the page's HTML (none for an article built without)


class Medium(Record):
    """An image or video in the content-addressed media store."""

    medium_id: str  # sha256 of the stored bytes
    kind: Literal["image", "video"]
    path: str  # relative to the media store root
    width: int = 0
    height: int = 0
    phash: str = ""
    source_url: str = ""
    origin: Literal["appearance", "article"] = "appearance"
    alt: str = ""
    caption: str = ""
    frame_paths: list[str] = []


class Appearance(Record):
    """Where the claim was seen: a social post or its archived copy."""

    url: str  # as linked
    original_url: str  # archive links mapped back to the original
    platform: str
    fetched_url: str = ""  # what actually served the content (original first, archive as fallback)
    status: Literal["ok", "failed"] = "failed"
    error: str = ""
    text: str = ""
    # the way in that served it: an endpoint of assets/scraping/platforms.py (x_syndication, wayback...), "ytdlp",
    # "page" (the post page) or "linked_archive" (an archive copy the article linked); empty when none did
    way: str = ""
    attempts: list[str] = []  # "<way>:<outcome>" in the order tried; outcome "served", "text_only" or a drop reason
    media_count: int = 0  # media stored from this appearance


class ClaimAppearances(Review):
    """Stage 4: a review with its recovered appearances and all candidate media."""

    publisher_id: str = ""
    appearances: list[Appearance] = []
    media: list[Medium] = []


class NormalizedClaim(Record):
    """Stage 5: a bare, self-contained assertion with at most 4 media referenced as <image:N>/<video:N>."""

    claim_id: str
    review_id: str
    quarter: str
    text: str = Field(min_length=1)
    original_text: str
    normalization: Literal["llm", "original"]
    language: str = ""
    claim_date: date | None = None
    review_url: str
    publisher_id: str = ""
    rating_text: str = ""
    media: list[Medium] = Field(default=[], max_length=4)
    dropped_media: list[str] = []  # "<medium_id>:<reason>"
    injection_flags: list[str] = []  # instruction-like phrases found in the claim or its article (flagged, not obeyed)


class Rating(Record):
    """One ensemble member's rating of one property (of one medium, for media properties)."""

    member: str
    property: Property
    medium_index: int = -1  # -1 for claim-level properties
    category: Literal["positive", "negative", "unknown"]
    certainty: Literal["certain", "rather certain", "rather uncertain", "unknown"]
    score: float = Field(ge=-1, le=1)
    justification: str = ""
    tags: list[str] = []
    raw: str = ""


class PropertyVerdict(Record):
    """The ensemble's verdict on one property: the mean score and one merged justification."""

    property: Property
    medium_index: int = -1
    score: float = Field(ge=-1, le=1)
    n_ratings: int
    spread: float
    justification: str = ""
    tags: list[str] = []


class Integrity(Record):
    score: float = Field(ge=-1, le=1)
    decisive_property: Literal["context_coverage", "veracity", "contextualization"]
    label: Literal["intact", "unknown", "compromised"]


class EvidenceCut(Record):
    """What some members' evidence left out of a fact-check article longer than their token budget."""

    members: list[str]
    budget_tokens: int
    article_chars: int
    kept_chars: int
    left_out: list[list[int]] = []  # [start, end) character spans of the article these members did not see


class ScoredClaim(NormalizedClaim):
    """Stage 6: ensemble verdicts per property and the integrity score."""

    media_verdicts: list[PropertyVerdict] = []
    veracity: PropertyVerdict | None = None
    context_coverage: PropertyVerdict | None = None
    integrity: Integrity
    ratings: list[Rating] = []
    variant: Literal["original", "rectified"] = "original"
    variant_of: str = ""  # the original claim's id for a rectified claim; the rectified id for an original
    evidence_cuts: list[EvidenceCut] = []  # empty: every member read the whole article
    # how many of the quarter's claims this one stands for in the Unknown share of the release: 1, or, when stage 6
    # scored on demand, its rating stratum's claims over those of it scored (never published: it follows the rating)
    weight: float = 1.0
    # a rectified variant: the rounds of stage 7's critique-and-refine loop it took, and its word-level edit ratio
    # against the claim it rewrites (never published: they exist only for rewritten claims)
    rewrite_rounds: int = 0
    edit_ratio: float | None = None


class ReleaseScore(Record):
    score: float = Field(ge=-1, le=1)
    justification: str = ""


class ReleaseMedium(Record):
    type: Literal["image", "video"]
    id: int
    file_path: str
    authenticity: ReleaseScore | None = None
    contextualization: ReleaseScore | None = None


class ReleaseIntegrity(Record):
    score: float = Field(ge=-1, le=1)
    decisive_property: str


class ReleaseClaim(Record):
    """One claim of a release, in the VeriTaS ``claims.json`` format."""

    id: int
    text: str
    date: str | None
    language: str
    review_url: str
    media: list[ReleaseMedium] = []
    veracity: ReleaseScore | None = None
    context_coverage: ReleaseScore | None = None
    integrity: ReleaseIntegrity


class Evidence(Record):
    url: str = ""
    text: str = ""
    published: str = ""


class PredictedMedium(Record):
    id: int
    authenticity: float | None = Field(default=None, ge=-1, le=1)
    contextualization: float | None = Field(default=None, ge=-1, le=1)


class PredictedQA(Record):
    """One verification question the verifier asked, the tool it chose, and the answer it found."""

    question: str
    tool: str = ""
    query: str = ""
    answer: str = ""
    urls: list[str] = []
    published: list[str] = []  # the publication date of each url's evidence (ISO), same order


class Prediction(Record):
    """A verifier's output for one release claim (our baseline or any outside system)."""

    claim_id: int
    quarter: str
    system: str
    integrity: float | None = Field(default=None, ge=-1, le=1)
    veracity: float | None = Field(default=None, ge=-1, le=1)
    context_coverage: float | None = Field(default=None, ge=-1, le=1)
    media: list[PredictedMedium] = []
    justification: str = ""
    evidence: list[Evidence] = []
    error: str = ""
    created: datetime | None = None
    qa: list[PredictedQA] = []  # the question-answer evidence of a retrieval verifier
    rejected_evidence: int = 0  # search results the temporal guard withheld (dated after the claim, or undated)
