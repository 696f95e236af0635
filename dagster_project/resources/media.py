"""Media handling: sniffing, image normalisation, video probing/sampling, a content-addressed store
and perceptual-hash near-duplicate grouping. Plain functions only (no Dagster)."""

import hashlib
import io
import json
import math
import os
import subprocess
import tempfile
import threading
from dataclasses import asdict, dataclass

import imagehash
import imageio_ffmpeg
from PIL import Image, ImageOps

# Refuse anything above ~64 MP before decoding; real news photos are far below this.
MAX_IMAGE_PIXELS = 64_000_000
JPEG_QUALITY = 90
IMAGES_REMEMBERED = 65_536  # downloaded images a store knows it stored (put_image), the oldest forgotten first
# Per-ffmpeg-call wall clock cap so one hostile file cannot hang a run.
FFMPEG_TIMEOUT_S = 300
# Input protocols ffmpeg may open: local files only, so playlists inside a file cannot reach the network.
_FFMPEG_INPUT_GUARD = ["-protocol_whitelist", "file,pipe"]

# ISO-BMFF major/compatible brands that denote still images (HEIF/AVIF), not videos.
_BMP_DIB_SIZES = {12, 16, 40, 52, 56, 64, 108, 124}  # known BITMAP*HEADER sizes; "BM" alone is too weak
_IMAGE_BRANDS = {b"avif", b"avis", b"heic", b"heix", b"heim", b"heis", b"mif1", b"msf1"}


class MediaError(Exception):
    """A medium was refused; `code` is a short machine-readable reason (e.g. "not_media", "too_long")."""

    def __init__(self, code: str, detail: str = ""):
        super().__init__(f"{code}: {detail}" if detail else code)
        self.code = code
        self.detail = detail


@dataclass(frozen=True)
class StoredMedium:
    sha256: str
    kind: str  # "image" | "video"
    path: str  # relative path in the media store
    width: int
    height: int
    bytes: int
    phash: str
    duration_s: float | None = None
    frame_paths: tuple[str, ...] = ()


# --------------------------------------------------------------------------- sniffing


def _ftyp_brands(data: bytes) -> list[bytes] | None:
    """Major + compatible brands of an ISO-BMFF file, or None when there is no leading ftyp box."""
    if len(data) < 12 or data[4:8] != b"ftyp":
        return None
    size = int.from_bytes(data[0:4], "big")
    end = min(len(data), max(size, 16))
    brands = [data[8:12]]
    brands += [data[i : i + 4] for i in range(16, end - 3, 4)]
    return brands


def sniff_kind(data: bytes, content_type: str = "") -> str | None:
    """"image", "video" or None from magic bytes; content_type only settles ambiguous ISO-BMFF files."""
    head = data[:64]
    if head.startswith(b"\xff\xd8\xff"):
        return "image"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image"
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP":
        return "image"
    if head.startswith(b"BM") and len(head) >= 18 and int.from_bytes(head[14:18], "little") in _BMP_DIB_SIZES:
        return "image"
    if head.startswith(b"\x1a\x45\xdf\xa3"):  # EBML header: WebM / Matroska
        return "video"
    brands = _ftyp_brands(head)
    if brands is not None:
        hint = content_type.split(";")[0].strip().lower()
        if brands[0] in _IMAGE_BRANDS or (hint.startswith("image/") and any(b in _IMAGE_BRANDS for b in brands)):
            return "image"
        return "video"
    return None


def _is_mp4(data: bytes) -> bool:
    """ISO-BMFF that is not QuickTime: kept as-is, everything else gets transcoded."""
    brands = _ftyp_brands(data[:64])
    return brands is not None and brands[0] != b"qt  " and brands[0] not in _IMAGE_BRANDS


# --------------------------------------------------------------------------- images


