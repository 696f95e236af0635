"""The fact-checker registry (``registry/publishers.csv``) and its refresh from the IFCN and EFCSN signatory pages.

The pages are fetched through the web resource, so a refresh is archived to WARC when live and can be replayed from
a WARC. Where each field sits on a page is data (XPath expressions in ``registry/signatory_sources.yaml``), not
code: when a network redesigns its page, the file changes. A page that yields no signatory stops the refresh
before anything is written, so a layout change can never empty the registry.
"""

import csv
import io
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from lxml import html as lxml_html

from schemas.records import Publisher

REGISTRY_DIR = Path(__file__).resolve().parents[2] / "registry"
REGISTRY_COLUMNS = ("publisher_id", "name", "aliases", "domains", "country", "ifcn_status", "efcsn_status",
                    "signatory_since", "ifcn_date", "efcsn_date", "source")  # source: where the row's facts were read
NETWORKS = ("ifcn", "efcsn")
# status words as the networks print them -> the registry's status; anything else is kept lower-cased
_STATUS = (("active", "active"), ("verified", "active"), ("member", "active"), ("signatory", "active"),
           ("expired", "expired"), ("lapsed", "expired"), ("suspended", "suspended"), ("review", "under_review"),
           ("renewal", "under_review"))


@dataclass
class Signatory:
    """One organisation as a signatory page lists it."""

    network: str
    name: str
    website: str = ""
    country: str = ""
    status: str = ""
    date: str = ""  # ISO date of the status (signed / renewed), "" when the page gives none
    source: str = ""  # the page it was read from


@dataclass
class RefreshReport:
    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: int = 0
    unlisted: dict[str, list[str]] = field(default_factory=dict)  # network -> registry ids the page did not list
    per_page: dict[str, int] = field(default_factory=dict)  # url -> signatories read


def slug(name: str) -> str:
    """A publisher id from a name: lower case, words joined by '-' (letters outside ASCII kept, as the registry does)."""
    text = unicodedata.normalize("NFKC", name).casefold()
    return re.sub(r"[^\w]+", "-", text).strip("-_") or "publisher"


def status_of(text: str) -> str:
    low = " ".join(text.split()).casefold()
    for word, status in _STATUS:
        if word in low:
            return status
    return low


def _first_text(node, xpath: str) -> str:
    if not xpath:
        return ""
    found = node.xpath(xpath)
    for item in found if isinstance(found, list) else [found]:
        text = item.text_content() if hasattr(item, "text_content") else str(item)
        text = " ".join(text.split())
        if text:
            return text
    return ""


def parse_signatory_page(content: bytes | str, spec: dict, base_url: str = "") -> list[Signatory]:
    """The signatories on one page, by the XPath expressions of its ``signatory_sources.yaml`` entry."""
    from assets.ingestion.cleaning import parse_date

    doc = lxml_html.fromstring(content, base_url=base_url or None)
    if base_url:
        doc.make_links_absolute(base_url)
    out = []
    for node in doc.xpath(spec["entry"]):
        name = _first_text(node, spec.get("name", ""))
        if not name:
            continue
        try:
            day = parse_date(_first_text(node, spec.get("date", "")) or None)
        except ValueError:
            day = None
        out.append(Signatory(
            network=spec["network"], name=name, website=_first_text(node, spec.get("website", "")),
            country=_first_text(node, spec.get("country", "")), status=status_of(_first_text(node, spec.get("status", ""))),
            date=day.isoformat() if day else "", source=base_url or spec.get("url", ""),
        ))
    return out


def load_sources_spec(path: str | Path | None = None) -> list[dict]:
    data = yaml.safe_load(Path(path or REGISTRY_DIR / "signatory_sources.yaml").read_text(encoding="utf-8"))
    return list(data["sources"])


