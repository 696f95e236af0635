"""Label Studio tasks an annotator can judge blind: the claim, its date and language, its media (images, and videos
that play), and the evidence the ensemble had, the fact-check article (for a rectified claim the original's, which the
rewrite is grounded in). Never a score, a justification, a tag or whether the claim was rewritten: a task holds
nothing the annotator could copy. Plain functions, no Dagster."""

import base64
import html
import mimetypes
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from assets.audit.sample import AuditClaim

# the keys of a task's data: what the annotator sees, then what the import reads back (never shown)
SHOWN = ("claim", "context_line", "media", "article_html")
IDENTITY = ("quarter", "release_version", "claim_id")
LOCAL_FILES = "/data/local-files/?d="  # Label Studio's local-files serving (its document root: the store's folder)


def media_link(mode: str, rel: str, *, base_url: str = "", local_path: Path | None = None,
               presign: Callable[[str], str] | None = None) -> str:
    """Where the annotator's browser loads a medium stored at ``rel`` (a path relative to the store's folder):
    Label Studio's local-files serving, a URL under ``base_url``, an S3 presigned URL, or inline (a data: URI)."""
    if mode == "local_files":
        return LOCAL_FILES + quote(rel)
    if mode == "url":
        if not base_url:
            raise ValueError("audit_media url needs stages.audit_media_url (where the store's folder is served)")
        return f"{base_url.rstrip('/')}/{quote(rel)}"
    if mode == "presigned":
        if presign is None:
            raise ValueError("audit_media presigned needs an S3 store")
        return presign(rel)
    if mode == "inline":
        kind = mimetypes.guess_type(str(local_path))[0] or "application/octet-stream"
        return f"data:{kind};base64,{base64.b64encode(Path(local_path).read_bytes()).decode()}"
    raise ValueError(f"unknown audit_media {mode!r}: auto, local_files, url, presigned or inline")


def medium_html(kind: str, medium_id: int, url: str) -> str:
    ref = html.escape(f"<{kind}:{medium_id}>")
    src = html.escape(url, quote=True)
    if kind == "video":
        body = f'<video controls preload="metadata" src="{src}" style="max-width: 100%; max-height: 480px"></video>'
    else:
        body = f'<img src="{src}" alt="{ref}" style="max-width: 100%; max-height: 480px"/>'
    return f"<figure>{body}<figcaption>{ref}</figcaption></figure>"


def article_html(article: dict | None, review_url: str) -> str:
    """The fact-check article as the ensemble read it (title, address, text in paragraphs), escaped."""
    if not article or not article.get("text"):
        return (f"<p><em>The article could not be shown: open it at {html.escape(review_url)} and say so in the "
                f"note.</em></p>")
    paragraphs = [" ".join(p.split()) for p in article["text"].split("\n") if p.strip()]
    return "".join([
        f"<h3>{html.escape(article.get('title') or '')}</h3>" if article.get("title") else "",
        f"<p><small>{html.escape(review_url)}</small></p>",
        *(f"<p>{html.escape(p)}</p>" for p in paragraphs),
    ])


def build_tasks(claims: list[AuditClaim], quarter: str, release_version: str, release_rel: str,
                articles: dict[str, dict], link: Callable[[str, str], str]) -> list[dict]:
    """One Label Studio task per claim, in the sample's order. ``release_rel`` is the release folder's path in the
    store, ``articles`` the fact-check articles by review id (title, text), ``link(rel, file_path)`` a medium's URL."""
    tasks = []
    for c in claims:
        claim = c.claim
        media = [{"kind": m.type, "id": m.id,
                  "html": medium_html(m.type, m.id, link(f"{release_rel}/{m.file_path}", m.file_path))}
                 for m in claim.media]
        count = f"{len(media)} medium" if len(media) == 1 else f"{len(media) or 'no'} media"
        tasks.append({"data": {
            "claim": claim.text,
            "context_line": f"Claim date: {claim.date or 'unknown'} · language: {claim.language or 'unknown'} · {count}",
            "media": media,
            "article_html": article_html(articles.get(c.review_id), claim.review_url),
            "quarter": quarter, "release_version": release_version, "claim_id": claim.id,
        }})
    return tasks
