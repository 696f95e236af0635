"""The settings of each stage, one model per stage or group of stages that reads them, so that an asset names in its
signature the settings it uses. The config file keeps one flat ``stages:`` section: each of its keys belongs to one
model here (``stage_settings`` routes them), and the configuration reference lists the keys model by model.
Defaults are the reference system's."""

from pathlib import Path
from typing import Literal

import dagster as dg
from pydantic import Field

from dagster_project.core.config_file import PROJECT_ROOT


class SourceSpec(dg.Config):
    """One ClaimReview source: a DataFeed, a ``claims:search`` dump, the live API, or fact-check pages' markup."""

    # a DataFeed, a claims:search answer kept as a file, the live claims:search API, or fact-check pages' markup
    kind: Literal["datafeed", "factcheck_api", "factcheck_api_live", "page_markup"] = "datafeed"
    path: str = ""  # datafeed / factcheck_api: a local path or an http(s) URL (fetched through the web resource)
    urls: list[str] = []  # page_markup: fact-check pages, fetched through the web resource
    # factcheck_api_live (the key itself never goes in the config, only the name of the variable holding it)
    site: str = ""  # reviewPublisherSiteFilter
    query: str = ""
    max_age_days: int | None = None
    language_code: str = ""
    api_key_env: str = "FACTCHECK_API_KEY"
    base_url: str = "https://factchecktools.googleapis.com/v1alpha1/claims:search"
    page_size: int = Field(100, ge=1)
    max_pages: int = Field(50, ge=1)


class PlatformSettings(dg.Config):
    """Stage 4's ways in to a post: public endpoints before the post page, archives after it (assets/scraping/platforms.py)."""

    # off: only the post page and a linked archive copy are tried (the media yield without the adapters)
    enabled: bool = True
    # the ways in tried, by name, in order; a way missing here is never tried (see platforms.WAYS for the names)
    ways: list[str] = [
        "x_api", "firecrawl", "x_syndication", "x_oembed", "instagram_embed", "tiktok_oembed", "youtube_oembed",
        "telegram_embed", "bluesky_api", "wayback", "archive_today",
    ]
    # the JSON X's embed widgets read (cdn.syndication.twimg.com, as react-tweet calls it)
    x_syndication_url: str = "https://cdn.syndication.twimg.com/tweet-result"
    x_oembed_url: str = "https://publish.x.com/oembed"  # X's oEmbed endpoint (text of a post, no media)
    # paid: X API v2 tweet lookup, used first when the variable named by x_api_key_env holds a bearer token
    x_api_url: str = "https://api.x.com/2/tweets"
    x_api_key_env: str = "X_BEARER_TOKEN"  # the NAME of the variable that holds the X API bearer token
    # paid: Firecrawl's scrape API, used first for the platforms listed in firecrawl_platforms when the variable
    # named by firecrawl_key_env holds a key
    firecrawl_url: str = "https://api.firecrawl.dev/v1/scrape"
    firecrawl_key_env: str = "FIRECRAWL_API_KEY"  # the NAME of the variable that holds the Firecrawl API key
    firecrawl_platforms: list[str] = []  # e.g. [facebook, instagram]; empty: Firecrawl is never used
    # a post's public embed page is <instagram_url>/p/<code>/embed/captioned/
    instagram_url: str = "https://www.instagram.com"
    tiktok_oembed_url: str = "https://www.tiktok.com/oembed"  # TikTok's oEmbed endpoint (title, author, thumbnail)
    youtube_oembed_url: str = "https://www.youtube.com/oembed"  # YouTube's oEmbed endpoint (title, thumbnail)
    telegram_url: str = "https://t.me"  # a channel post's public view is <telegram_url>/<channel>/<id>?embed=1
    bluesky_appview_url: str = "https://public.api.bsky.app"  # Bluesky's public AppView (app.bsky.feed.getPostThread)
    wayback_available_url: str = "https://archive.org/wayback/available"  # Wayback availability API
    wayback_cdx_url: str = "https://web.archive.org/cdx/search/cdx"  # Wayback CDX API (captures of a URL)
    wayback_web_url: str = "https://web.archive.org/web"  # where captures are fetched, with the id_ raw-content flag
    archive_today_url: str = "https://archive.ph"  # archive.today: <archive_today_url>/newest/<url>
    # Wayback captures looked at, at most, around the claim date
    wayback_cdx_limit: int = Field(50, ge=1)
    # veritas web check: one stable public post per platform (a live smoke check; never run by the tests)
    check_posts: dict[str, str] = {
        "x": "https://x.com/alleyco/status/1679189879086018562",
        "instagram": "https://www.instagram.com/p/CSpmSvAphdf/",
        "tiktok": "https://www.tiktok.com/@atribecalledval/video/7348705314746699054",
        "youtube": "https://www.youtube.com/watch?v=dQw4w9WgXcQ",
        "telegram": "https://t.me/telegram/83",
        "bluesky": "https://bsky.app/profile/bsky.app/post/3mehblstckk2e",
        "other": "https://www.nasa.gov/",
    }


