"""A release that loads anywhere: Croissant 1.0 metadata (``croissant.json``), a Hugging Face dataset card
(``README.md``) and the ``veritas export --format hf`` folder.

A release's own card is written with it and never changes; the human audit, published weeks later beside the release
version (assets/audit/asset.py), shows in the export's card (``export_hf``: a line per quarter and each audit's card).

Plain functions, no Dagster.  The Croissant file is written as plain JSON-LD (importing mlcroissant costs
seconds of CPU); the tests validate it and load the claims with mlcroissant.
"""

from __future__ import (
    annotations,  # pyarrow's types in annotations: it is imported where used (issue 36)
)

import hashlib
import json
import shutil
from pathlib import Path

import polars as pl
import yaml

from assets.rules.failed_answers import failed_answers_lines, failed_answers_markdown

#: The AVeriTeC and AVerImaTeC benchmarks this one follows are released under CC BY-NC 4.0.
LICENSE = "cc-by-nc-4.0"
LICENSE_URL = "https://creativecommons.org/licenses/by-nc/4.0/"
CROISSANT_1_0 = "http://mlcommons.org/croissant/1.0"
LABELS = {
    "intact": "integrity score above 1/3: the claim's text, media and context hold up",
    "unknown": "integrity score from -1/3 to 1/3: not enough information (meta.json counts it as nei)",
    "compromised": "integrity score below -1/3: false, manipulated or out of context",
}
MEDIA_COLUMNS = {"claim_id": pl.Int64, "medium_id": pl.Int64, "type": pl.Utf8, "file_path": pl.Utf8,
                 "authenticity": pl.Float64, "contextualization": pl.Float64}

# Croissant 1.0's JSON-LD context, key for key the standard one (mlcroissant warns about any key it lacks).
_CONTEXT = {
    "@language": "en", "@vocab": "https://schema.org/", "sc": "https://schema.org/",
    "cr": "http://mlcommons.org/croissant/", "rai": "http://mlcommons.org/croissant/RAI/",
    "dct": "http://purl.org/dc/terms/", "citeAs": "cr:citeAs", "column": "cr:column",
    "conformsTo": "dct:conformsTo", "data": {"@id": "cr:data", "@type": "@json"},
    "dataType": {"@id": "cr:dataType", "@type": "@vocab"}, "examples": {"@id": "cr:examples", "@type": "@json"},
    "extract": "cr:extract", "field": "cr:field", "fileProperty": "cr:fileProperty", "fileObject": "cr:fileObject",
    "fileSet": "cr:fileSet", "format": "cr:format", "includes": "cr:includes", "isLiveDataset": "cr:isLiveDataset",
    "jsonPath": "cr:jsonPath", "key": "cr:key", "md5": "cr:md5", "parentField": "cr:parentField", "path": "cr:path",
    "recordSet": "cr:recordSet", "references": "cr:references", "regex": "cr:regex", "repeated": "cr:repeated",
    "replace": "cr:replace", "samplingRate": "cr:samplingRate", "separator": "cr:separator", "source": "cr:source",
    "subField": "cr:subField", "transform": "cr:transform", "equivalentProperty": "cr:equivalentProperty",
}
# (column, Croissant data type, description) of claims.parquet, as release_frame writes it.
_CLAIM_FIELDS = (
    ("id", "sc:Integer", "claim id, unique within the quarter"),
    ("text", "sc:Text", "the claim; <image:N>/<video:N> point at media ids"),
    ("date", "sc:Text", "the claim's date (ISO 8601), when known"),
    ("language", "sc:Text", "language code of the claim"),
    ("review_url", "sc:URL", "the fact-check article"),
    ("veracity", "sc:Float", "veracity score in [-1, 1]"),
    ("context_coverage", "sc:Float", "context coverage score in [-1, 1]"),
    ("integrity", "sc:Float", "integrity score in [-1, 1]: the lowest of the property scores"),
    ("decisive_property", "sc:Text", "the property that holds the integrity score"),
    ("label", "sc:Text", "intact, unknown or compromised (integrity binned at -1/3 and 1/3)"),
    ("n_images", "sc:Integer", "number of images"),
    ("n_videos", "sc:Integer", "number of videos"),
)
_MEDIA_FIELDS = (
    ("claim_id", "sc:Integer", "the claim that shows the medium"),
    ("medium_id", "sc:Integer", "medium id, unique within the quarter"),
    ("type", "sc:Text", "image or video"),
    ("file_path", "sc:Text", "the file, relative to the release folder (images/N.jpg, videos/N.mp4)"),
    ("authenticity", "sc:Float", "authenticity score in [-1, 1]"),
    ("contextualization", "sc:Float", "contextualization score in [-1, 1]"),
)


