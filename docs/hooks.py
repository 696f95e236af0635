"""mkdocs hooks: the reference pages that are generated from the code, so that they cannot drift from it.

A page asks for a generated block with an HTML comment on a line of its own:

- ``<!-- generated: cli -->``: every ``veritas`` command, from the argument parser that ``dagster_project.cli.main``
  builds (its subcommand modules under ``dagster_project/commands/`` included);
- ``<!-- generated: config -->``: every configuration key with its type, default and meaning, from the
  configuration models (each stage's settings and ``SourceSpec`` in ``dagster_project/stage_settings.py``, the web,
  LLM and store resources, the ensemble member) and the loader in ``dagster_project/core/config_file.py``. A field's meaning is
  its comment in the source (the comment lines right above it and the comment at its end); a one-line comment of
  at most 50 characters without a colon above a field is a section heading. A field without a comment falls back
  to ``MEANINGS`` below; a field with neither is a warning, and ``mkdocs build --strict`` fails on it.

- ``<!-- generated: floors -->``: the floors of the code, bottom to top, as ``tests/test_import_graph.py`` names
  and enforces them: each floor's packages, modules and lines, and the floors its imports reach.

The screenshots in ``docs/img/`` are committed copies of what the tests render with headless Chromium
(``SCREENSHOTS`` below: the asset graph, the yields dashboard, the leaderboard page, the audit's labelling page in
Label Studio). When a test run left fresh ones in ``build/test-artifacts/`` (or ``$VERITAS_TEST_ARTIFACTS``),
``on_post_build`` copies them over the site's copies, so a site built after ``make test`` (as CI does) shows what the
tests just rendered.

``python docs/hooks.py cli|config`` prints a block without mkdocs; ``python docs/hooks.py screenshots`` refreshes
the committed copies in ``docs/img/`` from the artifacts.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import io
import logging
import os
import re
import shutil
import sys
import textwrap
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

log = logging.getLogger("mkdocs.hooks.veritas")
MARKER = re.compile(r"^<!-- generated: (\w+) -->$", re.MULTILINE)

# Meanings of fields that carry no comment in the source: (class, field) -> text. A new field needs a comment
# there or an entry here, else the strict build fails.
MEANINGS = {
    ("SourceSpec", "query"): "free-text query of `claims:search` (factcheck_api_live)",
    ("SourceSpec", "max_age_days"): "`maxAgeDays` of `claims:search`: only reviews this recent (factcheck_api_live)",
    ("SourceSpec", "language_code"): "`languageCode` of `claims:search` (factcheck_api_live)",
    ("SourceSpec", "api_key_env"): "the NAME of the variable that holds the API key (factcheck_api_live)",
    ("SourceSpec", "base_url"): "the `claims:search` endpoint (factcheck_api_live)",
    ("SourceSpec", "page_size"): "results per page, followed with `pageToken` (factcheck_api_live)",
    ("SourceSpec", "max_pages"): "pages fetched at most per query (factcheck_api_live)",
    ("IngestionSettings", "sources"): "set from the top-level `sources:` list, not under `stages:`",
    ("IngestionSettings", "publisher_registry"): "the fact-checker registry CSV that `trusted_reviews` matches against",
    ("ScrapingSettings", "min_raw_chars"): "a fetched page shorter than this (characters of HTML) yields no article",
    ("ScrapingSettings", "min_article_chars"): "an extracted article shorter than this is dropped (`article_too_short`)",
    ("ScrapingSettings", "max_article_chars"): "an extracted article longer than this is dropped (`article_too_long`)",
    ("ScrapingSettings", "max_appearances"): "original posts (or their archives) fetched at most per claim",
    ("ScrapingSettings", "require_appearance"): "drop a claim none of whose appearances could be fetched",
    ("ScrapingSettings", "max_candidate_media"): "media collected at most per claim before the model filter",
    ("NormalizeSettings", "max_media"): "media kept at most per claim (videos first)",
    ("ClaimRules", "max_words"): "words at most in a normalized claim",
    ("ClaimRules", "max_sentences"): "sentences at most in a normalized claim",
    ("ClaimRules", "near_duplicate_distance"): "perceptual-hash Hamming distance (bits) under which two media "
                                                     "are near-duplicates",
    ("ScoreSettings", "min_ratings"): "valid ratings a required property needs, else `incomplete_ratings:<property>`",
    ("ScoreSettings", "max_rating_spread"): "largest spread of the decisive property's ratings, else "
                                               "`rater_disagreement`",
    ("ReleaseSettings", "release_size"): "claims in a release when the pool allows it",
    ("ReleaseSettings", "media_share"): "largest share of the release's claims that have media",
    ("ReleaseSettings", "text_duplicate_similarity"): "rapidfuzz token-set ratio at or above which two claim texts "
                                                       "are near-duplicates (in a release and across releases)",
    ("VerifierSettings", "verifier_mode"): "`closed_book` (no evidence) or `retrieval` (questions, tools, the "
                                           "offline knowledge store)",
    ("VerifierSettings", "verifier_questions"): "verification questions the retrieval verifier asks per claim",
    ("VerifierSettings", "verifier_tools"): "tools the question generator may name",
    ("VerifierSettings", "verifier_search_k"): "search results per tool call",
    ("VerifierSettings", "contamination_threshold"): "evidence-recall score at or above which a claim is flagged as "
                                                     "reproduced from memory",
    ("LeaderboardSettings", "bootstrap_resamples"): "bootstrap resamples of the leaderboard's 95% intervals",
    ("FallbackModel", "model"): "the fallback deployment's litellm model string",
    ("FallbackModel", "api_base"): "its endpoint (empty: the provider's default)",
    ("FallbackModel", "api_key_env"): "the NAME of the variable that holds its key",
    ("EnsembleMember", "name"): "the member's name (ledger, cache key, `verifier_member`, `appearance_chooser`)",
    ("EnsembleMember", "model"): "a litellm model string (`local/...` is the embedded llama.cpp server)",
    ("EnsembleMember", "api_base"): "the endpoint (empty: the provider's default)",
    ("EnsembleMember", "api_key_env"): "the NAME of the variable that holds the key, never the key",
    ("EnsembleMember", "temperature"): "sampling temperature",
    ("EnsembleMember", "seed"): "sampling seed, where the provider takes one",
    ("EnsembleMember", "max_tokens"): "completion tokens at most per answer",
    ("EnsembleMember", "vision"): "the member sees images (and video frames); else it rates from the text",
    ("EnsembleMember", "input_cost_per_token"): "USD per prompt token; empty: litellm's bundled price map",
    ("EnsembleMember", "output_cost_per_token"): "USD per completion token; empty: litellm's bundled price map",
    ("LLMResource", "members"): "the ensemble ([member keys](#llm-members)); default: three members on the embedded "
                                "SmolLM2-135M at temperatures 0, 0.6 and 0.9",
    ("LLMResource", "cache_path"): "the SQLite answer cache (and raw outputs)",
    ("LLMResource", "local_n_threads"): "CPU threads of the embedded llama.cpp server",
    ("LLMResource", "num_retries"): "retries of a failed request by the member's litellm Router",
    ("LLMResource", "timeout_s"): "seconds per request; keep it a little above the slowest real answer",
    ("WebResource", "mode"): "`replay` (serve requests from WARC files, never open a socket) or `live`",
    ("WebResource", "warc_paths"): "WARC files that replay (and re-use in live mode) read",
    ("WebResource", "archive_dir"): "where live mode writes its WARC files",
    ("WebResource", "user_agent"): "the crawler's User-Agent",
    ("WebResource", "connect_timeout_s"): "connect timeout per attempt",
    ("WebResource", "read_timeout_s"): "read timeout per attempt",
    ("WebResource", "max_redirects"): "redirect hops followed at most (with loop detection)",
    ("WebResource", "max_concurrency"): "requests in flight at most, all hosts together",
    ("WebResource", "per_host_concurrency"): "parallel requests to one host when `per_host_delay_s` is 0",
    ("WebResource", "per_host_delay_s"): "least time between the end of one exchange with a host and the next "
                                         "request to it",
    ("WebResource", "max_crawl_delay_s"): "cap on a robots.txt `Crawl-delay`",
    ("WebResource", "max_retries"): "retries of 429, 5xx, timeouts and resets",
    ("WebResource", "backoff_s"): "base of the exponential backoff with full jitter",
    ("StoreResource", "bucket"): "s3: the bucket",
    ("StoreResource", "region"): "s3: the region",
    ("StoreResource", "secret_key_env"): "the NAME of the variable that holds the secret key",
    ("EvidenceSettings", "evidence_tokens_embedded"): "evidence tokens at most for the embedded demo model",
    ("StoreResource", "part_size"): "bytes per part of a multipart upload",
}

# The top-level keys of the config file (the loader refuses any other): what each holds and where it is described.
TOP_LEVEL = {
    "data_dir": "tables, quarantine, media, releases, WARC archive, LLM cache and Dagster home "
                "(default `.veritas`, relative to the config file)",
    "sources": "the ClaimReview sources, combinable: a list of [source](#sources) entries",
    "web": "the [web resource](#web): live fetching or WARC replay",
    "llm": "the [ensemble and its limits](#llm), members as [member entries](#llm-members)",
    "store": "the [store](#store): a local folder (default) or an S3 bucket",
    "stages": "the stages' settings, one flat section read by one model per stage or group of stages (the sections "
              "[stages 1-2](#stages) to [the audit](#stages-audit) below); defaults are the reference system's",
    "executor": "where a run's steps execute: `{kind: in_process}` (default), `{kind: multiprocess, "
                "max_concurrent: N}` or `{kind: celery, broker: redis://..., backend: ..., retries: ...}` "
                "(`dagster_project/executors.py`; the backend defaults to the broker, the broker to "
                "`$VERITAS_CELERY_BROKER` or `redis://127.0.0.1:6379/0`)",
    "schedule": "the quarterly schedule: `{enabled: false, cron: \"0 3 8 1,4,7,10 *\"}` "
                "(`dagster_project/schedules.py`)",
    "pools": "Dagster concurrency pool limits, e.g. `{llm: 2, web: 4}`, set on the instance whenever the CLI opens it",
    "alerts": "where [alerts](#alerts) go: a Slack-compatible webhook and [email](#alerts-smtp) "
              "([Alerts and freshness](../alerts.md)); secrets only by the name of their variable",
    "freshness": "when a release or the ClaimReview feed counts as [late](#freshness) (the freshness checks)",
    "instance": "where the Dagster [instance](#instance) keeps its runs, events and schedules: SQLite files (default) "
                "or PostgreSQL, the URL only in a variable ([Deploy it](../how-to/deploy.md))",
}

# (section anchor, heading, class path, how the section is written in the file)
SECTIONS = [
    ("sources", "sources: (each entry)", "dagster_project.stage_settings:SourceSpec", "sources:\n  - {kind: datafeed, path: ...}"),
    ("web", "web:", "dagster_project.resources.web:WebResource", "web: {mode: replay, ...}"),
    ("llm", "llm:", "dagster_project.resources.llm:LLMResource", "llm: {parallel_claims: 12, members: [...]}"),
    ("llm-members", "llm: members: (each member)", "dagster_project.resources.llm:EnsembleMember",
     "llm:\n  members:\n    - {name: gpt, model: openai/gpt-5.2, api_key_env: OPENAI_API_KEY}"),
    ("llm-fallbacks", "llm: members: fallbacks: (each fallback)", "dagster_project.resources.llm:FallbackModel",
     "fallbacks:\n  - {model: azure/gpt-5.2, api_base: https://example.openai.azure.com}"),
    ("store", "store:", "dagster_project.resources.store:StoreResource", "store: {kind: s3, bucket: veritas-data}"),
    ("instance", "instance:", "dagster_project.core.instance_settings:InstanceSettings",
     "instance: {storage: postgres, postgres_url_env: VERITAS_POSTGRES_URL}"),
    # stages: one flat section in the file, read by one settings model per stage or group (the resource key the
    # assets name it by follows the heading)
    ("stages", "stages: stages 1-2 (ingestion)", "dagster_project.stage_settings:IngestionSettings",
     "stages: {quarters_per_run: 0}"),
    ("stages-scraping", "stages: stages 3-4 (scraping)", "dagster_project.stage_settings:ScrapingSettings",
     "stages: {max_appearances: 2}"),
    ("stages-platforms", "stages: platforms:", "dagster_project.stage_settings:PlatformSettings",
     "stages:\n  platforms: {enabled: true, x_api_key_env: X_BEARER_TOKEN}"),
    ("stages-normalizing", "stages: stage 5 (normalizing)", "dagster_project.stage_settings:NormalizeSettings",
     "stages: {max_media: 4}"),
    ("stages-claim-rules", "stages: stages 5-7 and the release (claim_rules)",
     "dagster_project.stage_settings:ClaimRules", "stages: {max_words: 70, max_sentences: 2}"),
    ("stages-evidence", "stages: stages 5-7 (evidence)", "dagster_project.stage_settings:EvidenceSettings",
     "stages: {evidence_context_share: 0.5}"),
    ("stages-scoring", "stages: stage 6 (scoring)", "dagster_project.stage_settings:ScoreSettings",
     "stages: {min_ratings: 3}"),
    ("stages-demand", "stages: stages 6-7 on demand (demand)", "dagster_project.stage_settings:DemandSettings",
     "stages: {score: demand, rectify: demand}"),
    ("stages-rectifying", "stages: stage 7 (rectifying)", "dagster_project.stage_settings:RectifySettings",
     "stages: {refine_rounds: 2}"),
    ("stages-release", "stages: the release (release_rules)", "dagster_project.stage_settings:ReleaseSettings",
     "stages: {release_size: 1000}"),
    ("stages-error-budget", "stages: every stage (error_budget)", "dagster_project.stage_settings:ErrorBudgetSettings",
     "stages: {error_budget_share: 0.02}"),
    ("stages-verifier", "stages: the jobs (verifier)", "dagster_project.stage_settings:VerifierSettings",
     "stages: {verifier_mode: closed_book}"),
    ("stages-leaderboard", "stages: the leaderboard (board)", "dagster_project.stage_settings:LeaderboardSettings",
     "stages: {bootstrap_resamples: 2000}"),
    ("stages-audit", "stages: the human audit (audit)", "dagster_project.stage_settings:AuditSettings",
     "stages: {audit_sample_size: 100, audit_min_annotators: 2, audit_min_agreement: 0.8}"),
    ("alerts", "alerts:", "dagster_project.alerts:AlertsResource", "alerts: {webhook_url_env: SLACK_WEBHOOK_URL}"),
    ("alerts-smtp", "alerts: smtp:", "dagster_project.alerts:SmtpSettings",
     "alerts:\n  smtp: {host: smtp.example.org, port: 587, starttls: true, to: [ops@example.org]}"),
    ("freshness", "freshness:", "dagster_project.alerts:FreshnessSettings", "freshness: {days: 21, feed_days: 14}"),
]
LOADER_SECTION = {"web": "web", "llm": "llm", "store": "store"}  # section -> the loader's dict of that name


# ---- the CLI ---------------------------------------------------------------------------------------------------

class _Built(Exception):
    """Raised from parse_args to hand back the parser ``main()`` built, before it runs anything."""


def veritas_parser() -> argparse.ArgumentParser:
    """The parser exactly as ``dagster_project.cli.main`` builds it (it stops at ``parse_args``)."""
    cli = importlib.import_module("dagster_project.cli")
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        raise _Built(self)

    argparse.ArgumentParser.parse_args = capture
    try:
        cli.main([])
    except _Built as built:
        return built.args[0]
    finally:
        argparse.ArgumentParser.parse_args = original
    raise RuntimeError("dagster_project.cli.main() returned without parsing its arguments")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            for name, sub in action.choices.items():
                out.append((name, helps.get(name, ""), sub))
    return out


def _cell(text: str) -> str:
    """One table cell: one line, pipes escaped, ``rst`` literals as Markdown, ``<`` escaped outside code spans."""
    parts = " ".join(str(text).split()).replace("``", "`").replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = []
    for a in parser._actions:
        if isinstance(a, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        name = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.dest}`"
        if a.option_strings and a.nargs != 0:
            name += f" `{a.metavar or a.dest.upper()}`" + (" ..." if a.nargs in ("+", "*") else "")
        notes = []
        if a.required or not a.option_strings:
            notes.append("required")
        if a.choices:
            notes.append("one of " + ", ".join(f"`{c}`" for c in a.choices))
        if a.option_strings and a.nargs != 0 and a.default not in (None, argparse.SUPPRESS, [], ""):
            notes.append(f"default `{a.default}`")
        rows.append(f"| {name} | {_cell(a.help or '')} | {_cell('; '.join(notes))} |")
    return rows


def cli_markdown() -> str:
    os.environ["COLUMNS"] = "100"  # stable usage lines
    top = veritas_parser()
    lines = [f"`veritas [--config FILE] COMMAND ...`: {_cell(top.description or '')}", "",
             "The global `--config FILE` (default: `$VERITAS_CONFIG` or `veritas.yaml`) may also follow most "
             "commands. Commands, in alphabetical order:", ""]
    subs = sorted(_subcommands(top), key=lambda s: s[0])
    lines += [f"- [`veritas {name}`](#veritas-{name}): {_cell(help_)}" for name, help_, _ in subs] + [""]

    def emit(prefix: str, name: str, help_: str, parser: argparse.ArgumentParser, depth: int) -> None:
        full = f"{prefix} {name}"
        lines.extend([f"{'#' * depth} `{full}` {{#{full.replace(' ', '-')}}}", ""])
        if help_:
            lines.extend([_cell(help_), ""])
        if parser.description and parser.description != help_:
            lines.extend([_cell(parser.description), ""])
        usage = parser.format_usage().strip().removeprefix("usage: ")
        lines.extend(["```text", usage, "```", ""])
        rows = _argument_rows(parser)
        if rows:
            lines.extend(["| argument | meaning | notes |", "|---|---|---|", *rows, ""])
        for sub_name, sub_help, sub in sorted(_subcommands(parser), key=lambda s: s[0]):
            emit(full, sub_name, sub_help, sub, depth + 1)

    for name, help_, sub in subs:
        emit("veritas", name, help_, sub, 2)
    return "\n".join(lines)


# ---- the configuration -----------------------------------------------------------------------------------------

def _load(path: str):
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


def _comments(source: str) -> dict[int, str]:
    """line number (1-based, in ``source``) -> the comment on it."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _is_heading(block: list[str]) -> bool:
    return len(block) == 1 and len(block[0]) <= 50 and ":" not in block[0]