class IngestionSettings(dg.ConfigurableResource):
    """Stages 1-2 (reviews, trusted_reviews): the ClaimReview sources, the publisher registry, how a backfill batches
    their quarters, and whether the sources are the bundled demo snapshot."""

    sources: list[SourceSpec] = []
    publisher_registry: str = str(PROJECT_ROOT / "registry" / "publishers.csv")
    # stages 1-2 take this many quarters per run of a backfill (Dagster's BackfillPolicy); 0, the default, all of them
    # in one run: a quarter costs them under 0.1 s, a run 0.3 s in the command's process and seconds in a process of
    # its own; 1 gives every quarter a run of its own
    quarters_per_run: int = Field(0, ge=0)
    # a demo configuration (the bundled snapshot): its releases are marked demo and may carry code_version unknown;
    # only when every source is the bundled snapshot (demo/snapshot), so that no other config can skip the check
    demo: bool = False

    def demo_release(self) -> bool:
        """Whether a release is the demo's own: ``demo`` set and every source under the bundled snapshot
        (demo/snapshot). ``demo: true`` in another config marks nothing: its releases must name their code."""
        snapshot = (PROJECT_ROOT / "demo" / "snapshot").resolve()
        return self.demo and bool(self.sources) and all(
            s.path and Path(s.path).resolve().is_relative_to(snapshot) for s in self.sources)


class ErrorBudgetSettings(dg.ConfigurableResource):
    """Every stage that maps records (3-7, the verifier): how many records may fail with an error before the stage does."""

    # a record that raises is dropped as error:<Type> while a stage's errors stay within the larger of this share of
    # its records and error_budget_min; past that the stage fails, naming the error, a record and its traceback
    error_budget_share: float = Field(0.02, ge=0, le=1)
    error_budget_min: int = Field(5, ge=0)  # the error budget's floor, in records (see error_budget_share)


class ScrapingSettings(dg.ConfigurableResource):
    """Stages 3-4 (articles, appearances): the article's size limits, the extraction processes, the appearances and
    candidate media kept, the link chooser and the ways in to a post."""

    min_raw_chars: int = Field(2000, ge=0)
    min_article_chars: int = Field(1000, ge=0)
    max_article_chars: int = Field(40000, ge=1)
    scrape_workers: int = Field(2, ge=1)  # processes for article extraction (trafilatura is CPU-bound)
    max_appearances: int = Field(2, ge=1)
    require_appearance: bool = True
    max_candidate_media: int = Field(8, ge=0)
    # an ensemble member that orders the candidate links (posts, archives, other outbound links) before they are
    # fetched; a URL it names that is not literally in the article or the ClaimReview is refused. Empty: page order.
    appearance_chooser: str = ""
    chooser_max_links: int = Field(30, ge=1)  # links shown to it: the candidates first, then other outbound links
    # the ways in to a post besides its page (public endpoints, archives), with their endpoints
    platforms: PlatformSettings = PlatformSettings()


class NormalizeSettings(dg.ConfigurableResource):
    """Stage 5 (normalized_claims): how many claims reach the model stages, how many media each keeps."""

    max_claims: int = Field(0, ge=0)  # claims of a quarter that reach the model stages (the first ones); 0: all
    max_media: int = Field(4, ge=1)


class ClaimRules(dg.ConfigurableResource):
    """The rules a claim meets in stages 5-7 and the release: its length, when two media are one, and what happens to
    a claim with instruction-like text."""

    max_words: int = Field(70, ge=1)
    max_sentences: int = Field(2, ge=1)
    near_duplicate_distance: int = Field(6, ge=0)
    # stages 5-7: a claim whose claim, title or article holds instruction-like text is "keep" (flagged, recorded in
    # the release's claims.parquet and manifest) or "drop" (left out before any model call on it)
    injection_policy: str = "keep"


