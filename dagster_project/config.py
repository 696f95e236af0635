"""The one config file (YAML) that chooses the sources, the web mode, the models, the store and the data dir."""

import os
from pathlib import Path
from typing import Any

import dagster as dg
import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = PROJECT_ROOT / "veritas.yaml"


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


class PipelineResource(dg.ConfigurableResource):
    """Stage parameters. Defaults are the reference system's; the config file may override any of them."""

    sources: list[SourceSpec] = []
    publisher_registry: str = str(PROJECT_ROOT / "registry" / "publishers.csv")
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
    # stage 5
    max_media: int = 4
    max_words: int = 70
    max_sentences: int = 2
    near_duplicate_distance: int = 6
    # stages 5-7: a claim whose claim, title or article holds instruction-like text is "keep" (flagged, recorded in
    # the release's claims.parquet and manifest) or "drop" (left out before any model call on it)
    injection_policy: str = "keep"
    # stage 6
    min_ratings: int = 3
    max_rating_spread: float = 1.0
    # the fact-check article as evidence: whole up to this share of a member's context window (tokens), else its
    # end and its parts most relevant to the claim; the embedded demo model reads at most evidence_tokens_embedded
    evidence_context_share: float = 0.5
    evidence_tokens_embedded: int = 750
    # release
    release_size: int = 1000
    media_share: float = 0.8
    text_duplicate_similarity: float = 92.0
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


def _resolve(value: str, base: Path) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    return str((base / value).resolve())


def load_config(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """Read the YAML config; relative paths resolve against the config file's folder."""
    cfg_path = Path(path or os.environ.get("VERITAS_CONFIG") or DEFAULT_CONFIG).resolve()
    if not cfg_path.exists():
        raise FileNotFoundError(f"config file not found: {cfg_path}")
    raw = yaml.safe_load(cfg_path.read_text()) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{cfg_path}: the config must be a mapping")
    unknown = set(raw) - {"data_dir", "sources", "web", "llm", "store", "stages", "executor", "schedule", "pools"}
    if unknown:
        raise ValueError(f"{cfg_path}: unknown config keys {sorted(unknown)}")
    base = cfg_path.parent
    data_dir = Path(_resolve(raw.get("data_dir", ".veritas"), base))
    web = dict(raw.get("web") or {})
    web["warc_paths"] = [_resolve(p, base) for p in web.get("warc_paths", [])]
    web.setdefault("archive_dir", str(data_dir / "warc"))
    llm = dict(raw.get("llm") or {})
    llm.setdefault("cache_path", str(data_dir / "llm_cache.sqlite"))
    store = dict(raw.get("store") or {})
    store.setdefault("root", str(data_dir / "data"))
    if store.get("kind") == "s3":  # live WARC records are mirrored to the bucket too
        store.setdefault("warc_dir", web["archive_dir"])
    stages = dict(raw.get("stages") or {})
    if stages.get("systems_dir"):
        stages["systems_dir"] = _resolve(stages["systems_dir"], base)
    stages["sources"] = [
        {**s, "kind": s.get("kind", "datafeed"), **({"path": _resolve(s["path"], base)} if s.get("path") else {})}
        for s in raw.get("sources") or []
    ]
    executor = dict(raw.get("executor") or {})  # {kind: in_process | multiprocess | celery, ...}: see executors.py
    schedule = dict(raw.get("schedule") or {})  # {enabled: bool, ...}: see schedules.py
    return {"path": str(cfg_path), "data_dir": str(data_dir), "web": web, "llm": llm, "store": store, "stages": stages,
            "executor": executor, "schedule": schedule,
            "pools": {str(k): int(v) for k, v in (raw.get("pools") or {}).items()}}  # pool -> concurrent steps