def _field_comments(cls) -> list[tuple[str, str, str]]:
    """(field, heading or "", meaning from the source) for each public field, in source order."""
    source = textwrap.dedent(inspect.getsource(cls))
    lines = source.splitlines()
    comments = _comments(source)
    (node,) = ast.parse(source).body
    out = []
    for stmt in node.body:
        if not isinstance(stmt, ast.AnnAssign) or not isinstance(stmt.target, ast.Name):
            continue
        name = stmt.target.id
        if name.startswith("_"):
            continue
        block, n = [], stmt.lineno - 1
        while n >= 1 and lines[n - 1].strip().startswith("#"):
            block.insert(0, comments.get(n, ""))
            n -= 1
        trailing = [comments[i] for i in range(stmt.lineno, stmt.end_lineno + 1) if i in comments
                    and not lines[i - 1].strip().startswith("#")]
        trailing = [t for t in trailing if not t.startswith("noqa")]  # lint notes, not meanings
        heading = ""
        if _is_heading(block):
            heading, block = block[0], []
        out.append((name, heading, " ".join(block + [t for t in trailing if t])))
    return out


def _default(field) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:
            return "(computed)"
        if value and hasattr(value[0], "model_dump"):
            return ", ".join(f"`{{name: {v.name}, model: {v.model}}}`" for v in value)
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if hasattr(type(value), "model_fields"):  # a nested section (alerts: smtp:): its own table gives each key's default
        return "its keys' defaults (below)"
    text = repr(value) if not isinstance(value, str) else (value or '""')
    if isinstance(value, str) and str(ROOT) in value:
        text = value.replace(str(ROOT), "<repo>")
    return f"`{text}`"


