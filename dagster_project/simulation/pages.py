"""Web pages and media as fact-checkers, social platforms and web archives serve them, and the WARC that holds
them: the demo snapshot (demo/build_snapshot.py) and the simulated quarter (quarter.py) are both drawn with these.
Images are deterministic JPEGs, videos byte-stable H.264 MP4s, and every WARC record gets a fixed date and id."""

import hashlib
import html
import io
import json
import random
import tempfile
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import imageio_ffmpeg
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

# Fixed crawl clock: every WARC record gets CRAWL_START + n seconds, so the archive is byte-stable.
CRAWL_START = datetime(2026, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


# UUID namespace for WARC-Record-IDs derived from (type, uri), again for byte-stable output.
RECORD_NS = uuid.UUID("6f1c2b1e-5d7a-4c8e-9b0a-7e3f00c0ffee")


def _rng(seed):
    return random.Random(int(hashlib.sha256(seed.encode()).hexdigest()[:16], 16))


def font(size):
    return ImageFont.load_default(size=size)


def _gradient(rng, size):
    top = tuple(rng.randrange(30, 230) for _ in range(3))
    bottom = tuple(rng.randrange(30, 230) for _ in range(3))
    mask = Image.linear_gradient("L").resize(size)
    return Image.composite(Image.new("RGB", size, bottom), Image.new("RGB", size, top), mask)


def _jpeg(img, quality=80):
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, optimize=True)
    return buf.getvalue()