def read_registry_rows(path: str | Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as fh:
        return [{c: row.get(c) or "" for c in REGISTRY_COLUMNS} for row in csv.DictReader(fh)]


def registry_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=REGISTRY_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


def merge_signatories(rows: list[dict], signatories: list[Signatory], report: RefreshReport) -> list[dict]:
    """Registry rows updated from the signatory lists: an organisation is found by its website's registered domain,
    then by name or alias; found ones get the network's status, date and (if missing) country; new ones are added.
    Aliases and extra domains in the registry are kept; an organisation a page does not list keeps its row and is
    reported as unlisted."""
    from assets.ingestion.publishers import PublisherIndex, host_of, registered_domain

    rows = [dict(r) for r in rows]
    before = [dict(r) for r in rows]

    def index() -> PublisherIndex:
        return PublisherIndex([Publisher(publisher_id=str(i), name=r["name"], aliases=_split(r["aliases"]),
                                         domains=_split(r["domains"])) for i, r in enumerate(rows)])

    idx = index()
    listed: dict[str, set[int]] = {n: set() for n in NETWORKS}
    read_from: dict[int, list[str]] = {}  # row -> the pages that listed it: its source from now on
    for sig in signatories:
        host = host_of(sig.website)
        publisher, _ = idx.match_fields(sig.website if host else "", "", sig.name)
        if publisher is None:
            domain = registered_domain(host) if host else ""
            rows.append({c: "" for c in REGISTRY_COLUMNS} | {
                "publisher_id": _unique_id(slug(sig.name), rows), "name": sig.name, "domains": domain,
                "country": sig.country})
            report.added.append(rows[-1]["publisher_id"])
            idx = index()
            i = len(rows) - 1
        else:
            i = int(publisher.publisher_id)
        row = rows[i]
        listed.setdefault(sig.network, set()).add(i)
        row[f"{sig.network}_status"] = sig.status or row[f"{sig.network}_status"]
        row[f"{sig.network}_date"] = sig.date or row[f"{sig.network}_date"]
        row["country"] = row["country"] or sig.country
        read_from.setdefault(i, []).append(sig.source)
    for i, pages in read_from.items():
        rows[i]["source"] = "; ".join(dict.fromkeys(p for p in pages if p)) or rows[i]["source"]
    for network, seen in listed.items():
        if seen:  # a network whose page gave nothing was not refreshed at all
            report.unlisted[network] = [r["publisher_id"] for i, r in enumerate(rows)
                                        if i not in seen and r[f"{network}_status"]]
    for old, new in zip(before, rows):
        if old == new:
            report.unchanged += 1
        else:
            report.updated.append(new["publisher_id"])
    return rows


def _split(value: str) -> list[str]:
    return [v for v in value.split(";") if v]


def _unique_id(base: str, rows: list[dict]) -> str:
    taken = {r["publisher_id"] for r in rows}
    candidate, n = base, 2
    while candidate in taken:
        candidate, n = f"{base}-{n}", n + 1
    return candidate


class RefreshError(RuntimeError):
    """A signatory page could not be fetched or gave no signatory; nothing was written."""


def refresh_registry(web, registry_path: str | Path, sources: list[dict], out_path: str | Path | None = None
                     ) -> RefreshReport:
    """Fetch every signatory page through ``web``, merge into the registry and write it (atomically)."""
    report = RefreshReport()
    signatories: list[Signatory] = []
    for spec in sources:
        result = web.fetch(spec["url"])
        if not result.ok:
            raise RefreshError(f"{spec['url']}: {result.error or f'HTTP {result.status}'}")
        found = parse_signatory_page(result.content, spec, result.final_url)
        if not found:
            raise RefreshError(f"{spec['url']}: no signatory found (has the page layout changed? see "
                               "registry/signatory_sources.yaml)")
        report.per_page[spec["url"]] = len(found)
        signatories.extend(found)
    rows = merge_signatories(read_registry_rows(registry_path), signatories, report)
    target = Path(out_path or registry_path)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(registry_csv(rows), encoding="utf-8")
    tmp.replace(target)
    return report