def zip_name(quarter: str) -> str:
    """The release zip's name as the reference VeriTaS export writes it: veritas_2025_q3.zip for 2025Q3."""
    return f"veritas_{quarter[:4]}_q{quarter[5]}.zip"


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def media_frame(claims: list[dict]) -> pl.DataFrame:
    """One row per (claim, medium) of a release's claims.json records."""
    def score(v):
        return None if v is None else v["score"]

    rows = [{"claim_id": c["id"], "medium_id": m["id"], "type": m["type"], "file_path": m["file_path"],
             "authenticity": score(m.get("authenticity")), "contextualization": score(m.get("contextualization"))}
            for c in claims for m in c.get("media", [])]
    return pl.DataFrame(rows, schema=MEDIA_COLUMNS, orient="row")


def _file(name: str, folder: Path, fmt: str, description: str) -> dict:
    return {"@type": "cr:FileObject", "@id": name, "name": name, "description": description,
            "contentUrl": name, "encodingFormat": fmt, "sha256": sha256(folder / name)}


def _fields(record_set: str, file_id: str, specs, files: str = "fileObject") -> list[dict]:
    """Croissant fields read from the columns of ``file_id`` (a ``fileObject``, or with ``files`` a ``fileSet``)."""
    return [{"@type": "cr:Field", "@id": f"{record_set}/{col}", "name": col, "description": text, "dataType": kind,
             "source": {files: {"@id": file_id}, "extract": {"column": col}}} for col, kind, text in specs]


def croissant(folder: Path, quarter: str, release_version: str = "") -> dict:
    """Croissant 1.0 metadata of a release folder: the files with their SHA-256, the media files as file sets
    inside the checksummed zip, and the record sets ``claims`` and ``media`` (media.parquet, keyed to claims)."""
    meta = json.loads((folder / "meta.json").read_text())
    zip_file = zip_name(quarter)
    distribution = [
        _file("claims.parquet", folder, "application/x-parquet", "one row per claim"),
        _file("media.parquet", folder, "application/x-parquet", "one row per medium of a claim"),
        _file("claims.json", folder, "application/json", "the claims in the VeriTaS format"),
        _file("meta.json", folder, "application/json", "year, quarter and counts"),
        _file(zip_file, folder, "application/zip", "meta.json, claims.json, images/ and videos/ in one archive"),
        {"@type": "cr:FileSet", "@id": "images", "name": "images", "description": "the images (JPEG)",
         "containedIn": {"@id": zip_file}, "encodingFormat": "image/jpeg", "includes": "images/*.jpg"},
        {"@type": "cr:FileSet", "@id": "videos", "name": "videos", "description": "the videos (MP4)",
         "containedIn": {"@id": zip_file}, "encodingFormat": "video/mp4", "includes": "videos/*.mp4"},
    ]
    media_fields = _fields("media", "media.parquet", _MEDIA_FIELDS)
    media_fields[0]["references"] = {"field": {"@id": "claims/id"}}
    counts = meta["claim_counts"]
    return {
        "@context": _CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_1_0,
        "name": f"veritas_{quarter}",
        "description": (f"VeriTaS {quarter}: {counts['total']} multimodal real-world claims with integrity, veracity, "
                        f"context-coverage and media scores in [-1, 1] ({counts['intact']} intact, "
                        f"{counts['compromised']} compromised, {counts['nei']} unknown)."),
        "license": LICENSE_URL,
        "url": "https://github.com/veritas-benchmark/veritas",
        "version": f"{meta['year']}.{meta['quarter']}.0",  # Croissant wants MAJOR.MINOR.PATCH; the release id is below
        "identifier": release_version or f"veritas_{quarter}",
        "datePublished": f"{meta['year']}-{3 * meta['quarter']:02d}-01",
        "citeAs": f"VeriTaS quarterly fact-checking benchmark, {quarter} release",
        "distribution": distribution,
        "recordSet": [
            {"@type": "cr:RecordSet", "@id": "claims", "name": "claims", "description": "one record per claim",
             "key": {"@id": "claims/id"}, "field": _fields("claims", "claims.parquet", _CLAIM_FIELDS)},
            {"@type": "cr:RecordSet", "@id": "media", "name": "media",
             "description": "one record per medium of a claim", "field": media_fields},
        ],
    }


