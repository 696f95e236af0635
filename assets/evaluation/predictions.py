"""Job 1, image-text verification: run a verifier over a release split and store its predictions."""

import hashlib
import json
import re
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
from pydantic import ValidationError

from assets.ensemble.rounds import prefetch
from assets.ensemble.scoring import integrity_of, rate, verdicts_from
from assets.evaluation.knowledge import KnowledgeStore
from assets.evaluation.verifier import (
    FewShotPool,
    Verifier,
    build_knowledge_store,
    default_backends,
)
from assets.stage.record_errors import ErrorBudget, map_records
from assets.stage.tables import StageYield, count, finish_stage, llm_metadata
from assets.stage.wiring import quarter_of_context, stage_asset
from dagster_project.resources.llm import LLMResource
from dagster_project.resources.media import MediaStore
from dagster_project.resources.store import StoreResource
from dagster_project.resources.web import WebResource
from dagster_project.stage_settings import ErrorBudgetSettings, VerifierSettings
from schemas.frames import from_frame
from schemas.records import (
    Article,
    Medium,
    NormalizedClaim,
    PredictedMedium,
    Prediction,
    ReleaseClaim,
)

STAGE = "predictions"


MiB = 1024 * 1024
MAX_RELEASE_BYTES = 256 * MiB  # a 1,000-claim claims.json is a few MB; past this the file is not a release


def reject_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def json_shown(value, limit: int = 40) -> str:
    """A value from a JSON file as a message shows it: its JSON text (non-ASCII kept), cut to ``limit`` characters."""
    return json.dumps(value, ensure_ascii=False)[:limit]


class KeyedObject(dict):
    """A JSON object as a dict that remembers the keys the text gave more than once (``json.loads`` keeps only the
    last value of each): use the class as ``object_pairs_hook``."""

    duplicates: tuple[str, ...] = ()

    def __init__(self, pairs=()):
        pairs = list(pairs)
        super().__init__(pairs)
        if len(self) < len(pairs):
            seen: set = set()
            self.duplicates = tuple(dict.fromkeys(k for k, _ in pairs if k in seen or seen.add(k)))


def read_json(path: Path, max_bytes: int, what: str):
    """One JSON document from ``path``, or a ValueError that names the file, the line and column, and what to do:
    a folder, a file over ``max_bytes`` (checked before it is read), bytes that are not UTF-8, NaN or Infinity,
    nesting deeper than the parser's recursion limit. ``what`` says what the file should be."""
    text = read_text(path, max_bytes, what)
    return parse_json(text, path, what)