class EvidenceSettings(dg.ConfigurableResource):
    """Stages 5-7: how much of the fact-check article each member reads as evidence."""

    # the fact-check article as evidence: whole up to this share of a member's context window (tokens), else its
    # end and its parts most relevant to the claim; the embedded demo model reads at most evidence_tokens_embedded
    evidence_context_share: float = Field(0.5, gt=0, le=1)
    evidence_tokens_embedded: int = Field(750, ge=1)


class ScoreSettings(dg.ConfigurableResource):
    """Stage 6 (scored_claims) and stage 7's re-score of a rewrite: the ratings a property needs and how far they may
    spread."""

    min_ratings: int = Field(3, ge=1)
    # a property that members refused needs min_ratings less one per refusal, down to this (at least 2: the
    # disagreement filter needs a spread); refusals are systematic (violent or sexual imagery), so requiring every
    # member would lose exactly the claims about such media. Set it to min_ratings to drop every refused claim
    refusal_min_ratings: int = Field(2, ge=2)
    max_rating_spread: float = Field(1.0, ge=0)


class DemandSettings(dg.ConfigurableResource):
    """Stages 6-7 on demand: what they score and rewrite, planned from the release's own selection."""

    # stage 6: demand scores every claim whose fact-checker's rating is not "false", and of the others (the most
    # plentiful) only as many, in the release's own order, as the release needs with its rectified variants; the
    # rest count as not_needed_for_release. all scores every claim, as demand does with recurring: drop (the release
    # then leaves out claims of earlier releases, which stage 6 cannot foresee)
    score: Literal["demand", "all"] = "demand"
    # the share of stage 7's rewrites that score: demand counts on holding (0 < share <= 1); a quarter whose rewrites
    # hold less often may fall short of release_size, and stage 7 says so
    expected_rewrite_success: float = Field(0.5, gt=0, le=1)
    # stage 7: demand rewrites Compromised claims, in the order the release prefers them, only until the Intact
    # variants the release will lack are covered (the rest count as not_needed_for_release); all rewrites every one
    rectify: Literal["demand", "all"] = "demand"
    # stage 7 on demand: at least this many more variants than the release needs, so that the release can leave out
    # the ones a classifier tells from natural claims (assets/selection/adversarial.py) and still fill its Intact half;
    # once it has them, stage 7 measures that share as the release will and makes more where it is larger; 0: none
    rectify_surplus: float = Field(0.3, ge=0)


class RectifySettings(dg.ConfigurableResource):
    """Stage 7 (rectified_claims): the writer's critique-and-refine rounds."""

    # stage 7: when a rewrite is refused (by the checker, or for adding negation or hedge words the claim lacks), the
    # reason goes back to the writer for up to this many more rounds (MMCV's critique-and-refine loop); 0: no loop
    refine_rounds: int = Field(2, ge=0)


class ReleaseSettings(dg.ConfigurableResource):
    """The release and the selection stages 6 and 7 plan with: its size, media share, near-duplicate text, recurring
    claims, and the gates it may be let past."""

    # publication is blocked while the text tells rewritten claims from natural ones, or the claim text predicts the
    # label better than natural claims alone do; true publishes anyway, and the card says so in its first paragraph
    allow_text_shortcut: bool = False
    release_size: int = Field(1000, gt=0)
    # a pool too small for release_size fails the release gate; true publishes the smaller split, and its card says so
    # (the adversarial filter may then leave out rewrites below what the selection uses: smaller, not blocked)
    allow_short_release: bool = False
    media_share: float = Field(0.8, ge=0, le=1)
    text_duplicate_similarity: float = Field(92.0, ge=0, le=100)
    # flag: claims that recur from an earlier release are marked (manifest, claims.parquet) and left out of the
    # cut-off view and the leaderboard's clean window; drop: left out of the release
    recurring: Literal["flag", "drop"] = "flag"