def integrity_markdown(report: dict, heading: str = "##") -> str:
    """What a reader needs to judge the labels and the split, from a release's manifest (or the same keys before it
    is written): the order check, the ensemble's reliability, the shortcut audit, stage 6's failed answers
    (``failed_answers``, see assets/rules/failed_answers.py) and the recurring claims."""
    from assets.selection.shortcut_audit import audit_markdown

    parts = [f"{heading} Short release\n\n{note}"] if (note := short_release_note(report)) else []
    order = report.get("order")
    if order:
        rows = "\n".join(
            f"| {name} | {s.get('spearman_rho', '-')} ({s.get('rho_z', '-')} sd) | {s.get('same_label_neighbours', '-')} "
            f"(shuffle {s.get('same_label_expected', '-')}, {s.get('neighbours_z', '-')} sd) |"
            if "skipped" not in s else f"| {name} | {s['skipped']} | |" for name, s in order["statistics"].items())
        parts.append(
            f"{heading} Order\n\nClaims and media are numbered in a random order drawn from a secret key kept by the "
            f"maintainer (key {order.get('key', '-')}) and the release's content, starting from an order that is itself "
            "secret, so that nothing public (review URLs, claim texts) lets anyone redo the draw and read which claims "
            f"were rewritten. Only a commitment to the seed is published (sha256 {order.get('seed_commitment', '-')}): "
            "the key's holder can show that a rebuild gives these bytes. Along each order below, Spearman's rho "
            "between position and integrity, and the share of neighbours with the same label, must be within "
            f"{order['max_z']} standard deviations of a shuffle (the neighbour share's spread is measured on "
            f"shuffles of the same labels).\n\n| order | Spearman's rho | same-label neighbours |\n|---|---|---|\n{rows}")
    reliability = report.get("reliability")
    if reliability:
        rows = "\n".join(f"| {scope} | {prop} | {'n/a' if r['alpha'] is None else r['alpha']} | {r['units']} | {r['raters']} |"
                         for scope, props in reliability.items() for prop, r in props.items() if r["units"])
        parts.append(
            f"{heading} Label reliability\n\nKrippendorff's alpha (interval) of the ensemble members' scores, per "
            "property: a unit is one property of one claim (or of one medium); each member is a rater. "
            "`before_filter` is every claim of the quarter the members rated, those the disagreement filter then "
            "dropped included; `scored` the original claims that passed it; `released` the natural (not rewritten) "
            "claims of this split. 1 is perfect agreement, 0 is chance; the filter removed the claims the members "
            "disagreed on most, so `scored` and `released` describe what was kept, and `before_filter` the raters.\n\n| claims | property | alpha | units | raters |\n"
            f"|---|---|---|---|---|\n{rows}")
    audit = report.get("shortcut_audit")
    if audit:
        parts.append(audit_markdown(audit).replace("## ", f"{heading} ", 1))
    if rewritten := rewrite_markdown(report):
        parts.append(f"{heading} Rewritten claims\n\n{rewritten}")
    if note := vision_note(report):
        parts.append(f"{heading} Media seen by the raters\n\n{note}")
    if failed := failed_answers_markdown(report.get("failed_answers") or {}, heading):
        parts.append(failed)
    recurring = report.get("recurring")
    if recurring:
        parts.append(
            f"{heading} Recurring claims\n\n{recurring['count']} of the released claims ({recurring['share']:.1%}) "
            f"recur from an earlier release ({', '.join(recurring.get('earlier_quarters', [])) or 'none before this one'}),"
            " matched by text (the in-quarter near-duplicate measure) or by a medium's perceptual hash; policy "
            f"`{recurring['mode']}`" + (f", {recurring.get('dropped', 0)} left out before selection" if recurring["mode"] == "drop" else "")
            + ". The evaluation's cut-off view and the leaderboard's clean window leave them out: a model may have seen "
            "them before its cut-off." + built_without(recurring))
    return "\n\n".join(parts)


def built_without(recurring: dict) -> str:
    """The sentence of a release built without some earlier releases (``veritas run --allow-missing-earlier``)."""
    missing = recurring.get("built_without") or []
    return (f" BUILT WITHOUT the releases of {', '.join(missing)} (missing or stale when it was built): claims that "
            "recur from them are not marked; rebuild it once they are built") if missing else ""


def simulated_panel(report: dict) -> bool:
    """The release was rated and rewritten by the simulated panel (models named sim/...)."""
    models = report.get("models") or []
    return bool(models) and all(str(m.get("model", "")).startswith("sim/") for m in models)