def _type(field) -> str:
    text = str(field.annotation).replace("typing.", "")
    text = re.sub(r"<class '([\w.]+)'>", lambda m: m.group(1).rsplit(".", 1)[-1], text)
    text = re.sub(r"\b(?:\w+\.)+([A-Z]\w+)", r"\1", text)
    return f"`{text}`".replace("|", "\\|")


def loader_defaults() -> dict[tuple[str, str], str]:
    """(section, key) -> what ``settings.load_config`` sets when the file leaves the key out."""
    settings = importlib.import_module("dagster_project.core.config_file")
    tree = ast.parse(inspect.getsource(settings))
    out = {}
    for call in ast.walk(tree):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "setdefault"
                and isinstance(call.func.value, ast.Name) and len(call.args) == 2
                and isinstance(call.args[0], ast.Constant)):
            expr = ast.unparse(call.args[1])
            expr = re.sub(r"str\(data_dir / '([^']+)'\)", r"<data_dir>/\1", expr)
            expr = re.sub(r"web\['(\w+)'\]", r"web.\1", expr)
            out[(call.func.value.id, call.args[0].value)] = expr
    return out


def accepted_top_level() -> set[str]:
    """The top-level keys ``settings.load_config`` accepts (the set it checks unknown keys against)."""
    settings = importlib.import_module("dagster_project.core.config_file")
    for node in ast.walk(ast.parse(inspect.getsource(settings.load_config))):
        if isinstance(node, ast.Set) and all(isinstance(e, ast.Constant) for e in node.elts) and len(node.elts) > 3:
            return {e.value for e in node.elts}
    raise RuntimeError("no set of accepted keys found in settings.load_config")