def _flatten_to_rgb(im: Image.Image) -> Image.Image:
    if im.mode == "P" and "transparency" in im.info:
        im = im.convert("RGBA")
    if im.mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        im = im.convert("RGBA")
        bg = Image.new("RGB", im.size, (255, 255, 255))
        bg.paste(im, mask=im.getchannel("A"))
        return bg
    if im.mode in ("I;16", "I;16B", "I;16L", "I"):
        # Scale 16/32-bit greyscale into 8 bits instead of clipping it to white.
        im = im.point(lambda v: v / 256).convert("L")
    return im.convert("RGB") if im.mode != "RGB" else im


def normalize_image(data: bytes, max_side: int = 2048) -> tuple[bytes, int, int]:
    """Decode, flatten to RGB on white, downscale to max_side and re-encode as JPEG q90 -> (jpeg, w, h)."""
    if not data:
        raise MediaError("not_image", "empty input")
    try:
        with Image.open(io.BytesIO(data)) as probe:
            w, h = probe.size
            if w <= 0 or h <= 0 or w * h > MAX_IMAGE_PIXELS:
                raise MediaError("decompression_bomb", f"{w}x{h} exceeds {MAX_IMAGE_PIXELS} pixels")
            probe.verify()
        with Image.open(io.BytesIO(data)) as im:
            if im.format == "JPEG":
                im.draft("RGB", (max_side, max_side))  # decode big JPEGs at reduced scale directly
            im.load()
            im = ImageOps.exif_transpose(im)
            im = _flatten_to_rgb(im)
    except MediaError:
        raise
    except Image.DecompressionBombError as exc:
        raise MediaError("decompression_bomb", str(exc)) from exc
    except Exception as exc:  # Pillow raises many types (OSError, SyntaxError, ValueError...)
        raise MediaError("not_image", f"{type(exc).__name__}: {exc}") from exc
    if max(im.size) > max_side:
        im.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    out = io.BytesIO()
    im.save(out, format="JPEG", quality=JPEG_QUALITY, optimize=True)
    return out.getvalue(), im.width, im.height


def image_phash(jpeg: bytes) -> str:
    with Image.open(io.BytesIO(jpeg)) as im:
        return str(imagehash.phash(im))


# --------------------------------------------------------------------------- videos


def _run_ffmpeg(args: list[str], timeout: float = FFMPEG_TIMEOUT_S) -> bytes:
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-nostdin", "-loglevel", "error", *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        raise MediaError("ffmpeg_timeout", " ".join(args[-3:])) from exc
    if proc.returncode != 0:
        raise MediaError("not_video", proc.stderr.decode("utf-8", "replace").strip()[-500:])
    return proc.stdout


def probe_video(path: str) -> dict:
    """{duration_s, width, height, fps} of a video file; MediaError("not_video") when ffmpeg cannot read it."""
    if not os.path.isfile(path):
        raise MediaError("not_video", f"no such file: {path}")
    gen = imageio_ffmpeg.read_frames(path, input_params=list(_FFMPEG_INPUT_GUARD))
    try:
        meta = next(gen)
    except Exception as exc:  # imageio-ffmpeg raises IOError/RuntimeError/StopIteration on bad input
        raise MediaError("not_video", f"{type(exc).__name__}: {exc}") from exc
    finally:
        gen.close()
    size = meta.get("size") or meta.get("source_size")
    if not size or not size[0] or not size[1]:
        raise MediaError("not_video", "no video stream")
    width, height = int(size[0]), int(size[1])
    if int(meta.get("rotate") or 0) in (90, 270):  # ffmpeg autorotates decoded frames
        width, height = height, width
    fps = float(meta.get("fps") or 0.0)
    duration = float(meta.get("duration") or 0.0)
    if not duration or math.isnan(duration) or math.isinf(duration):
        # Container lacks a duration (e.g. streamed WebM): decode once to measure it.
        try:
            nframes, duration = imageio_ffmpeg.count_frames_and_secs(path)
        except Exception as exc:
            raise MediaError("not_video", f"cannot measure duration: {exc}") from exc
        if not fps and duration:
            fps = nframes / duration
    return {"duration_s": float(duration), "width": width, "height": height, "fps": fps}


