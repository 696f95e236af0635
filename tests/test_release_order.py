"""Issue 24, item 1: nothing about a claim's label may be read from its place in a release.

Claims and media are numbered in a random order seeded from the release's content; validate_release (and so the
blocking release_format check) refuses a release whose file order, claim ids or media ids carry the label."""

import gzip
import json
import random
import shutil
from pathlib import Path

from assets.release.numbering import ordered_release, to_release_claims
from assets.release.validation import validate_release
from assets.release.writing import write_release
from assets.rules.bins import bin3
from assets.rules.release_order import order_statistics, release_orders
from assets.selection.release_selection import select_release
from dagster_project.resources.media import MediaStore
from schemas.records import Medium
from tests.test_release import ORDER_KEY, claim, jpeg

SCORES = {"compromised": -0.7778, "intact": 0.7778, "unknown": 0.0}
# real claims: the AVeriTeC dev set's (CC BY-NC 4.0, tests/fixtures/LICENSES); labels here are the test's own
REAL_CLAIMS = [c["claim"] for c in json.load(gzip.open(Path(__file__).parent / "fixtures" / "averitec_dev.json.gz"))]


def labelled_pool(tmp_path, n_per_label=(46, 46, 18), with_media=12):
    """Originals with the demo's label mix; the first ``with_media`` of each label carry a photo of their own."""
    store = MediaStore(str(tmp_path / "media"))
    claims = []
    for label, n in zip(SCORES, n_per_label):
        for i in range(n):
            media = []
            if i < with_media:
                stored = store.put_image(jpeg(((37 * i + 11 * len(claims)) % 256, (91 * i) % 256, (13 * len(claims)) % 256)))
                media = [Medium(medium_id=stored.sha256, kind="image", path=stored.path, phash=stored.phash)]
            text = f"{'<image:0> ' if media else ''}{REAL_CLAIMS[len(claims)]}"
            claims.append(claim(f"{label[:1]}{i:03d}-o", SCORES[label], text, media))
    return claims, store