def config_markdown() -> str:
    accepted = accepted_top_level()
    for key in sorted(accepted - set(TOP_LEVEL)):
        log.warning(f"docs/hooks.py: the config key {key!r} is accepted by load_config but not described in TOP_LEVEL")
    lines = ["| key | holds |", "|---|---|"]
    lines += [f"| `{k}` | {TOP_LEVEL[k]} |" for k in TOP_LEVEL if k in accepted] + [""]
    set_by_loader = loader_defaults()
    described = set()
    for anchor, heading, path, example in SECTIONS:
        cls = _load(path)
        lines += [f"## `{heading}` {{#{anchor}}}", "", f"From `{cls.__name__}` in `{cls.__module__.replace('.', '/')}.py`"
                  + (f": {_cell(cls.__doc__.strip().splitlines()[0])}" if cls.__doc__ else "."), "",
                  "```yaml", example, "```", "", "| key | type | default | meaning |", "|---|---|---|---|"]
        fields = cls.model_fields
        for name, heading_text, meaning in _field_comments(cls):
            if name not in fields:
                continue
            described.add((cls.__name__, name))
            meaning = meaning or MEANINGS.get((cls.__name__, name), "")
            if not meaning:
                log.warning(f"docs/hooks.py: {cls.__name__}.{name} has no comment in the source and no entry in MEANINGS")
            default = _default(fields[name])
            loader = set_by_loader.get((LOADER_SECTION.get(anchor, ""), name))
            if loader:
                default = f"`{loader}` (set by the loader)"
            if heading_text:
                lines.append(f"| **{_cell(heading_text)}** | | | |")
            lines.append(f"| `{name}` | {_type(fields[name])} | {_cell(default)} | {_cell(meaning)} |")
        lines.append("")
    for key in sorted(set(MEANINGS) - described):
        log.warning(f"docs/hooks.py: MEANINGS names {key[0]}.{key[1]}, which is no longer a field")
    return "\n".join(lines)