def photo(seed, label, size=(640, 427)):
    """A distinct 'photo': gradient sky, random shapes, a caption strip."""
    rng = _rng(seed)
    img = _gradient(rng, size)
    draw = ImageDraw.Draw(img)
    w, h = size
    for _ in range(rng.randrange(4, 8)):
        x0, y0 = rng.randrange(0, w - 60), rng.randrange(h // 4, h - 60)
        x1, y1 = x0 + rng.randrange(40, w // 2), y0 + rng.randrange(30, h // 2)
        fill = tuple(rng.randrange(0, 256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=fill)
    draw.rectangle([0, h - 44, w, h], fill=(0, 0, 0))
    draw.text((12, h - 38), label[:60], fill=(255, 255, 255), font=font(22))
    return img


def stamp(publisher, verdict, size=(640, 360)):
    """The publisher's own rating graphic: a rotated verdict stamp on its brand colour."""
    rng = _rng("stamp" + publisher)
    brand = tuple(rng.randrange(20, 120) for _ in range(3))
    img = Image.new("RGB", size, brand)
    draw = ImageDraw.Draw(img)
    draw.text((24, 20), publisher, fill=(255, 255, 255), font=font(34))
    box = Image.new("RGBA", (420, 130), (0, 0, 0, 0))
    bd = ImageDraw.Draw(box)
    bd.rectangle([4, 4, 415, 125], outline=(220, 30, 30), width=10)
    bd.text((30, 30), verdict.upper()[:12], fill=(220, 30, 30), font=font(64))
    box = box.rotate(-12, expand=True, resample=Image.BICUBIC)
    img.paste(box, ((size[0] - box.width) // 2, (size[1] - box.height) // 2 + 20), box)
    return img


def screenshot(post_img, author, text, size=(640, 560)):
    """A fact-checker's screenshot of the post: card chrome around the post's own picture."""
    img = Image.new("RGB", size, (245, 246, 248))
    draw = ImageDraw.Draw(img)
    draw.rectangle([20, 20, size[0] - 20, size[1] - 20], fill=(255, 255, 255), outline=(200, 200, 205))
    draw.ellipse([36, 34, 76, 74], fill=(120, 140, 180))
    draw.text((88, 40), author[:40], fill=(20, 20, 20), font=font(20))
    draw.text((36, 84), text[:58], fill=(40, 40, 40), font=font(16))
    inner = post_img.resize((size[0] - 72, int((size[0] - 72) * post_img.height / post_img.width)))
    img.paste(inner, (36, 112))
    draw.line([30, 112, size[0] - 30, 112 + inner.height], fill=(230, 20, 20), width=9)
    return img


def video_mp4(seed, label):
    """A 3 s, 320x240, 10 fps H.264 clip with a moving shape; byte-stable encoder flags."""
    rng = _rng(seed)
    bg = np.array([rng.randrange(20, 200) for _ in range(3)], np.uint8)
    fg = tuple(rng.randrange(0, 256) for _ in range(3))
    tmp = tempfile.TemporaryDirectory(prefix="veritas-clip-")
    path = Path(tmp.name) / "clip.mp4"
    writer = imageio_ffmpeg.write_frames(
        str(path), (320, 240), fps=10, codec="libx264", pix_fmt_out="yuv420p", macro_block_size=16,
        output_params=["-threads", "1", "-x264-params", "threads=1", "-fflags", "+bitexact",
                       "-flags:v", "+bitexact", "-map_metadata", "-1", "-movflags", "+faststart"],
        ffmpeg_log_level="error")
    writer.send(None)
    for i in range(30):
        frame = Image.fromarray(np.tile(bg, (240, 320, 1)))
        d = ImageDraw.Draw(frame)
        x = 10 + i * 9
        d.ellipse([x, 80 + (i % 10) * 4, x + 60, 140 + (i % 10) * 4], fill=fg)
        d.text((8, 8), f"{label} {i:02d}", fill=(255, 255, 255), font=font(14))
        writer.send(np.asarray(frame).tobytes())
    writer.close()
    data = path.read_bytes()
    tmp.cleanup()
    return data


class Archive:
    """Collects HTTP responses in insertion order and writes them as one gzipped WARC."""

    def __init__(self):
        self.records = []  # (url, status, reason, headers, body)
        self.images, self.videos = [], []

    def add(self, url, body, ctype, status=200, reason="OK", extra=()):
        assert all(r[0] != url for r in self.records), url
        self.records.append((url, status, reason, [("Content-Type", ctype), *extra], body))

    def html(self, url, text, status=200, reason="OK"):
        self.add(url, text.encode("utf-8"), "text/html; charset=utf-8", status, reason)

    def redirect(self, url, location, status=301, reason="Moved Permanently"):
        self.add(url, b"", "text/html; charset=utf-8", status, reason, [("Location", location)])

    def jpeg(self, url, img):
        if any(r[0] == url for r in self.records):
            return
        data = img if isinstance(img, bytes) else _jpeg(img)
        self.add(url, data, "image/jpeg")
        self.images.append(url)

    def mp4(self, url, data):
        self.add(url, data, "video/mp4")
        self.videos.append(url)

    def write(self, path):
        with open(path, "wb") as fh:
            writer = WARCWriter(fh, gzip=True)
            info = writer.create_warcinfo_record(
                "pages.warc.gz", {"software": "veritas demo/build_snapshot.py", "format": "WARC File Format 1.1",
                                  "description": "veritas offline demo snapshot"})
            info.rec_headers.replace_header("WARC-Date", _warc_date(CRAWL_START))
            info.rec_headers.replace_header("WARC-Record-ID", _record_id("warcinfo", "pages.warc.gz"))
            writer.write_record(info)
            for n, (url, status, reason, headers, body) in enumerate(self.records, start=1):
                when = CRAWL_START + timedelta(seconds=n)
                http_headers = StatusAndHeaders(
                    f"{status} {reason}",
                    [*headers, ("Content-Length", str(len(body))),
                     ("Date", when.strftime("%a, %d %b %Y %H:%M:%S GMT")), ("Server", "demo-snapshot")],
                    protocol="HTTP/1.1")
                rec = writer.create_warc_record(
                    url, "response", payload=io.BytesIO(body), http_headers=http_headers,
                    warc_headers_dict={"WARC-Date": _warc_date(when), "WARC-Record-ID": _record_id("response", url)})
                writer.write_record(rec)


def _warc_date(dt):
    return dt.strftime("%Y-%m-%dT%H:%M:%SZ")


def _record_id(kind, url):
    return f"<urn:uuid:{uuid.uuid5(RECORD_NS, kind + ' ' + url)}>"


def esc(s):
    return html.escape(s, quote=True)


def site_of(url):
    return url.split("/")[0] + "//" + url.split("/")[2]


CHROME = {
    "en": dict(cookie="We use cookies to understand how readers use our site and to keep it secure. You can accept all cookies or choose which ones to allow.",
               accept="Accept all", settings="Cookie settings", nav=["Home", "Fact checks", "Health", "Politics", "About us", "Donate"],
               follow="Follow us", related="More fact checks", rights="All rights reserved.", privacy="Privacy policy",
               rating="Our rating", by="By the {org} team", share="Share this article", screenshot="Screenshot of the post, taken by {org}",
               stamp="{org} rating graphic", newsletter="Get our newsletter every Friday."),
    "fr": dict(cookie="Nous utilisons des cookies pour mesurer l'audience et sécuriser le site. Vous pouvez tout accepter ou paramétrer vos choix.",
               accept="Tout accepter", settings="Paramétrer", nav=["Accueil", "Vérifications", "Santé", "Politique", "Qui sommes-nous", "Contact"],
               follow="Suivez-nous", related="À lire aussi", rights="Tous droits réservés.", privacy="Politique de confidentialité",
               rating="Notre verdict", by="Par la rédaction de {org}", share="Partager cet article", screenshot="Capture d'écran de la publication, réalisée par {org}",
               stamp="Visuel de verdict de {org}", newsletter="Recevez notre lettre d'information chaque vendredi."),
    "es": dict(cookie="Usamos cookies propias y de terceros para analizar el tráfico y mejorar tu experiencia. Puedes aceptarlas todas o configurarlas.",
               accept="Aceptar todas", settings="Configurar", nav=["Inicio", "Verificaciones", "Salud", "Política", "Quiénes somos", "Hazte socio"],
               follow="Síguenos", related="Otras verificaciones", rights="Todos los derechos reservados.", privacy="Política de privacidad",
               rating="Nuestra calificación", by="Por el equipo de {org}", share="Comparte este artículo", screenshot="Captura de la publicación, hecha por {org}",
               stamp="Sello de calificación de {org}", newsletter="Recibe nuestro boletín cada viernes."),
    "tr": dict(cookie="Sitemizde deneyiminizi iyileştirmek ve trafiği ölçmek için çerezler kullanıyoruz. Tümünü kabul edebilir ya da ayarlarınızı seçebilirsiniz.",
               accept="Tümünü kabul et", settings="Çerez ayarları", nav=["Ana sayfa", "İncelemeler", "Sağlık", "Siyaset", "Hakkımızda", "Destek ol"],
               follow="Bizi takip edin", related="Diğer incelemeler", rights="Tüm hakları saklıdır.", privacy="Gizlilik politikası",
               rating="Sonuç", by="{org} ekibi", share="Bu yazıyı paylaş", screenshot="Paylaşımın ekran görüntüsü, {org} tarafından alındı",
               stamp="{org} değerlendirme görseli", newsletter="Bültenimize her cuma abone olun."),
}


METHOD = {
    "en": [
        "To check the claim we searched for the original source of the post, ran its picture through reverse image search engines and compared it with earlier versions shared online. We also read the official guidance that was in force when the post appeared.",
        "We traced the earliest copies of the message we could find, asked the people and institutions it names for comment, and checked the scientific literature on the subject. Where the post relied on a picture or a video, we looked for its first appearance.",
        "Our team compared the post with public statements from the health authorities, searched news archives for the event it describes, and looked at the account that first shared it. Several readers had sent us the same message through our tip line.",
    ],
    "fr": [
        "Pour vérifier cette affirmation, nous avons recherché la source originale de la publication, soumis les images à plusieurs moteurs de recherche inversée et consulté les déclarations officielles publiées à la même période.",
        "Nous avons retrouvé les premières versions du message, sollicité les personnes et les institutions citées et consulté la littérature scientifique disponible sur le sujet.",
    ],
    "es": [
        "Para verificar la afirmación buscamos el origen de la publicación, pasamos sus imágenes por buscadores inversos y revisamos los comunicados oficiales publicados en esas mismas fechas.",
        "Rastreamos las primeras versiones del mensaje, consultamos a las personas e instituciones mencionadas y revisamos la literatura científica disponible sobre el tema.",
    ],
    "tr": [
        "İddiayı doğrulamak için paylaşımın kaynağını araştırdık, görüntüleri tersine görsel arama motorlarında taradık ve aynı döneme ait haber arşivlerini inceledik.",
    ],
}


CONTEXT = {
    "en": [
        "Claims like this one spread quickly in the first months of the pandemic, when little was known about the new virus and many people were looking for simple explanations or cures. Health agencies repeatedly asked the public to rely on official sources and to check a message before forwarding it.",
        "Posts of this kind are often copied word for word between platforms and languages, so the same text can resurface weeks later with a new picture or a new name attached. Deleting the original post rarely stops the copies from circulating.",
        "Social media companies label some of these posts after a fact check, but screenshots and forwarded messages escape those labels. That is why we publish the evidence behind every rating, so readers can follow our reasoning step by step.",
    ],
    "fr": [
        "Ce type d'affirmation s'est propagé très vite pendant les premiers mois de la pandémie, alors que l'on savait encore peu de choses sur le virus. Les autorités sanitaires ont régulièrement appelé à vérifier une information avant de la partager.",
        "Les mêmes textes sont souvent copiés d'une plateforme à l'autre et traduits dans plusieurs langues, si bien qu'ils réapparaissent des semaines plus tard avec une nouvelle image ou un nouveau nom.",
    ],
    "es": [
        "Este tipo de mensajes se difundió con rapidez durante los primeros meses de la pandemia, cuando aún se sabía poco del nuevo virus. Las autoridades sanitarias pidieron en repetidas ocasiones consultar fuentes oficiales antes de reenviar un contenido.",
        "Los mismos textos suelen copiarse entre plataformas e idiomas, de modo que reaparecen semanas después con otra imagen u otro nombre. Borrar la publicación original rara vez detiene la circulación de las copias.",
    ],
    "tr": [
        "Bu tür iddialar salgının ilk aylarında, yeni virüs hakkında henüz çok az şey bilinirken hızla yayıldı. Sağlık otoriteleri vatandaşlardan bir içeriği paylaşmadan önce resmi kaynaklardan doğrulamalarını defalarca istedi. Aynı görüntüler farklı platformlarda ve dillerde, her seferinde yeni bir açıklamayla yeniden dolaşıma girebiliyor.",
    ],
}


LINK_SENTENCE = {
    "en": {"post": 'The post we checked can be seen <a href="{u}">here</a>.',
           "wayback": 'An <a href="{u}">archived copy</a> is kept in case it is deleted.',
           "archive": 'We saved <a href="{u}">a copy of the original content</a> before it could be removed.',
           "tco": 'The video was shared in <a href="{u}">this post</a>.'},
    "fr": {"post": 'La publication vérifiée est visible <a href="{u}">ici</a>.',
           "wayback": 'Une <a href="{u}">copie archivée</a> est conservée au cas où elle serait supprimée.',
           "archive": 'Nous avons <a href="{u}">archivé le contenu d\'origine</a> avant sa suppression.',
           "tco": 'La vidéo a été partagée dans <a href="{u}">cette publication</a>.'},
    "es": {"post": 'La publicación verificada puede verse <a href="{u}">aquí</a>.',
           "wayback": 'Guardamos una <a href="{u}">copia archivada</a> por si se elimina.',
           "archive": 'Guardamos <a href="{u}">una copia del contenido original</a> antes de que fuera eliminado.',
           "tco": 'El video se compartió en <a href="{u}">esta publicación</a>.'},
    "tr": {"post": 'İncelediğimiz paylaşım <a href="{u}">burada</a>.',
           "wayback": 'Paylaşımın <a href="{u}">arşivlenmiş kopyası</a> da mevcut.',
           "archive": 'Orijinal içeriğin <a href="{u}">arşiv kopyasını</a> aldık.',
           "tco": 'Video <a href="{u}">bu paylaşımla</a> yayıldı.'},
}


VERDICT = {
    "en": "Our rating is {rating}. {org} is a signatory of the International Fact-Checking Network's code of principles. If you think we have made a mistake, you can ask for a correction through our contact page.",
    "fr": "Notre verdict : {rating}. {org} est signataire du code de principes de l'International Fact-Checking Network. Si vous pensez que nous avons commis une erreur, vous pouvez demander une correction via notre page de contact.",
    "es": "Nuestra calificación: {rating}. {org} es signatario del código de principios de la International Fact-Checking Network. Si crees que nos hemos equivocado, puedes pedir una corrección en nuestra página de contacto.",
    "tr": "Sonuç: {rating}. {org}, Uluslararası Doğruluk Kontrolü Ağı'nın (IFCN) ilkeler bildirgesini imzalamıştır. Bir hata yaptığımızı düşünüyorsanız düzeltme talebinizi iletişim sayfamızdan iletebilirsiniz.",
}


def page_shell(lang, url, title, description, published, org, body, og_image, profiles, jsonld=None):
    c = CHROME[lang]
    site = site_of(url)
    nav = "".join(f'<li><a href="{site}/{i}/">{esc(n)}</a></li>' for i, n in enumerate(c["nav"]))
    follow = "".join(f'<li><a href="{p}" rel="me">{esc(p.split("/")[2])}</a></li>' for p in profiles)
    related = "".join(f'<li><a href="{site}/fact-checks/related-{i}/">{esc(t)}</a></li>'
                      for i, t in enumerate(["COVID-19", "5G", "Vaccines"]))
    ld = f'<script type="application/ld+json">{json.dumps(jsonld, ensure_ascii=False)}</script>' if jsonld else ""
    return f"""<!DOCTYPE html>
<html lang="{lang}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)} | {esc(org)}</title>
<meta name="description" content="{esc(description)}">
<link rel="canonical" href="{esc(url)}">
<meta property="og:type" content="article">
<meta property="og:site_name" content="{esc(org)}">
<meta property="og:title" content="{esc(title)}">
<meta property="og:url" content="{esc(url)}">
<meta property="og:image" content="{esc(og_image)}">
<meta property="article:published_time" content="{published}T09:30:00+00:00">
<link rel="stylesheet" href="{site}/static/css/site.min.css">
<script src="{site}/static/js/analytics.js" async></script>
{ld}
</head>
<body>
<div id="cookie-banner" class="cookie-consent" role="dialog"><p>{esc(c["cookie"])}</p><button type="button">{esc(c["accept"])}</button> <button type="button">{esc(c["settings"])}</button></div>
<header class="site-header"><a class="logo" href="{site}/">{esc(org)}</a><nav><ul>{nav}</ul></nav><form action="{site}/search/"><input type="search" name="q"></form></header>
<main>
<article class="fact-check">
<h1>{esc(title)}</h1>
<p class="byline">{esc(c["by"].format(org=org))} · <time datetime="{published}">{published}</time></p>
{body}
</article>
<aside class="share"><h2>{esc(c["share"])}</h2><ul><li><a href="https://www.facebook.com/sharer/sharer.php?u={esc(url)}">Facebook</a></li><li><a href="https://twitter.com/intent/tweet?url={esc(url)}">Twitter</a></li><li><a href="https://api.whatsapp.com/send?text={esc(url)}">WhatsApp</a></li></ul></aside>
<aside class="related"><h2>{esc(c["related"])}</h2><ul>{related}</ul></aside>
</main>
<footer class="site-footer"><h2>{esc(c["follow"])}</h2><ul class="social">{follow}</ul><p>{esc(c["newsletter"])}</p><p><a href="{site}/privacy/">{esc(c["privacy"])}</a> · © 2020 {esc(org)}. {esc(c["rights"])}</p></footer>
</body>
</html>
"""


def botwall_page():
    ray = "7c1f3e9a8b2d4f10"
    filler = "".join(f".cf-{i}{{margin:{i}px;padding:{i % 7}px}}" for i in range(60))
    return f"""<!DOCTYPE html>
<html lang="en-US"><head><title>Just a moment...</title><meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="robots" content="noindex,nofollow"><meta name="viewport" content="width=device-width,initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;margin:0}}.main-wrapper{{display:flex;align-items:center;justify-content:center;height:100vh}}{filler}</style>
</head><body><div class="main-wrapper" role="main"><div class="main-content">
<h1 class="zone-name-title h1">newschecker.in</h1>
<h2 class="h2" id="challenge-running">Please verify you are human by completing the action below.</h2>
<div id="challenge-stage"><input type="checkbox" id="cf-chl-widget"> <label for="cf-chl-widget">Verify you are human</label></div>
<p id="challenge-body-text">newschecker.in needs to review the security of your connection before proceeding.</p>
<noscript><p>Enable JavaScript and cookies to continue</p></noscript>
</div></div>
<div class="footer" role="contentinfo"><div class="footer-inner"><div class="text-center">Ray ID: <code>{ray}</code></div>
<div class="text-center">Performance &amp; security by Cloudflare</div></div></div>
<script>(function(){{window._cf_chl_opt={{cvId:'3',cZone:'newschecker.in',cType:'managed',cRay:'{ray}',cH:'{'x' * 120}'}};}}());</script>
</body></html>
"""


def social_page(url, post, image_url=None, video_url=None):
    p = post["platform"]
    names = {"facebook": "Facebook", "twitter": "Twitter", "x": "X", "instagram": "Instagram", "youtube": "YouTube"}
    title = f"{post['author']} on {names[p]}"
    metas = [f'<meta property="og:site_name" content="{names[p]}">', f'<meta property="og:url" content="{esc(url)}">',
             f'<meta property="og:title" content="{esc(title)}">', f'<meta property="og:description" content="{esc(post["text"])}">']
    if image_url:
        metas.append(f'<meta property="og:image" content="{esc(image_url)}">')
    if video_url:
        vtype = "text/html" if p == "youtube" else "video/mp4"
        metas += [f'<meta property="og:type" content="video.other">', f'<meta property="og:video" content="{esc(video_url)}">',
                  f'<meta property="og:video:type" content="{vtype}">', '<meta property="og:video:width" content="320">',
                  '<meta property="og:video:height" content="240">']
    else:
        metas.append('<meta property="og:type" content="article">')
    if p in ("twitter", "x"):
        metas.append(f'<meta name="twitter:card" content="{"player" if video_url else "summary_large_image"}">')
    login_host = "x.com" if p == "x" else names[p].lower() + ".com"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>
{chr(10).join(metas)}
</head><body><div id="app"><noscript>JavaScript is not available. Please enable JavaScript or switch to a supported browser to continue using {names[p]}.</noscript>
<div class="post"><span class="author">{esc(post['author'])}</span><p class="text">{esc(post['text'])}</p></div></div>
<a href="https://{login_host}/login">Log in</a></body></html>
"""


def x_shell_page():
    """What X serves a crawler for a post: an application shell, no Open Graph tags, no media."""
    return ("<!DOCTYPE html><html dir=\"ltr\" lang=\"en\"><head><meta charset=\"utf-8\"><title>X</title></head>"
            "<body><noscript><div>JavaScript is not available. We've detected that JavaScript is disabled in this "
            "browser. Please enable JavaScript or switch to a supported browser to continue using x.com.</div>"
            "</noscript><div id=\"react-root\"></div></body></html>")


def login_page(site):
    """A platform's login wall: a form with a password field and nothing of the post."""
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Login • {esc(site)}</title></head><body>"
            "<form id=\"loginForm\" method=\"post\"><input name=\"username\" type=\"text\">"
            "<input name=\"password\" type=\"password\"><button type=\"submit\">Log in</button></form></body></html>")


def instagram_embed_page(post, image_url):
    """The public embed page of an Instagram post (/p/<code>/embed/captioned/): its image and caption."""
    img = f'<img class="EmbeddedMediaImage" alt="{esc(post["text"][:80])}" src="{esc(image_url)}">' if image_url else ""
    return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body><div class=\"Embed\">"
            f"<div class=\"Header\"><a class=\"UsernameText\">{esc(post['author'])}</a></div>{img}"
            f"<div class=\"Caption\"><a class=\"CaptionUsername\">{esc(post['author'])}</a> {esc(post['text'])}"
            "</div></div></body></html>")


def consent_page():
    """YouTube's consent interstitial, which a crawler from some regions gets instead of the video page."""
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Before you continue to YouTube</title></head>"
            "<body><form action=\"https://consent.youtube.com/save\" method=\"POST\"><button>Accept all</button>"
            "</form></body></html>")


def archive_today_page(short_url, original, captured, title, text, img_url):
    host = short_url.split("/")[2]
    code = short_url.rstrip("/").split("/")[-1]
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{esc(title)} | {host}</title>
<meta property="og:url" content="{esc(short_url)}"><meta property="og:title" content="{esc(title)}">
</head><body>
<div id="HEADER"><table><tr><td>archived {captured} UTC</td>
<td>Saved from <a href="{esc(original)}">{esc(original)}</a></td><td>no other snapshots from this url</td></tr>
<tr><td colspan="3">share: <input id="SHARE_SHORTLINK" value="{esc(short_url)}" readonly> <input id="SHARE_LONGLINK" value="https://{host}/{captured[:10].replace('-', '.')}-{captured[11:].replace(':', '')}/{esc(original)}" readonly></td></tr></table></div>
<div id="CONTENT"><div class="html1"><h3>{esc(title)}</h3><p>{esc(text)}</p><img src="{img_url}" alt="" width="640" height="427"></div></div>
<div id="FOOTER">Webpage capture · {code} · All snapshots from host {esc(original.split('/')[2])}</div>
</body></html>
"""


def wayback_page(wb_url, original, ts, title, text, img_url, lang="en"):
    return f"""<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{esc(title)}</title>
<meta property="og:title" content="{esc(title)}"><meta property="og:description" content="{esc(text)}">
<meta property="og:image" content="{esc(img_url)}">
<script src="//archive.org/includes/analytics.js?v=cf34f82"></script>
</head><body>
<!-- BEGIN WAYBACK TOOLBAR INSERT -->
<div id="wm-ipp-base"><div id="wm-ipp"><a href="https://web.archive.org/web/">The Wayback Machine</a> - <a href="{esc(wb_url)}">{esc(wb_url)}</a>
<form><input id="wmtbURL" type="text" name="url" value="{esc(original)}"></form><span>{ts[:4]}-{ts[4:6]}-{ts[6:8]} {ts[8:10]}:{ts[10:12]}:{ts[12:14]}</span></div></div>
<!-- END WAYBACK TOOLBAR INSERT -->
<div class="post"><p>{esc(text)}</p><img src="{img_url}" alt=""></div>
</body></html>
"""