def rewrite_markdown(report: dict) -> str:
    """The card's account of the rewritten (rectified) claims, in aggregate: how many, the rounds of the
    critique-and-refine loop, their edit ratio, and what the adversarial filter left out."""
    r = report.get("rectification")
    if not r:
        return ""
    ratio = r.get("edit_ratio") or {}
    f = r.get("adversarial_filter") or {}
    rounds = ", ".join(f"{n} in round {k}" for k, n in (r.get("rounds") or {}).items())
    text = (f"{r['released']} of the Intact claims are rewrites of Compromised ones (stage 7: a minimal edit of the "
            "claim that replaces what the fact-check shows false, checked by another model; a rewrite that adds "
            "negation or hedge words is refused, and the refusal goes back to the writer for another round). Which "
            "claims they are is never published." + (f" They held after: {rounds}." if rounds else "")
            + (f" Word-level edit ratio against the claim they rewrite: median {ratio['median']:.2f}, 10th-90th "
               f"percentile {ratio['p10']:.2f}-{ratio['p90']:.2f}, max {ratio['max']:.2f}." if ratio else ""))
    if "skipped" in f:
        text += f" The adversarial filter did not run: {f['skipped']}."
    elif f:
        text += (f" Before selection, an adversarial filter ({f['method']}) left out {f['left_out']} of "
                 f"{f['variants']} rewrites that a classifier told from the {f['natural']} natural Compromised claims they "
                 "hide among; "
                 + (f"the {f['restored']} nearest of those came back, as the rest could not fill the "
                    "release; " if f.get("restored") else "")
                 + "the selection took the rest in an order matched to the shown natural claims' scores.")
    if simulated_panel(report):
        text += (" These figures come from the simulated model panel and its scripted rewriter: they show the "
                 "mechanism, not what real models write. With real models, read the first quarter's rectified-style "
                 "and claim-only figures above, and the rewrites the filter left out.")
    return text


def text_shortcut_notice(report: dict) -> str:
    """The card's first paragraph when the release was published with a text shortcut on purpose, else ''."""
    audit = report.get("shortcut_audit") or {}
    problems = audit.get("text_problems") or []
    if not problems or not audit.get("allow_text_shortcut"):
        return ""
    return ("**Published with a known text shortcut (stages.allow_text_shortcut: true):** " + "; ".join(problems)
            + ". Compare any system's score with the claim-only figure of the shortcut audit below.")


def blind_raters(report: dict) -> tuple[list[str], int]:
    """The members of a release's ensemble that cannot see images (manifest ``models``, ``vision`` false) and the
    number of released claims with media (``selection.media_claims``); a member recorded before ``vision`` was
    counts as unknown, not as blind."""
    blind = [m["name"] for m in report.get("models") or [] if m.get("vision") is False]
    return blind, int((report.get("selection") or {}).get("media_claims") or 0)


def vision_note(report: dict) -> str:
    """One sentence when claims with media were rated by members that cannot see them, else ''."""
    blind, media = blind_raters(report)
    if not blind or not media:
        return ""
    members = report.get("models") or []
    return (f"{media} of the released claims have media, and {len(blind)} of the {len(members)} ensemble members "
            f"({', '.join(blind)}) cannot see images: they rated those media from the claim's text and the media's "
            "alt text, caption and source only, so the media scores rest on the members that saw them, if any.")


def short_release_note(report: dict) -> str:
    """One sentence when the split is smaller than its release size (published so by allow_short_release), else ''."""
    selection = report.get("selection") or {}
    size, n = selection.get("release_size"), selection.get("feasible_size")
    if size is None or n is None or n >= size:
        return ""
    return (f"This split has {n} claims, short of the release size {size}: the quarter's pool allowed no more under "
            "the balance, Unknown-share and media rules, and it was published short on purpose (allow_short_release)"
            + (" in a demo configuration." if report.get("demo") else "."))


def integrity_summary(report: dict) -> list[str]:
    """A few lines for terminals (``veritas yields``, the demo, the rehearsal) from a release's manifest: the order
    check, Krippendorff's alpha per property, the shortcut audit and the recurring claims."""
    from assets.rules.reliability import alpha_line
    from assets.selection.shortcut_audit import audit_line

    lines = [note] if (note := short_release_note(report)) else []
    if report.get("order"):
        worst = max((abs(s.get(z, 0)) for s in report["order"]["statistics"].values() for z in ("rho_z", "neighbours_z")),
                    default=0.0)
        lines.append(f"order check: largest deviation from a shuffle {worst:.1f} sd (limit {report['order']['max_z']})")
    for scope, props in (report.get("reliability") or {}).items():
        lines.append(f"Krippendorff's alpha ({scope} claims): {alpha_line(props) or 'no units'}")
    if report.get("shortcut_audit"):
        lines.append(audit_line(report["shortcut_audit"]))
    lines += failed_answers_lines(report.get("failed_answers") or {})
    if report.get("recurring"):
        r = report["recurring"]
        lines.append(f"recurring from earlier releases ({r['mode']}): {r['count']} claims ({r['share']:.1%})"
                     + (f", {r['dropped']} left out before selection" if r["mode"] == "drop" else "")
                     + built_without(r))
    return lines