# ---- the floors of the code -------------------------------------------------------------------------------------

def floors_markdown() -> str:
    """The floors table: what tests/test_import_graph.py enforces, counted from the source as it is."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("veritas_import_graph", ROOT / "tests" / "test_import_graph.py")
    graph_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(graph_test)
    modules = graph_test.project_modules()
    edges = graph_test.graph()
    lines = ["| floor | packages | modules | lines | imports from floors |", "|---|---|---|---|---|"]
    for i, (what, prefixes) in enumerate(graph_test.FLOORS):
        mine = [m for m in modules if graph_test.floor_of(m) == i]
        size = sum(len(modules[m].read_text(encoding="utf-8").splitlines()) for m in mine)
        below = sorted({graph_test.floor_of(t) for m in mine for t in edges[m]} - {None, i})
        free = " (Dagster-free)" if all(any(p == f or p.startswith(f + ".") for f in graph_test.DAGSTER_FREE)
                                       for p in prefixes) else ""
        lines.append(f"| {i}. {_cell(what)}{free} | {', '.join(f'`{p}`' for p in prefixes)} | {len(mine)} | {size:,} | "
                     f"{', '.join(map(str, below)) or 'none'} |")
    return "\n".join(lines)


GENERATORS = {"cli": cli_markdown, "config": config_markdown, "floors": floors_markdown}


# ---- the screenshots -------------------------------------------------------------------------------------------

# the site's copy (under docs/) -> the test artifact (under the artifacts folder) and the test that renders it
SCREENSHOTS = {
    "img/asset-graph.png": ("asset-graph/asset-graph.png", "tests/test_screenshots.py::test_chromium_screenshots_the_asset_graph"),
    "img/dashboard.png": ("dashboard/yields.png", "tests/test_dashboard.py::test_chromium_renders_the_page"),
    "img/leaderboard.png": ("leaderboard/leaderboard.png",
                            "tests/test_leaderboard.py::test_chromium_renders_and_rewindows_the_page"),
    "img/audit-labelling.png": ("audit-labelling/labelling.png", ("tests/test_audit_label_studio.py::"
                                "test_chromium_shows_the_labelling_page_of_a_claim_with_its_image")),
}
PNG = b"\x89PNG\r\n\x1a\n"


def artifacts_dir() -> Path:
    """Where the tests keep their screenshots: ``$VERITAS_TEST_ARTIFACTS``, else ``build/test-artifacts``."""
    return Path(os.environ.get("VERITAS_TEST_ARTIFACTS") or ROOT / "build" / "test-artifacts")


def fresh_screenshots(artifacts: Path | None = None) -> dict[str, Path]:
    """site path -> the artifact that replaces it, for each screenshot a test run left (a PNG, not empty)."""
    artifacts = artifacts or artifacts_dir()
    out = {}
    for target, (source, _test) in SCREENSHOTS.items():
        path = artifacts / source
        if path.is_file() and path.read_bytes()[:8] == PNG:
            out[target] = path
    return out


def copy_screenshots(into: Path, artifacts: Path | None = None) -> list[str]:
    """Copy the fresh screenshots over ``into``/img/...; returns the site paths replaced."""
    done = []
    for target, path in fresh_screenshots(artifacts).items():
        (into / target).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, into / target)
        done.append(target)
    return done


def on_post_build(config=None, **kwargs) -> None:
    site = Path(config["site_dir"]) if config is not None else ROOT / "build" / "site"
    done = copy_screenshots(site)
    missing = sorted(set(SCREENSHOTS) - set(done))
    log.info(f"docs/hooks.py: screenshots from {artifacts_dir()}: {', '.join(done) or 'none'}"
             + (f"; committed copies kept for {', '.join(missing)}" if missing else ""))


def on_page_markdown(markdown: str, page=None, config=None, files=None) -> str:
    def replace(match: re.Match) -> str:
        kind = match.group(1)
        if kind not in GENERATORS:
            log.warning(f"docs/hooks.py: unknown generated block {kind!r}")
            return match.group(0)
        return GENERATORS[kind]()

    return MARKER.sub(replace, markdown)


if __name__ == "__main__":
    if sys.argv[1:] == ["screenshots"]:
        print("\n".join(f"docs/{t}" for t in copy_screenshots(ROOT / "docs")) or "no screenshots in " + str(artifacts_dir()))
    else:
        print(GENERATORS[sys.argv[1]]())
