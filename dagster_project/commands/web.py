"""``veritas web check``: a live smoke check of stage 4's ways in, for users who have the internet.

One try of every way in (assets/scraping/platforms.py) for one stable public post per platform (``stages:
platforms: check_posts``, or ``--post PLATFORM=URL``), through the web resource in live mode (so it is polite,
guarded and archived like a run), then a table: works / changed shape / refused / unreachable. The tests never run
it against the internet: they run ``check_rows`` and ``format_table`` against loopback recordings.
"""

import argparse
import sys

VERDICTS = ("works", "changed shape", "refused", "unreachable")


def register(subparsers) -> list[argparse.ArgumentParser]:
    p = subparsers.add_parser("web", help="live checks of the ways in to social posts (needs the internet)")
    actions = p.add_subparsers(dest="web_action", required=True)
    check = actions.add_parser(
        "check",
        help="one request per way in to a stable public post per platform: works / changed shape / refused / unreachable",
        description="Tries every configured way in (stages: platforms: ways) on the posts of stages: platforms: "
                    "check_posts, live, and prints one row per platform and way in. Exit status 1 when any way in "
                    "does not work.",
    )
    check.add_argument("--platform", action="append", help="only this platform (repeatable)")
    check.add_argument("--post", action="append", default=[], metavar="PLATFORM=URL",
                       help="check this post for the platform instead of the configured one (repeatable)")
    check.set_defaults(handler=run)
    return [p, check]


def verdict(reason: str) -> str:
    """What a way in's drop reason says about the way itself. The posts checked are stable, so a service that
    says the post is gone (not found, unavailable) has changed; an archive without a capture of it still works."""
    if reason.startswith("unreachable"):
        return "unreachable"
    if reason.startswith("refused") or reason == "not_configured":
        return "refused"
    if reason == "no_capture":
        return "works"
    return "changed shape"


def check_rows(web, settings, posts: dict[str, str]) -> list[dict]:
    """One row per (platform, way in): the verdict and what the way found or why it failed."""
    from assets.scraping import platforms
    from assets.scraping.appearances import page_media

    rows = []
    for platform, url in posts.items():
        for way in platforms.ways_before(platform, settings) + platforms.ways_after(settings):
            try:
                found = platforms.run_way(way, platforms.Ask(web, settings, url, platform, read_page=page_media))
            except platforms.WayError as err:
                rows.append({"platform": platform, "way": way, "post": url, "verdict": verdict(err.reason),
                             "detail": err.reason})
                continue
            rows.append({"platform": platform, "way": way, "post": url, "verdict": "works",
                         "detail": f"{len(found.media)} media, {len(found.text)} characters of text"})
    return rows


def format_table(rows: list[dict]) -> str:
    head = ("platform", "way in", "verdict", "detail")
    cells = [(r["platform"], r["way"], r["verdict"], r["detail"]) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(head)]
    line = lambda values: "  ".join(v.ljust(w) for v, w in zip(values, widths)).rstrip()  # noqa: E731
    out = [line(head), line(["-" * w for w in widths])] + [line(c) for c in cells]
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    out.append(", ".join(f"{v}: {n}" for v, n in counts.items()))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    from dagster_project.config import load_config
    from dagster_project.resources.web import WebResource
    from dagster_project.stage_settings import stage_settings

    try:
        config = load_config(getattr(args, "config", None))
    except (FileNotFoundError, ValueError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    settings = stage_settings(config["stages"])["scraping"].platforms
    posts = dict(settings.check_posts)
    for item in args.post:
        platform, sep, url = item.partition("=")
        if not sep or not url.startswith(("http://", "https://")):
            print(f"veritas web check: --post wants PLATFORM=URL, not {item!r}", file=sys.stderr)
            return 2
        posts[platform] = url
    if args.platform:
        unknown = sorted(set(args.platform) - set(posts))
        if unknown:
            print(f"veritas web check: no post to check for {', '.join(unknown)} (use --post PLATFORM=URL)",
                  file=sys.stderr)
            return 2
        posts = {p: posts[p] for p in args.platform}
    web = WebResource(**{**config["web"], "mode": "live"})
    try:
        rows = check_rows(web, settings, posts)
    finally:
        web.close()
    print(format_table(rows))
    return 0 if all(r["verdict"] == "works" for r in rows) else 1