def card_text(quarters: dict[str, dict], paths: dict[str, str | list[str]], title: str, sections: str = "",
              notice: str = "", dataset: bool = False) -> str:
    """A Hugging Face dataset card: YAML header (license, languages, task categories, one config per quarter
    and a default config with one split per quarter), then counts and the label scheme.

    ``quarters``: quarter -> meta.json; ``paths``: quarter -> its claims.parquet (or an export's files, see
    hf_data_files), relative to the card. ``languages``: read from the claims.parquet files. ``dataset``: the card of
    an ``--format hf`` export, which describes its columns and how to load it.
    """
    languages = sorted({lang for q in quarters for lang in quarters[q]["languages"]})
    def path(q):  # a copy for each config: yaml would write a shared list as an anchor and an alias
        return list(paths[q]) if isinstance(paths[q], list) else paths[q]

    configs = [{"config_name": "default", "default": True,
                "data_files": [{"split": q, "path": path(q)} for q in sorted(quarters)]}]
    configs += [{"config_name": q, "data_files": [{"split": q, "path": path(q)}]} for q in sorted(quarters)]
    total = sum(m["claim_counts"]["total"] for m in quarters.values())
    header = {
        "license": LICENSE,
        "language": languages,
        "multilinguality": "multilingual" if len(languages) > 1 else "monolingual",
        "task_categories": ["text-classification", "image-classification"],
        "task_ids": ["fact-checking"],
        "size_categories": ["n<1K" if total < 1000 else "1K<n<10K" if total < 10_000 else "10K<n<100K"],
        "pretty_name": title,
        "configs": configs,
    }
    rows = "\n".join(
        f"| {q} | {m['claim_counts']['total']} | {m['claim_counts']['intact']} | {m['claim_counts']['compromised']} "
        f"| {m['claim_counts']['nei']} | {m['media_counts']['images']} | {m['media_counts']['videos']} |"
        for q, m in sorted(quarters.items()))
    labels = "\n".join(f"- `{k}`: {v}" for k, v in LABELS.items())
    return (
        f"---\n{yaml.safe_dump(header, sort_keys=False, allow_unicode=True)}---\n\n# {title}\n\n"
        + (f"{notice}\n\n" if notice else "")
        + "Real-world claims from fact-checking articles, refreshed every quarter so that a model can be scored on "
        "claims published after its knowledge cut-off. Each quarter is one split (`claims.parquet`, one row per "
        "claim; media in `images/` and `videos/`, described by `croissant.json`).\n\n"
        + (EXPORT_NOTE if dataset else "")
        + "## Counts\n\n| quarter | claims | intact | compromised | unknown | images | videos |\n"
        f"|---|---|---|---|---|---|---|\n{rows}\n\n"
        "## Label scheme\n\nEvery score lies in [-1, 1]. `integrity` is the lowest of the claim's property scores "
        "(veracity, context coverage, media contextualization); `decisive_property` names it. "
        f"`label` bins it:\n\n{labels}\n\nScores are published rounded to 2 decimals; a published score within "
        "0.005 of a bin's cut (half the last digit) is on the cut, as before rounding (so 0.17, published for 1/6, "
        "is on the 7-bin cut at 1/6), and cuts belong to the inner bin.\n\nIntact and compromised claims are balanced in each quarter.\n\n"
        + (f"{sections}\n\n" if sections else "")
        + f"## License\n\n[CC BY-NC 4.0]({LICENSE_URL}); the claims' texts and media belong to their publishers.\n"
    )


def _quarter_info(folder: Path) -> dict:
    meta = json.loads((folder / "meta.json").read_text())
    langs = pl.read_parquet(folder / "claims.parquet", columns=["language"])["language"].drop_nulls().unique()
    return {**meta, "languages": sorted(langs.to_list())}


def write_release_card(folder: Path, quarter: str, version: str = "", integrity: dict | None = None) -> None:
    """media.parquet, croissant.json and README.md into a release folder (after claims.parquet and the zip).
    ``integrity``: the manifest's order, reliability, shortcut_audit and recurring sections, for the card."""
    claims = json.loads((folder / "claims.json").read_text())["claims"]
    media_frame(claims).write_parquet(folder / "media.parquet")
    (folder / "croissant.json").write_text(json.dumps(croissant(folder, quarter, version), indent=1, ensure_ascii=False))
    info = {quarter: _quarter_info(folder)}
    (folder / "README.md").write_text(card_text(info, {quarter: "claims.parquet"}, f"VeriTaS {quarter}",
                                                integrity_markdown(integrity or {}),
                                                text_shortcut_notice(integrity or {})))


