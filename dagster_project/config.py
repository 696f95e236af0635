"""The one config file (YAML) that chooses the sources, the web mode, the models, the store and the data dir."""

from pathlib import Path
from typing import Literal

import dagster as dg

from dagster_project.settings import DEFAULT_CONFIG, PROJECT_ROOT, load_config  # noqa: F401 - re-exported


class SourceSpec(dg.Config):
    """One ClaimReview source: a DataFeed, a ``claims:search`` dump, the live API, or fact-check pages' markup."""

    kind: str = "datafeed"  # "datafeed" | "factcheck_api" | "factcheck_api_live" | "page_markup"
    path: str = ""  # datafeed / factcheck_api: a local path or an http(s) URL (fetched through the web resource)
    urls: list[str] = []  # page_markup: fact-check pages, fetched through the web resource
    # factcheck_api_live (the key itself never goes in the config, only the name of the variable holding it)
    site: str = ""  # reviewPublisherSiteFilter
    query: str = ""
    max_age_days: int | None = None
    language_code: str = ""
    api_key_env: str = "FACTCHECK_API_KEY"
    base_url: str = "https://factchecktools.googleapis.com/v1alpha1/claims:search"
    page_size: int = 100
    max_pages: int = 50


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
    wayback_cdx_limit: int = 50
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


class PipelineResource(dg.ConfigurableResource):
    """Stage parameters. Defaults are the reference system's; the config file may override any of them."""

    sources: list[SourceSpec] = []
    publisher_registry: str = str(PROJECT_ROOT / "registry" / "publishers.csv")
    # stages 1-2 take this many quarters per run of a backfill (Dagster's BackfillPolicy): a quarter costs them well
    # under a second, a run about as much again; 1 gives every quarter a run of its own
    quarters_per_run: int = 8
    # a record that raises is dropped as error:<Type> while a stage's errors stay within the larger of this share of
    # its records and error_budget_min; past that the stage fails, naming the error, a record and its traceback
    error_budget_share: float = 0.02
    error_budget_min: int = 5  # the error budget's floor, in records (see error_budget_share)
    # stage 3
    min_raw_chars: int = 2000
    min_article_chars: int = 1000
    max_article_chars: int = 40000
    scrape_workers: int = 2  # processes for article extraction (trafilatura is CPU-bound)
    # stage 4
    max_appearances: int = 2
    require_appearance: bool = True
    max_candidate_media: int = 8
    # an ensemble member that orders the candidate links (posts, archives, other outbound links) before they are
    # fetched; a URL it names that is not literally in the article or the ClaimReview is refused. Empty: page order.
    appearance_chooser: str = ""
    chooser_max_links: int = 30  # links shown to it: the candidates first, then other outbound links
    # the ways in to a post besides its page (public endpoints, archives), with their endpoints
    platforms: PlatformSettings = PlatformSettings()
    # stage 5
    max_claims: int = 0  # claims of a quarter that go on to the model stages (the first ones); 0: all of them
    max_media: int = 4
    max_words: int = 70
    max_sentences: int = 2
    near_duplicate_distance: int = 6
    # stages 5-7: a claim whose claim, title or article holds instruction-like text is "keep" (flagged, recorded in
    # the release's claims.parquet and manifest) or "drop" (left out before any model call on it)
    injection_policy: str = "keep"
    # stage 6
    min_ratings: int = 3
    # a property that members refused needs min_ratings less one per refusal, down to this (at least 2: the
    # disagreement filter needs a spread); refusals are systematic (violent or sexual imagery), so requiring every
    # member would lose exactly the claims about such media. Set it to min_ratings to drop every refused claim
    refusal_min_ratings: int = 2
    max_rating_spread: float = 1.0
    # the fact-check article as evidence: whole up to this share of a member's context window (tokens), else its
    # end and its parts most relevant to the claim; the embedded demo model reads at most evidence_tokens_embedded
    evidence_context_share: float = 0.5
    evidence_tokens_embedded: int = 750
    # stage 6: demand scores every claim whose fact-checker's rating is not "false", and of the others (the most
    # plentiful) only as many, in the release's own order, as the release needs with its rectified variants; the
    # rest count as not_needed_for_release. all scores every claim, as demand does with recurring: drop (the release
    # then leaves out claims of earlier releases, which stage 6 cannot foresee)
    score: Literal["demand", "all"] = "demand"
    # the share of stage 7's rewrites that score: demand counts on holding (0 < share <= 1); a quarter whose rewrites
    # hold less often may fall short of release_size, and stage 7 says so
    expected_rewrite_success: float = 0.5
    # stage 7: demand rewrites Compromised claims, in the order the release prefers them, only until the Intact
    # variants the release will lack are covered (the rest count as not_needed_for_release); all rewrites every one
    rectify: Literal["demand", "all"] = "demand"
    # release
    release_size: int = 1000
    # a pool too small for release_size fails the release gate; true publishes the smaller split, and its card says so
    allow_short_release: bool = False
    # a demo configuration (the bundled snapshot): its releases are marked demo and may carry code_version unknown;
    # only when every source is the bundled snapshot (demo/snapshot), so that no other config can skip the check
    demo: bool = False
    media_share: float = 0.8
    text_duplicate_similarity: float = 92.0
    # flag: claims that recur from an earlier release are marked (manifest, claims.parquet) and left out of the
    # cut-off view and the leaderboard's clean window; drop: left out of the release
    recurring: Literal["flag", "drop"] = "flag"
    # jobs
    verifier_member: str = ""  # empty: the first ensemble member
    verifier_mode: str = "closed_book"
    knowledge_cutoff: str = ""  # a quarter label such as 2024Q4
    verifier_strategy: str = "parallel"  # retrieval mode's question generation: parallel | dynamic | hybrid
    verifier_questions: int = 5
    verifier_parallel_questions: int = 2  # hybrid: asked at once before the dynamic follow-ups
    verifier_fewshot: int = 3  # BM25-chosen training examples shown to the question generator
    verifier_fewshot_path: str = ""  # AVeriTeC-format training JSON; empty: prompts/verifier_fewshot.json
    verifier_tools: list[str] = ["text_search", "image_search", "reverse_image_search", "vqa"]
    verifier_search_k: int = 5
    verifier_allow_undated: bool = False  # the temporal guard excludes undated evidence unless this is set
    knowledge_warc_paths: list[str] = []  # WARCs for the knowledge store; empty: the web resource's WARCs
    contamination_check: bool = False  # evaluation: write-from-memory articles vs the real ones (METEOR+Hungarian)
    contamination_threshold: float = 0.25
    # leaderboard: the systems registry (one YAML per system) and the bootstrap resamples of its intervals
    systems_dir: str = str(PROJECT_ROOT / "systems")
    bootstrap_resamples: int = 2000

    def demo_release(self) -> bool:
        """Whether a release is the demo's own: ``demo`` set and every source under the bundled snapshot
        (demo/snapshot). ``demo: true`` in another config marks nothing: its releases must name their code."""
        snapshot = (PROJECT_ROOT / "demo" / "snapshot").resolve()
        return self.demo and bool(self.sources) and all(
            s.path and Path(s.path).resolve().is_relative_to(snapshot) for s in self.sources)