def _grab_frame(path: str, t: float) -> bytes:
    return _run_ffmpeg(
        [*_FFMPEG_INPUT_GUARD, "-ss", f"{t:.3f}", "-i", path, "-map", "0:v:0", "-frames:v", "1",
         "-f", "image2pipe", "-vcodec", "png", "pipe:1"],
        timeout=60,
    )


def sample_frames(path: str, n: int = 5, duration_s: float | None = None) -> list[bytes]:
    """n JPEG frames (normalised like images) at the centres of n equal slices of the video."""
    if n <= 0:
        return []
    if duration_s is None:
        duration_s = probe_video(path)["duration_s"]
    frames = []
    for i in range(n):
        t = duration_s * (i + 0.5) / n
        png = _grab_frame(path, t)
        if not png and t > 0:
            # Seeking near a badly indexed end can yield nothing; back off one slice and retry.
            png = _grab_frame(path, max(0.0, t - duration_s / n))
        if not png:
            raise MediaError("not_video", f"no frame decodable at {t:.2f}s")
        jpeg, _, _ = normalize_image(png)
        frames.append(jpeg)
    return frames


def _transcode_to_mp4(src: str, dst: str) -> None:
    # Fixed threads and bitexact flags keep the output (and so its sha256) reproducible.
    _run_ffmpeg(
        [*_FFMPEG_INPUT_GUARD, "-i", src, "-map", "0:v:0", "-map", "0:a:0?", "-map_metadata", "-1",
         "-c:v", "libx264", "-preset", "veryfast", "-crf", "23", "-pix_fmt", "yuv420p", "-threads", "2",
         "-vf", "scale=trunc(iw/2)*2:trunc(ih/2)*2", "-c:a", "aac", "-b:a", "128k",
         "-fflags", "+bitexact", "-flags:v", "+bitexact", "-flags:a", "+bitexact",
         "-movflags", "+faststart", "-f", "mp4", "-y", dst]
    )


