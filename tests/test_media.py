import io
import os
import struct
import subprocess
import zlib

import imageio_ffmpeg
import numpy as np
import pytest
from PIL import Image, ImageDraw

from assets.rules.near_duplicates import near_duplicate_groups
from dagster_project.resources.media import (
    MediaError,
    MediaStore,
    StoredMedium,
    normalize_image,
    phash_distance,
    probe_video,
    sample_frames,
    sniff_kind,
)

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255)]


def _encode(im: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _scene(size=(640, 480), seed=0) -> Image.Image:
    """A structured picture (shapes + gradient), so perceptual hashes are meaningful."""
    rng = np.random.default_rng(seed)
    w, h = size
    grad = np.linspace(0, 255, w, dtype=np.uint8)[None, :].repeat(h, 0)
    arr = np.stack([grad, grad[:, ::-1], np.full((h, w), 90, np.uint8)], axis=-1)
    im = Image.fromarray(arr, "RGB")
    draw = ImageDraw.Draw(im)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, w - 40)), int(rng.integers(0, h - 40))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        draw.rectangle([x0, y0, x1, y1], fill=tuple(int(c) for c in rng.integers(0, 256, 3)))
    return im


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


@pytest.fixture(scope="module")
def mp4_path(tmp_path_factory) -> str:
    """2 s, 160x120, 10 fps H.264 MP4 whose colour changes every 0.4 s."""
    path = str(tmp_path_factory.mktemp("vid") / "clip.mp4")
    writer = imageio_ffmpeg.write_frames(path, (160, 120), fps=10, codec="libx264", macro_block_size=8,
                                         ffmpeg_log_level="error")
    writer.send(None)
    for i in range(20):
        frame = np.zeros((120, 160, 3), np.uint8)
        frame[:] = COLOURS[i // 4]
        frame[10 + 4 * i : 30 + 4 * i, 20:60] = 255  # moving white block
        writer.send(frame.tobytes())
    writer.close()
    return path


# --------------------------------------------------------------------------- sniffing


def test_sniff_kind_uses_magic_bytes_over_content_type():
    png = _encode(Image.new("RGB", (4, 4)), "PNG")
    assert sniff_kind(png) == "image"
    assert sniff_kind(png, "video/mp4") == "image"
    assert sniff_kind(_encode(Image.new("RGB", (4, 4)), "JPEG")) == "image"
    assert sniff_kind(_encode(Image.new("RGB", (4, 4)), "GIF")) == "image"
    assert sniff_kind(_encode(Image.new("RGB", (4, 4)), "WEBP")) == "image"
    assert sniff_kind(_encode(Image.new("RGB", (4, 4)), "BMP")) == "image"
    assert sniff_kind(b"\x00\x00\x00\x18ftypmp42\x00\x00\x00\x00mp42isom") == "video"
    assert sniff_kind(b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00qt  ") == "video"
    assert sniff_kind(b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01") == "video"
    assert sniff_kind(b"\x00\x00\x00\x1cftypavif\x00\x00\x00\x00avifmif1miaf") == "image"
    assert sniff_kind(b"<!doctype html><html><body>hi</body></html>", "image/jpeg") is None
    assert sniff_kind(b"") is None


# --------------------------------------------------------------------------- images


def test_png_with_alpha_flattens_on_white_jpeg():
    im = Image.new("RGBA", (300, 200), (255, 0, 0, 0))  # fully transparent red
    ImageDraw.Draw(im).rectangle([0, 0, 99, 199], fill=(0, 0, 255, 255))
    jpeg, w, h = normalize_image(_encode(im, "PNG"))
    assert (w, h) == (300, 200)
    out = Image.open(io.BytesIO(jpeg))
    assert out.format == "JPEG" and out.mode == "RGB" and out.size == (300, 200)
    r, g, b = out.getpixel((250, 100))
    assert min(r, g, b) >= 245  # transparent area became white, not red/black
    r, g, b = out.getpixel((50, 100))
    assert b >= 230 and r <= 20 and g <= 20


def test_palette_gif_with_transparency_normalises():
    im = Image.new("P", (40, 30), 0)
    im.putpalette([0, 0, 0, 200, 10, 10] + [0] * 762)
    ImageDraw.Draw(im).rectangle([0, 0, 19, 29], fill=1)
    jpeg, w, h = normalize_image(_encode(im, "GIF", transparency=0))
    out = Image.open(io.BytesIO(jpeg))
    assert (w, h) == (40, 30) and out.format == "JPEG"
    assert min(out.getpixel((35, 15))) >= 240


def test_large_jpeg_is_downscaled_to_max_side():
    big = _encode(_scene((3000, 1500)), "JPEG", quality=95)
    jpeg, w, h = normalize_image(big)
    assert (w, h) == (2048, 1024)
    assert Image.open(io.BytesIO(jpeg)).size == (2048, 1024)
    small, w2, h2 = normalize_image(big, max_side=500)
    assert (w2, h2) == (500, 250)
    assert jpeg.startswith(b"\xff\xd8\xff") and small.startswith(b"\xff\xd8\xff")


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"<!DOCTYPE html><html><head><title>x</title></head><body>not an image</body></html>",
        os.urandom(4096),
        b"\x89PNG\r\n\x1a\n" + b"\x00" * 40,
    ],
    ids=["empty", "html", "garbage", "png-magic-junk"],
)
def test_non_images_are_refused(data):
    with pytest.raises(MediaError) as err:
        normalize_image(data)
    assert err.value.code == "not_image"


def test_truncated_jpeg_is_refused():
    data = _encode(_scene((400, 300)), "JPEG")
    with pytest.raises(MediaError) as err:
        normalize_image(data[: len(data) // 3])
    assert err.value.code == "not_image"


def test_decompression_bomb_header_is_refused():
    # A tiny PNG whose header claims 100000 x 100000 pixels.
    ihdr = struct.pack(">IIBBBBB", 100_000, 100_000, 8, 2, 0, 0, 0)
    bomb = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", ihdr)
            + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + _png_chunk(b"IEND", b""))
    assert len(bomb) < 200
    with pytest.raises(MediaError) as err:
        normalize_image(bomb)
    assert err.value.code == "decompression_bomb"


# --------------------------------------------------------------------------- videos


def test_probe_video(mp4_path):
    info = probe_video(mp4_path)
    assert info["width"] == 160 and info["height"] == 120
    assert info["duration_s"] == pytest.approx(2.0, abs=0.3)
    assert info["fps"] == pytest.approx(10.0, abs=0.01)


def test_sample_frames_gives_five_distinct_jpegs(mp4_path):
    frames = sample_frames(mp4_path, 5)
    assert len(frames) == 5
    assert len(set(frames)) == 5
    for jpeg, colour in zip(frames, COLOURS):
        im = Image.open(io.BytesIO(jpeg))
        assert im.format == "JPEG" and im.size == (160, 120)
        # Corner pixel far from the moving block shows the segment's colour.
        assert np.abs(np.array(im.getpixel((150, 110))) - np.array(colour)).max() < 40


def test_not_a_video_is_refused(tmp_path):
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + os.urandom(2000))
    with pytest.raises(MediaError):
        probe_video(str(bad))
    with pytest.raises(MediaError):
        sample_frames(str(bad), 5, duration_s=2.0)


def test_put_video_stores_mp4_and_frames(tmp_path, mp4_path):
    store = MediaStore(str(tmp_path / "store"))
    data = open(mp4_path, "rb").read()
    m = store.put(data, "video/mp4")
    assert m.kind == "video" and m.path.startswith("videos/") and m.path.endswith(".mp4")
    assert store.read(m.path) == data  # MP4 kept byte for byte
    assert (m.width, m.height, m.bytes) == (160, 120, len(data))
    assert m.duration_s == pytest.approx(2.0, abs=0.3)
    assert len(m.frame_paths) == 5 and len(set(m.frame_paths)) == 5
    for p in m.frame_paths:
        assert p.startswith("images/") and Image.open(store.path(p)).format == "JPEG"
    again = store.put_video(data)
    assert again == m


def test_put_video_transcodes_webm(tmp_path, mp4_path):
    webm = str(tmp_path / "clip.webm")
    subprocess.run([imageio_ffmpeg.get_ffmpeg_exe(), "-loglevel", "error", "-i", mp4_path, "-c:v", "libvpx", "-b:v", "200k",
                    "-y", webm], check=True)
    data = open(webm, "rb").read()
    assert sniff_kind(data) == "video"
    store = MediaStore(str(tmp_path / "store"), frames_per_video=3)
    m = store.put(data)
    stored = store.read(m.path)
    assert stored[4:8] == b"ftyp" and m.path.endswith(".mp4")
    assert probe_video(store.path(m.path))["width"] == 160
    assert len(m.frame_paths) == 3
    assert store.put(data).sha256 == m.sha256


def test_video_caps(tmp_path, mp4_path):
    data = open(mp4_path, "rb").read()
    with pytest.raises(MediaError) as err:
        MediaStore(str(tmp_path / "a"), max_video_bytes=len(data) - 1).put_video(data)
    assert err.value.code == "too_large"
    with pytest.raises(MediaError) as err:
        MediaStore(str(tmp_path / "b"), max_video_seconds=1.0).put_video(data)
    assert err.value.code == "too_long"
    assert not os.path.exists(tmp_path / "b" / "videos")  # nothing stored on refusal


# --------------------------------------------------------------------------- store


def test_put_image_is_idempotent(tmp_path):
    store = MediaStore(str(tmp_path))
    data = _encode(_scene((800, 600)), "PNG")
    a = store.put(data, "image/png")
    b = store.put(data)
    assert isinstance(a, StoredMedium) and a == b
    assert a.kind == "image" and a.path == f"images/{a.sha256[:2]}/{a.sha256}.jpg"
    assert (a.width, a.height) == (800, 600) and a.duration_s is None and a.frame_paths == ()
    files = [os.path.join(d, f) for d, _, fs in os.walk(tmp_path) for f in fs]
    assert files == [store.path(a.path)]  # one file, no temp leftovers
    assert os.path.getsize(files[0]) == a.bytes
    assert len(a.phash) == 16


def test_put_image_normalizes_each_downloaded_file_once(tmp_path, monkeypatch):
    """Bytes the store stored before give what they gave then without being decoded again; other bytes of the same
    picture are normalized; a store that forgot them (the oldest go first) normalizes them again, to the same."""
    import dagster_project.resources.media as media

    store, calls = MediaStore(str(tmp_path)), []
    normalize = media.normalize_image
    monkeypatch.setattr(media, "normalize_image", lambda data: calls.append(data) or normalize(data))
    png, jpeg = _encode(_scene((800, 600)), "PNG"), _encode(_scene((800, 600)), "JPEG", quality=70)
    first = store.put(png, "image/png")
    assert store.put(png) == first and store.put_image(png) == first and len(calls) == 1
    assert store.put(jpeg).phash and len(calls) == 2
    monkeypatch.setattr(media, "IMAGES_REMEMBERED", 1)
    store.put(_encode(_scene((300, 200), seed=1), "PNG"))
    assert store.put(png) == first and len(calls) == 4


def test_put_refuses_non_media_and_path_escape(tmp_path):
    store = MediaStore(str(tmp_path))
    with pytest.raises(MediaError) as err:
        store.put(b"<html><body>cookie wall</body></html>", "image/jpeg")
    assert err.value.code == "not_media"
    with pytest.raises(ValueError):
        store.path("../outside.jpg")


# --------------------------------------------------------------------------- near duplicates


def test_near_duplicate_groups(tmp_path):
    store = MediaStore(str(tmp_path))
    original = _scene((640, 480), seed=1)
    a = store.put(_encode(original, "JPEG", quality=92))
    b = store.put(_encode(original.resize((500, 375)), "JPEG", quality=60))  # resized + recompressed copy
    c = store.put(_encode(_scene((640, 480), seed=2), "JPEG", quality=92))
    assert a.sha256 != b.sha256
    assert phash_distance(a.phash, b.phash) <= 6
    assert phash_distance(a.phash, c.phash) > 6
    groups = near_duplicate_groups([("a", a.phash), ("c", c.phash), ("b", b.phash)])
    assert groups == [["a", "b"], ["c"]]


def test_near_duplicate_groups_single_link_and_validation():
    h0 = "0000000000000000"
    h1 = "000000000000003f"  # 6 bits from h0
    h2 = "0000000000000fff"  # 6 bits from h1, 12 from h0
    assert phash_distance(h0, h2) == 12
    assert near_duplicate_groups([("x", h0), ("y", h1), ("z", h2)]) == [["x", "y", "z"]]
    assert near_duplicate_groups([("x", h0), ("z", h2)]) == [["x"], ["z"]]
    assert near_duplicate_groups([]) == []
    with pytest.raises(ValueError):
        near_duplicate_groups([("x", h0), ("y", "abc")])