def test_a_release_is_numbered_in_an_order_that_carries_no_label(tmp_path):
    claims, store = labelled_pool(tmp_path)
    chosen, report = select_release(claims, size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    assert [c.integrity.label for c in chosen][:3] == ["compromised"] * 3  # the selection itself lists by label
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    assert len(release_claims) == 100 and [c.id for c in release_claims] == list(range(1, 101))
    labels = [bin3(c.integrity.score) for c in release_claims]
    assert labels != sorted(labels, key=list(SCORES).index)
    folder = tmp_path / "release"
    folder.mkdir()
    write_release(folder, "2025Q3", release_claims, files, store, {"version": "t", "selection": report})
    written = json.loads((folder / "claims.json").read_text())["claims"]
    assert [c["id"] for c in written] == list(range(1, 101))  # claims.json is in id order
    orders = release_orders(written, bin3)
    assert all(orders[k]["n"] > 0 and "skipped" not in orders[k] for k in orders)
    assert all(abs(s["rho_z"]) <= 3.5 and abs(s["neighbours_z"]) <= 3.5 for s in orders.values())
    assert validate_release(folder, 100, 0.8) == []


def test_the_order_is_seeded_by_the_content_so_a_rebuild_gives_the_same_bytes(tmp_path):
    claims, store = labelled_pool(tmp_path)
    chosen, report = select_release(claims, size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    first = ordered_release(chosen, ORDER_KEY)
    again = ordered_release(list(reversed(chosen)), ORDER_KEY)  # the same content listed otherwise
    assert [c.model_dump() for c in first[1]] == [c.model_dump() for c in again[1]] and first[2] == again[2]
    assert first[3]["seed_commitment"] == again[3]["seed_commitment"]
    other = ordered_release(chosen[:-2], ORDER_KEY)  # other content, another draw
    assert other[3]["seed_commitment"] != first[3]["seed_commitment"]
    stranger = ordered_release(chosen, b"another maintainer's key 32 byte")  # same content, another key
    assert [c.text for c in stranger[1]] != [c.text for c in first[1]]
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        write_release(folder, "2025Q3", first[1], first[2], store, {"version": "t", "selection": report})
    for f in ("claims.json", "claims.parquet", "media.parquet", "veritas_2025_q3.zip", "README.md"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_media_ids_are_drawn_apart_from_claim_ids(tmp_path):
    claims, _ = labelled_pool(tmp_path, with_media=40)
    chosen, _ = select_release(claims, size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    _, release_claims, files, _ = ordered_release(chosen, ORDER_KEY)
    pairs = sorted((c.id, m.id) for c in release_claims for m in c.media)
    media_in_claim_order = [m for _, m in pairs]
    assert media_in_claim_order != sorted(media_in_claim_order)  # not numbered by first appearance
    assert sorted(mid for mid, _, _ in files) == list(range(1, len(files) + 1))


def sorted_release(tmp_path, key) -> tuple:
    """A release written the way the old writer did: claims numbered in the selection's (label) order."""
    claims, store = labelled_pool(tmp_path, with_media=30)
    chosen, report = select_release(claims, size=100, media_share=0.8, similarity=92, key=ORDER_KEY)
    release_claims, files = to_release_claims(chosen, ORDER_KEY)
    folder = tmp_path / "release"
    folder.mkdir()
    write_release(folder, "2025Q3", release_claims, files, store, {"version": "t", "selection": report})
    data = json.loads((folder / "claims.json").read_text())
    data["claims"].sort(key=key)
    return folder, data


def test_a_release_sorted_by_label_is_refused(tmp_path):
    folder, data = sorted_release(tmp_path, key=lambda c: c["integrity"]["score"])
    for new_id, c in enumerate(data["claims"], 1):  # ids follow the label, as in the demo's release before the fix
        c["id"] = new_id
    (folder / "claims.json").write_text(json.dumps(data))
    problems = validate_release(folder, 100, 0.8)
    assert any(p.startswith("file_order: spearman_rho") for p in problems), problems
    assert any(p.startswith("claim_ids: same_label_neighbours") for p in problems), problems


def test_a_release_whose_file_order_alone_carries_the_label_is_refused(tmp_path):
    folder, data = sorted_release(tmp_path, key=lambda c: bin3(c["integrity"]["score"]))  # ids stay random
    (folder / "claims.json").write_text(json.dumps(data))
    problems = validate_release(folder, 100, 0.8)
    assert any(p.startswith("file_order:") for p in problems) and not any(p.startswith("claim_ids:") for p in problems)


def test_media_ids_that_follow_the_label_are_refused(tmp_path):
    folder, data = sorted_release(tmp_path, key=lambda c: c["id"])
    media = sorted((c["integrity"]["score"], c["id"], i) for c in data["claims"] for i, _ in enumerate(c["media"]))
    by_claim = {c["id"]: c for c in data["claims"]}
    renumber = {}
    for new_id, (_, cid, i) in enumerate(media, 1):
        m = by_claim[cid]["media"][i]
        renumber[m["file_path"]] = f"images/{new_id}.jpg"
        m["id"], m["file_path"] = new_id, f"images/{new_id}.jpg"
        by_claim[cid]["text"] = by_claim[cid]["text"].replace("<image:", "<img:")  # references checked elsewhere
    moved = tmp_path / "moved"
    shutil.copytree(folder / "images", moved)
    for old, new in renumber.items():
        shutil.copyfile(moved / old.removeprefix("images/"), folder / new)
    (folder / "claims.json").write_text(json.dumps(data))
    problems = validate_release(folder, 100, 0.8)
    assert any(p.startswith("media_ids:") for p in problems), problems
    assert not any(p.startswith(("file_order:", "claim_ids:")) for p in problems), problems


def test_order_statistics_of_a_shuffle_stay_within_the_limit_and_tiny_releases_pass():
    rng = random.Random(7)
    labels = ["compromised"] * 418 + ["intact"] * 418 + ["unknown"] * 164
    flagged = 0
    for _ in range(40):
        rng.shuffle(labels)
        s = order_statistics([SCORES[x] for x in labels], labels)
        flagged += abs(s["rho_z"]) > 3.5 or abs(s["neighbours_z"]) > 3.5
    assert flagged <= 1  # ~0.1% each: a shuffle passes
    blocks = sorted(labels)
    s = order_statistics([SCORES[x] for x in blocks], blocks)
    assert s["neighbours_z"] > 20
    assert "skipped" in order_statistics([1.0, -1.0], ["intact", "compromised"])