# --------------------------------------------------------------------------- store


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MediaStore:
    """Content-addressed media store on a local directory; all store I/O goes through _write_bytes/_read_bytes."""

    def __init__(self, root: str, max_video_bytes: int = 128 * 1024 * 1024, max_video_seconds: float = 300,
                 frames_per_video: int = 5):
        self.root = os.path.abspath(root)
        self.max_video_bytes = max_video_bytes
        self.max_video_seconds = max_video_seconds
        self.frames_per_video = frames_per_video
        self._images: dict[str, StoredMedium] = {}  # sha256 of an image's downloaded bytes -> what they stored as
        self._images_lock = threading.Lock()

    # -- the only two methods that touch the store (an S3 backend overrides these) --
    def _write_bytes(self, rel_path: str, data: bytes) -> None:
        target = self.path(rel_path)
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _read_bytes(self, rel_path: str) -> bytes:
        """Raises FileNotFoundError when absent (an S3 backend must map NoSuchKey to it)."""
        with open(self.path(rel_path), "rb") as fh:
            return fh.read()

    # -- public API --
    def path(self, rel_path: str) -> str:
        full = os.path.abspath(os.path.join(self.root, rel_path))
        if os.path.commonpath([full, self.root]) != self.root:
            raise ValueError(f"path escapes the media store: {rel_path!r}")
        return full

    def read(self, rel_path: str) -> bytes:
        return self._read_bytes(rel_path)

    def put(self, data: bytes, content_type: str = "") -> StoredMedium:
        kind = sniff_kind(data, content_type)
        if kind == "image":
            return self.put_image(data)
        if kind == "video":
            return self.put_video(data)
        raise MediaError("not_media", f"unrecognised content (content-type {content_type!r})")

    def put_image(self, data: bytes) -> StoredMedium:
        """The image normalized and stored. Bytes this store stored before are not decoded, encoded, hashed and
        written again (a quarter's appearances download the same file many times: 2,463 images of 800 claims were
        1,606 files): normalizing is a function of the bytes, so it gives what it gave then."""
        source = _sha256(data)
        with self._images_lock:
            known = self._images.get(source)
        if known is not None:
            return known
        stored = self._store_jpeg(*normalize_image(data))
        with self._images_lock:
            self._images[source] = stored
            while len(self._images) > IMAGES_REMEMBERED:
                del self._images[next(iter(self._images))]  # the oldest first
        return stored

    def _store_jpeg(self, jpeg: bytes, width: int, height: int) -> StoredMedium:
        sha = _sha256(jpeg)
        rel = f"images/{sha[:2]}/{sha}.jpg"
        self._write_bytes(rel, jpeg)  # same name => same content, so rewriting is harmless
        return StoredMedium(sha256=sha, kind="image", path=rel, width=width, height=height, bytes=len(jpeg),
                            phash=image_phash(jpeg))

    def _load_video_record(self, sha: str) -> StoredMedium | None:
        try:
            raw = self._read_bytes(f"videos/{sha[:2]}/{sha}.json")
        except FileNotFoundError:
            return None
        rec = json.loads(raw)
        rec["frame_paths"] = tuple(rec["frame_paths"])
        return StoredMedium(**rec)

    def put_video(self, data: bytes) -> StoredMedium:
        if len(data) > self.max_video_bytes:
            raise MediaError("too_large", f"{len(data)} bytes > {self.max_video_bytes}")
        if sniff_kind(data) != "video":
            raise MediaError("not_video", "no video container signature")
        if _is_mp4(data):
            known = self._load_video_record(_sha256(data))
            if known is not None:
                return known
        with tempfile.TemporaryDirectory(prefix="veritas-media-") as scratch:
            src = os.path.join(scratch, "input")
            with open(src, "wb") as fh:
                fh.write(data)
            info = probe_video(src)
            if info["duration_s"] > self.max_video_seconds:
                raise MediaError("too_long", f"{info['duration_s']:.1f}s > {self.max_video_seconds}s")
            if _is_mp4(data):
                mp4, mp4_path = data, src
            else:
                mp4_path = os.path.join(scratch, "out.mp4")
                _transcode_to_mp4(src, mp4_path)
                with open(mp4_path, "rb") as fh:
                    mp4 = fh.read()
                known = self._load_video_record(_sha256(mp4))
                if known is not None:
                    return known
                info = probe_video(mp4_path)
            frames = sample_frames(mp4_path, self.frames_per_video, duration_s=info["duration_s"])
        sha = _sha256(mp4)
        stored_frames = []
        for jpeg in frames:
            with Image.open(io.BytesIO(jpeg)) as im:
                fw, fh_ = im.size
            stored_frames.append(self._store_jpeg(jpeg, fw, fh_))
        rel = f"videos/{sha[:2]}/{sha}.mp4"
        self._write_bytes(rel, mp4)
        medium = StoredMedium(
            sha256=sha, kind="video", path=rel, width=info["width"], height=info["height"], bytes=len(mp4),
            phash=stored_frames[len(stored_frames) // 2].phash if stored_frames else "",
            duration_s=round(info["duration_s"], 3), frame_paths=tuple(f.path for f in stored_frames),
        )
        # Sidecar written last: its presence means the video and all its frames are complete.
        self._write_bytes(f"videos/{sha[:2]}/{sha}.json", json.dumps(asdict(medium)).encode())
        return medium


# --------------------------------------------------------------------------- near duplicates


def phash_distance(a_hex: str, b_hex: str) -> int:
    """Hamming distance between two hex perceptual hashes of equal length."""
    return imagehash.hex_to_hash(a_hex) - imagehash.hex_to_hash(b_hex)