def read_text(path: Path, max_bytes: int, what: str) -> str:
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path} is a folder, not {what}: give the file itself")
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such file ({what})")
    size = path.stat().st_size
    if size > max_bytes:
        raise ValueError(f"{path} is {size / MiB:.1f} MiB, over the {max_bytes / MiB:.0f} MiB cap for {what}: "
                         "split it (one file per quarter) or check that it is the right file")
    chunks, total = [], 0
    with path.open("rb") as fh:  # in chunks, so memory follows the file, not the cap; one that grew stops at the cap
        while total <= max_bytes and (chunk := fh.read(min(MiB, max_bytes + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise ValueError(f"{path} grew past the {max_bytes / MiB:.0f} MiB cap for {what} while it was read")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ValueError(f"{path}: line {line}: byte {err.start} is not UTF-8; save {what} as UTF-8") from None


def parse_json(text: str, path: Path, what: str, line: int = 0, object_pairs_hook=None):
    """``text`` as JSON (``line``: the line of ``path`` it came from, for JSON Lines); ``object_pairs_hook`` as for
    ``json.loads`` (e.g. ``KeyedObject``, which keeps a duplicated key's name)."""
    try:
        return json.loads(text, parse_constant=reject_constant, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as err:
        where = f"line {line}" if line else f"line {err.lineno} column {err.colno}"
        raise ValueError(f"{path}: {where}: not valid JSON ({err.msg}); {what} is JSON") from None
    except RecursionError:
        where = f"line {line}: " if line else ""
        raise ValueError(f"{path}: {where}nested too deeply to be {what}") from None
    except ValueError as err:  # NaN, Infinity
        where = f"line {line}: " if line else ""
        raise ValueError(f"{path}: {where}{err}; scores are numbers in [-1, 1]") from None


def _field_path(loc: tuple) -> str:
    return ".".join(str(part) for part in loc) or "(the claim)"


def load_release(folder: Path, max_bytes: int = MAX_RELEASE_BYTES, allow_empty: bool = False) -> list[ReleaseClaim]:
    """A release's claims from ``claims.json``, checked: an object with a ``claims`` list of valid claims with unique
    ids, not empty unless ``allow_empty`` (the pipeline's own assets: a short release may hold none). A damaged or
    tampered release is a ValueError naming the file, the claim and the field."""
    path = Path(folder) / "claims.json"
    payload = read_json(path, max_bytes, "a release's claims.json")
    raw = payload.get("claims") if isinstance(payload, dict) else None
    if not isinstance(raw, list):
        raise ValueError(f"{path}: not a release's claims file: expected {{\"claims\": [...]}}; "
                         "restore the release (veritas export) or rebuild it (veritas run)")
    if not raw and not allow_empty:
        raise ValueError(f"{path}: the release holds no claims (\"claims\": []): nothing can be scored against it; "
                         "restore the release or rebuild it")
    claims, first_of = [], {}
    for i, item in enumerate(raw, 1):
        try:
            claim = ReleaseClaim.model_validate(item)
        except ValidationError as err:
            e = err.errors()[0]
            cid = item.get("id") if isinstance(item, dict) else None
            raise ValueError(f"{path}: claim {i}{f' (id {cid!r})' if cid is not None else ''}, field "
                             f"{_field_path(e['loc'])}: {e['msg']}; restore the release or rebuild it") from None
        except RecursionError:
            raise ValueError(f"{path}: claim {i}: nested too deeply to be a release claim") from None
        if claim.id in first_of:
            raise ValueError(f"{path}: claims {first_of[claim.id]} and {i} share id {claim.id}: a release's ids are "
                             "unique, so this release is damaged or tampered with; restore it or rebuild it")
        first_of[claim.id] = i
        claims.append(claim)
    return claims


def as_claim(claim: ReleaseClaim, quarter: str) -> NormalizedClaim:
    """A release claim in the form the raters read; media references go back to per-claim indices."""
    index = {(m.type, str(m.id)): i for i, m in enumerate(claim.media)}
    text = re.sub(r"<(image|video):(\d+)>", lambda mt: f"<{mt.group(1)}:{index.get((mt.group(1), mt.group(2)), mt.group(2))}>", claim.text)
    media = [Medium(medium_id=f"release-{quarter}-{m.id}", kind=m.type, path=m.file_path) for m in claim.media]
    return NormalizedClaim(
        claim_id=str(claim.id), review_id="", quarter=quarter, text=text, original_text=claim.text,
        normalization="original", language=claim.language, claim_date=claim.date, review_url=claim.review_url,
        media=media,
    )


def predict(claim: ReleaseClaim, quarter: str, llm: LLMResource, member: str, media_store: MediaStore) -> Prediction:
    """Closed-book baseline: the backbone rates the four properties with no retrieved evidence."""
    as_normalized = as_claim(claim, quarter)
    ratings, failures = rate(as_normalized, "", llm, [member], media_store, stage=STAGE)
    verdicts = verdicts_from(as_normalized, ratings)
    decided = integrity_of(verdicts["media_verdicts"], verdicts["veracity"], verdicts["context_coverage"])
    by_medium = {}
    for v in verdicts["media_verdicts"]:
        by_medium.setdefault(v.medium_index, {})[v.property] = v.score
    return Prediction(
        claim_id=claim.id, quarter=quarter, system=f"closed_book:{member}",
        integrity=decided[0].score if decided else None,
        veracity=verdicts["veracity"].score if verdicts["veracity"] else None,
        context_coverage=verdicts["context_coverage"].score if verdicts["context_coverage"] else None,
        media=[PredictedMedium(id=m.id, **by_medium.get(i, {})) for i, m in enumerate(claim.media)],
        justification=decided[1].justification if decided else "",
        error="" if decided else f"no_verdict ({failures} failed answers)",
        created=datetime.now(UTC),
    )


def knowledge_cache_key(warc_paths: list[str], articles_version: str) -> str:
    """The knowledge store is rebuilt when a WARC file or the articles table changes."""
    parts = [articles_version] + [f"{p}:{Path(p).stat().st_size}:{Path(p).stat().st_mtime_ns}"
                                  for p in sorted(warc_paths) if Path(p).exists()]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def make_verifier(verifier: VerifierSettings, llm: LLMResource, member: str, media_store: MediaStore,
                  knowledge: KnowledgeStore) -> Verifier:
    """The retrieval verifier as the config describes it (strategy, question count, few-shot, tools)."""
    backends = default_backends(knowledge, llm, member, media_store, verifier.verifier_search_k,
                                verifier.verifier_allow_undated, verifier.verifier_tools)
    return Verifier(
        llm=llm, member=member, backends=backends, media_store=media_store,
        fewshot=FewShotPool.load(verifier.verifier_fewshot_path or None) if verifier.verifier_fewshot > 0 else None,
        strategy=verifier.verifier_strategy, n_questions=verifier.verifier_questions,
        n_parallel=verifier.verifier_parallel_questions, n_shots=verifier.verifier_fewshot,
        allow_undated=verifier.verifier_allow_undated,
    )


def warc_files(paths: list[str]) -> list[str]:
    """WARC files named directly or found in named folders (the live archive dir)."""
    out = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            out += sorted(str(f) for f in path.glob("*.warc*"))
        elif path.exists():
            out.append(str(path))
    return out


@stage_asset(
    "evaluation",
    "Image-text verification: the baseline verifier's predictions on the quarter's release "
    "(closed-book, or retrieval over the offline knowledge store with the temporal guard).",
    deps=("release",),
    pool="llm",
)
def predictions(
    context: dg.AssetExecutionContext, verifier: VerifierSettings, error_budget: ErrorBudgetSettings,
    store: StoreResource, llm: LLMResource, web: WebResource,
) -> dg.MaterializeResult:
    quarter = quarter_of_context(context)
    folder = store.latest_release(quarter)
    if folder is None:
        raise dg.Failure(f"no release for {quarter}: materialize release first")
    if verifier.verifier_mode not in ("closed_book", "retrieval"):
        raise dg.Failure(f"verifier mode {verifier.verifier_mode!r} is unknown; use closed_book or retrieval")
    members = verifier.verifier_members or [verifier.verifier_member or llm.member_names()[0]]
    unknown = [m for m in members if m not in llm.member_names()]
    if unknown:
        raise dg.Failure(f"verifier member(s) {', '.join(unknown)} are not in llm.members "
                         f"({', '.join(llm.member_names())}): fix stages.verifier_member(s)")
    claims = load_release(folder, allow_empty=True)
    stats = StageYield(len(claims) * len(members))  # a prediction per claim and member
    media_store = MediaStore(str(folder))
    verifiers = {}
    if verifier.verifier_mode == "retrieval":
        warcs = warc_files(verifier.knowledge_warc_paths or [*web.warc_paths, web.archive_dir])
        articles = []
        articles_version = ""
        if store.has_table("articles", quarter):
            articles = from_frame(store.read_table("articles", quarter), Article)
            articles_version = store.latest_version("articles", quarter) or ""
        cache = store.base / "knowledge" / f"{knowledge_cache_key(warcs, articles_version)}.json"
        knowledge = build_knowledge_store(warcs, articles, cache)
        stats.extra.update({f"knowledge/{k}": v for k, v in knowledge.stats().items() if isinstance(v, int)})
        verifiers = {m: make_verifier(verifier, llm, m, media_store, knowledge) for m in members}

    def verify(claim: ReleaseClaim) -> list[Prediction]:
        if not verifiers:
            return [predict(claim, quarter, llm, m, media_store) for m in members]
        return [verifiers[m].predict(as_claim(claim, quarter), claim.id, [x.id for x in claim.media], quarter)
                for m in members]

    # claims verified on parallel_claims threads, counted below
    work = prefetch(claims, verify, llm.parallel_claims, context.log, STAGE)

    def one(claim: ReleaseClaim):
        made = work(claim)
        for prediction in made:
            if verifiers:
                count(stats, "guard/rejected_evidence", prediction.rejected_evidence)
                count(stats, "qa/questions", len(prediction.qa))
            count(stats, "no_verdict", bool(prediction.error))
        return made, ""

    out = map_records(STAGE, claims, one, stats, context.log,
                      ErrorBudget.for_stage(error_budget, STAGE, len(claims), context.log))
    stats.extra.update(llm_metadata(llm, STAGE, context.run_id))
    stats.extra["release"] = folder.name
    stats.extra["verifier_mode"] = verifier.verifier_mode
    return finish_stage(context, store, STAGE, quarter, out, Prediction, stats)