def read_manifest(folder: Path) -> dict:
    """A release folder's manifest.json; {} when it is missing or unreadable (a release made before it existed)."""
    try:
        return json.loads((folder / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}


#: The table of one quarter in an ``--format hf`` export, beside its images: ``datasets`` reads it as an image folder's
#: metadata, so the ``images_file_names`` column becomes ``images``, a list of ``Image`` features.
HF_TABLE = "metadata.parquet"
EXPORT_NOTE = (
    "## Loading\n\n```python\nfrom datasets import load_dataset\n\nveritas = load_dataset(\"path/to/this/folder\")"
    "        # a split per quarter\nq = load_dataset(\"path/to/this/folder\", \"2025Q3\")  # one quarter\n```\n\n"
    "Each quarter's table is `<quarter>/metadata.parquet`: the claim's columns, `quarter`, `images` (its pictures, "
    "`datasets` `Image` features, in the order of its media), `videos` (paths of its MP4 files relative to this "
    "folder) and `media` (each medium's id, type, file path and scores). `croissant.json` here describes all the "
    "quarters (record sets `claims` and `media`, the quarter a field); each quarter's folder keeps its release's "
    "own.\n\n")


def hf_table(folder: Path, quarter: str, images: str = "images_file_names") -> pa.Table:
    """One quarter's claims as ``datasets`` loads them from an image folder: claims.parquet's columns (media_json
    left out) after a ``quarter`` column, ``images_file_names`` (the claim's images, relative to the release folder,
    in the order of its media), ``videos`` (its videos' paths relative to the export root, where ``folder`` is named
    after ``quarter``) and ``media`` (each medium's id, type, file_path and scores, as a list of structs).
    Written with Arrow's list<string>, which the image folder builder turns into images (polars' large lists it
    does not). ``images``: the images column's name, plain ``images`` where the export has no image at all (no
    image folder then: the column would keep its suffix)."""
    import pyarrow as pa
    claims = json.loads((folder / "claims.json").read_text())["claims"]
    table = pl.read_parquet(folder / "claims.parquet").drop("media_json", strict=False)
    by_id = {c["id"]: c.get("media", []) for c in claims}
    if set(by_id) != set(table["id"].to_list()):
        raise ValueError(f"{folder}: claims.json and claims.parquet hold different claim ids; the release is "
                         "damaged, rebuild it (`veritas run --quarter ...`) before exporting it")
    media = [by_id[i] for i in table["id"].to_list()]
    arrow = table.to_arrow()
    arrow = arrow.cast(pa.schema([f.with_type(_small_types(f.type)) for f in arrow.schema]))
    score = lambda m, key: None if m.get(key) is None else m[key]["score"]  # noqa: E731
    medium = pa.struct([("id", pa.int64()), ("type", pa.string()), ("file_path", pa.string()),
                        ("authenticity", pa.float64()), ("contextualization", pa.float64())])
    extra = {
        images: pa.array([[m["file_path"] for m in ms if m["type"] == "image"] for ms in media], pa.list_(pa.string())),
        "videos": pa.array([[f"{quarter}/{m['file_path']}" for m in ms if m["type"] == "video"] for ms in media],
                           pa.list_(pa.string())),
        "media": pa.array([[{"id": m["id"], "type": m["type"], "file_path": m["file_path"],
                             "authenticity": score(m, "authenticity"), "contextualization": score(m, "contextualization")}
                            for m in ms] for ms in media], pa.list_(medium)),
    }
    arrow = arrow.add_column(0, "quarter", pa.array([quarter] * arrow.num_rows, pa.string()))
    for name, column in extra.items():
        arrow = arrow.append_column(name, column)
    return arrow


def _small_types(kind: pa.DataType) -> pa.DataType:
    """polars writes large strings and large lists; ``datasets`` shows them as plain ones."""
    import pyarrow as pa
    if pa.types.is_large_string(kind):
        return pa.string()
    if pa.types.is_large_list(kind) or pa.types.is_list(kind):
        return pa.list_(_small_types(kind.value_type))
    return kind


def same_columns(tables: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """The quarters' tables with the same columns in the same order (``datasets`` refuses splits that differ): a
    column that an older release's claims.parquet lacks (``recurring_id`` came later) is added to it, empty."""
    import pyarrow as pa
    try:
        schema = pa.unify_schemas([t.schema for t in tables.values()])
    except pa.ArrowInvalid as e:
        raise ValueError(f"the quarters' claims.parquet files disagree on a column's type ({e}); rebuild the older "
                         "release with `veritas run --quarter Q` before exporting them together") from None
    return {q: pa.table({f.name: t[f.name] if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
                         for f in schema}, schema=schema) for q, t in tables.items()}


def hf_data_files(quarter: str, has_images: bool) -> list[str]:
    """A split's files in the card: its table, and its images so that ``datasets`` picks the image folder builder."""
    return [f"{quarter}/{HF_TABLE}", *([f"{quarter}/images/*"] if has_images else [])]


def export_croissant(out: Path, quarters: list[str]) -> dict:
    """Croissant 1.0 metadata of an ``--format hf`` export: every quarter's table and media.parquet (with their
    SHA-256), and the record sets ``claims`` and ``media`` over all of them, each with the quarter as a field. The file
    sets name each quarter's folder: nothing else in ``out`` (a folder set aside by --force) is read. Each release
    folder keeps its own croissant.json for that quarter alone."""
    distribution = []
    for q in quarters:
        distribution += [_file(f"{q}/{HF_TABLE}", out, "application/x-parquet", f"{q}: one row per claim"),
                         _file(f"{q}/media.parquet", out, "application/x-parquet", f"{q}: one row per medium")]
    distribution += [
        {"@type": "cr:FileSet", "@id": "claim-tables", "name": "claim-tables",
         "description": "the quarters' claim tables", "encodingFormat": "application/x-parquet",
         "includes": [f"{q}/{HF_TABLE}" for q in quarters]},
        {"@type": "cr:FileSet", "@id": "media-tables", "name": "media-tables",
         "description": "the quarters' media tables", "encodingFormat": "application/x-parquet",
         "includes": [f"{q}/media.parquet" for q in quarters]},
        {"@type": "cr:FileSet", "@id": "images", "name": "images", "description": "the images (JPEG)",
         "encodingFormat": "image/jpeg", "includes": [f"{q}/images/*.jpg" for q in quarters]},
        {"@type": "cr:FileSet", "@id": "videos", "name": "videos", "description": "the videos (MP4)",
         "encodingFormat": "video/mp4", "includes": [f"{q}/videos/*.mp4" for q in quarters]},
    ]
    quarter = ("quarter", "sc:Text", "the quarter (split) it was released in, e.g. 2025Q3")
    claim_fields = _fields("claims", "claim-tables", (quarter, *_CLAIM_FIELDS), "fileSet")
    media_fields = _fields("media", "media-tables", (quarter, *_MEDIA_FIELDS), "fileSet")
    # media.parquet, as released, has no quarter column: the quarter is its folder's name
    media_fields[0]["source"].update(extract={"fileProperty": "fullpath"},
                                     transform={"regex": r"^([0-9]{4}Q[1-4])/media\.parquet$"})
    # No `references` from media/claim_id to claims/id: an id is unique only within its quarter, and mlcroissant joins
    # on one column, so it would pair each medium with the claim of that id in every quarter.
    metas = {q: json.loads((out / q / "meta.json").read_text()) for q in quarters}
    total = sum(m["claim_counts"]["total"] for m in metas.values())
    span = quarters[0] if len(quarters) == 1 else f"{quarters[0]} to {quarters[-1]}"
    return {
        "@context": _CONTEXT,
        "@type": "sc:Dataset",
        "conformsTo": CROISSANT_1_0,
        "name": "veritas_" + "_".join(dict.fromkeys([quarters[0], quarters[-1]])),
        "description": (f"VeriTaS {span}: {total} multimodal real-world claims in {len(quarters)} quarterly splits "
                        "(the quarter is a field), with integrity, veracity, context-coverage and media scores in "
                        "[-1, 1]. Each quarter's folder holds its release and its own croissant.json."),
        "license": LICENSE_URL,
        "url": "https://github.com/veritas-benchmark/veritas",
        "version": "1.0.0",
        "identifier": "veritas_" + "+".join(quarters),
        "datePublished": max(f"{m['year']}-{3 * m['quarter']:02d}-01" for m in metas.values()),
        "citeAs": f"VeriTaS quarterly fact-checking benchmark, {span}",
        "distribution": distribution,
        "recordSet": [
            {"@type": "cr:RecordSet", "@id": "claims", "name": "claims",
             "description": "one record per claim of every exported quarter",
             "key": [{"@id": "claims/quarter"}, {"@id": "claims/id"}], "field": claim_fields},
            {"@type": "cr:RecordSet", "@id": "media", "name": "media",
             "description": "one record per medium of a claim, of every exported quarter", "field": media_fields},
        ],
    }


def release_audits(releases: dict[str, Path], beside: dict[str, dict[str, bytes]]) -> dict[str, dict]:
    """quarter -> the human audit's addendum of its release version, for the quarters whose version has one among
    the files published beside it (``beside``: quarter -> file name -> bytes, as ``veritas export`` reads them)."""
    from assets.audit.card import ADDENDUM_SUFFIX

    out = {}
    for quarter, folder in releases.items():
        name = f"{folder.name}{ADDENDUM_SUFFIX}"
        data = (beside.get(quarter) or {}).get(name)
        if data is None:
            continue
        try:
            out[quarter] = json.loads(data)
        except ValueError as err:
            raise ValueError(f"releases/{quarter}/{name}: not JSON ({err}); publish the audit again "
                             f"(materialize release_audit for {quarter})") from None
    return out


def audit_markdown(audits: dict[str, dict]) -> str:
    """The card's section on the human audits of its quarters' releases (their addenda): one line per quarter
    (agreement, alpha, the gate), then each audit's own card (``<version>.audit.md``); '' when none was audited."""
    from assets.audit.card import audit_card, card_line

    if not audits:
        return ""
    parts = ["## Human audit\n\nPeople judged a secret sample of each audited quarter's release blind, after it was "
             "published. The audit is an addendum beside the release, which leaves the release as it was: "
             "`<quarter>.audit.json` next to the quarter's folder here (with its `.sha256` and its card "
             "`<quarter>.audit.md`; in the store, `<version>.audit.json` beside the release version).\n\n"
             + "\n".join(f"- {q} (release {a['release']['version']}): {card_line(a)}." for q, a in sorted(audits.items()))]
    parts += [audit_card(a).replace("# ", "### ", 1).rstrip("\n") for _, a in sorted(audits.items())]
    return "\n\n".join(parts)


def audit_notice(audits: dict[str, dict]) -> str:
    """The card's first lines for the quarters whose audit fell below its gate, else ''."""
    from assets.audit.card import leaderboard_line

    return "\n\n".join(f"**{q}: below the human audit's gate.** {leaderboard_line(a)}; see the human audit below."
                       for q, a in sorted(audits.items()) if not a["passed"])


def export_hf(releases: dict[str, Path], out: Path, beside: dict[str, dict[str, bytes]] | None = None) -> Path:
    """A Hugging Face dataset folder of one or more quarters: each release copied once under ``<quarter>/`` with its
    table ``metadata.parquet`` beside its images; a card whose default config has one split per quarter and one
    config per quarter (``datasets.load_dataset(str(out))`` shows ``images`` as pictures); and a croissant.json over
    all the quarters. Configs point at the same files: the media are on disk once per quarter. ``beside``: what the
    store published beside each release version (quarter -> file name -> bytes): a human audit there goes into the
    card (the files themselves ``veritas export`` writes next to the quarter folders)."""
    if not releases:
        raise ValueError("no release to export")
    quarters = sorted(releases)
    targets = [*(out / q for q in quarters), out / "README.md", out / "croissant.json"]
    clashes = [str(p) for p in targets if p.exists() or p.is_symlink()]
    if clashes:  # checked before anything is written: it never overwrites what it did not write
        raise ValueError(f"{out}: {', '.join(clashes)} exist already; the export does not overwrite them: "
                         "move them away or export to a new folder")
    missing = [f"{q} ({releases[q]})" for q in quarters if not (releases[q] / "claims.parquet").is_file()]
    if missing:
        raise ValueError(f"no claims.parquet in the release of {', '.join(missing)}: a release made before the "
                         "parquet tables cannot be exported as a dataset; rebuild it with `veritas run --quarter Q`")
    audits = release_audits(releases, beside or {})
    has_images = {q: any((releases[q] / "images").glob("*")) for q in quarters}
    image_column = "images_file_names" if any(has_images.values()) else "images"  # see hf_table
    out.mkdir(parents=True, exist_ok=True)
    for quarter in quarters:
        target = out / quarter
        shutil.copytree(releases[quarter], target, ignore=shutil.ignore_patterns("README.md"))
        if not (target / "croissant.json").exists():  # a release made before croissant.json existed
            write_release_card(target, quarter)
            (target / "README.md").unlink()
    import pyarrow.parquet as pq

    tables = {q: hf_table(out / q, q, image_column) for q in quarters}
    for quarter, table in same_columns(tables).items():
        pq.write_table(table, out / quarter / HF_TABLE)
    info = {q: _quarter_info(out / q) for q in quarters}
    sections = "\n\n".join(f"## {q}\n\n{text}" for q in quarters
                             if (text := integrity_markdown(read_manifest(out / q), "###")))
    notice = "\n\n".join(f"{q}: {n}" for q in quarters if (n := text_shortcut_notice(read_manifest(out / q))))
    sections = "\n\n".join(part for part in (sections, audit_markdown(audits)) if part)
    notice = "\n\n".join(part for part in (notice, audit_notice(audits)) if part)
    (out / "README.md").write_text(card_text(info, {q: hf_data_files(q, has_images[q]) for q in quarters}, "VeriTaS",
                                             sections, notice, dataset=True))
    (out / "croissant.json").write_text(json.dumps(export_croissant(out, quarters), indent=1, ensure_ascii=False))
    return out