class VerifierSettings(dg.ConfigurableResource):
    """The jobs that read the release (predictions, evaluation): the baseline verifier, its knowledge store and the
    contamination check."""

    verifier_member: str = ""  # empty: the first ensemble member
    # several members, one system each (closed_book:<member>), as a simulated world's leaderboard compares them;
    # empty: verifier_member alone
    verifier_members: list[str] = []
    verifier_mode: str = "closed_book"
    knowledge_cutoff: str = ""  # a quarter label such as 2024Q4
    verifier_strategy: str = "parallel"  # retrieval mode's question generation: parallel | dynamic | hybrid
    verifier_questions: int = Field(5, ge=1)
    verifier_parallel_questions: int = Field(2, ge=0)  # hybrid: asked at once before the dynamic follow-ups
    verifier_fewshot: int = Field(3, ge=0)  # BM25-chosen training examples shown to the question generator
    verifier_fewshot_path: str = ""  # AVeriTeC-format training JSON; empty: prompts/verifier_fewshot.json
    verifier_tools: list[str] = ["text_search", "image_search", "reverse_image_search", "vqa"]
    verifier_search_k: int = Field(5, ge=1)
    verifier_allow_undated: bool = False  # the temporal guard excludes undated evidence unless this is set
    knowledge_warc_paths: list[str] = []  # WARCs for the knowledge store; empty: the web resource's WARCs
    contamination_check: bool = False  # evaluation: write-from-memory articles vs the real ones (METEOR+Hungarian)
    contamination_threshold: float = Field(0.25, ge=0, le=1)


class LeaderboardSettings(dg.ConfigurableResource):
    """The leaderboard: the systems registry and the bootstrap of its intervals."""

    # leaderboard: the systems registry (one YAML per system) and the bootstrap resamples of its intervals
    systems_dir: str = str(PROJECT_ROOT / "systems")
    bootstrap_resamples: int = Field(2000, ge=1)


class AuditSettings(dg.ConfigurableResource):
    """The human audit of a release (assets/audit/): its sample, when it is computed, its gate, and how its tasks reach
    Label Studio."""

    # claims of each quarter's release drawn for people to judge (stratified by 3-bin label, media kind, language,
    # rectified or natural, from the secret order key); the whole release when it holds fewer
    audit_sample_size: int = Field(100, ge=1)
    # the audit is computed once every sampled claim has at least this many annotations (the audit.min_annotators)
    audit_min_annotators: int = Field(2, ge=1)
    # the audit's check fails (non-blocking) when the annotators' mean and the release agree on fewer claims' 3-bin
    # integrity label than this share (the audit.min_agreement)
    audit_min_agreement: float = Field(0.8, ge=0, le=1)
    # where a task's media come from: auto (local_files for a local store, presigned for S3), local_files (Label
    # Studio's local-files serving, its document root the store's folder), url (audit_media_url + the path in the
    # store), presigned (S3 presigned URLs) or inline (data: URIs inside the task file, for any instance)
    audit_media: Literal["auto", "local_files", "url", "presigned", "inline"] = "auto"
    audit_media_url: str = ""  # audit_media url: the address the store's folder is served at
    audit_url_expiry_s: int = Field(7 * 86400, ge=60)  # presigned URLs stay valid this long (S3 allows 7 days at most)
    # a Label Studio server for `veritas audit push` / `pull` (empty: only the offline files)
    label_studio_url: str = ""
    label_studio_token_env: str = "LABEL_STUDIO_API_KEY"  # the NAME of the variable that holds its access token
    # how often audit_sensor reads the server's exports and looks for quarters whose answers are complete (it runs
    # by default when label_studio_url is set)
    audit_sensor_interval_s: int = Field(600, ge=30)


# the resource key each stage asset names its settings by -> the model; every key of ``stages:`` is a field of one
STAGE_SETTINGS: dict[str, type[dg.ConfigurableResource]] = {
    "ingestion": IngestionSettings,
    "error_budget": ErrorBudgetSettings,
    "scraping": ScrapingSettings,
    "normalizing": NormalizeSettings,
    "claim_rules": ClaimRules,
    "evidence": EvidenceSettings,
    "scoring": ScoreSettings,
    "demand": DemandSettings,
    "rectifying": RectifySettings,
    "release_rules": ReleaseSettings,
    "verifier": VerifierSettings,
    "board": LeaderboardSettings,
    "audit": AuditSettings,
}
OWNER = {field: key for key, model in STAGE_SETTINGS.items() for field in model.model_fields}


def stage_settings(stages: dict) -> dict[str, dg.ConfigurableResource]:
    """The config's flat ``stages:`` section as one settings object per resource key (a key the file leaves out
    takes its default). The config file was checked before (config.check_config): an unknown key raises here."""
    split: dict[str, dict] = {key: {} for key in STAGE_SETTINGS}
    for name, value in stages.items():
        split[OWNER[name]][name] = value
    return {key: STAGE_SETTINGS[key](**values) for key, values in split.items()}
