"""Build the bundled offline demo snapshot (feed.json + pages.warc.gz) and the test fixtures.

Everything is regenerated deterministically from the real sample data in ../shared/data
(override with VERITAS_SHARED_DATA). Run: .venv/bin/python demo/build_snapshot.py
What is real and what is written by us is listed in demo/snapshot/README.md.
"""

import csv
import gzip
import hashlib
import html
import io
import json
import os
import re
import shutil
from pathlib import Path
from urllib.parse import urljoin

from dagster_project.simulation.pages import (
    CHROME,
    CONTEXT,
    LINK_SENTENCE,
    METHOD,
    VERDICT,
    Archive,
    archive_today_page,
    botwall_page,
    esc,
    page_shell,
    photo,
    screenshot,
    site_of,
    social_page,
    stamp,
    video_mp4,
    wayback_page,
)

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("VERITAS_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
SNAPSHOT = ROOT / "demo" / "snapshot"
FIXTURES = ROOT / "tests" / "fixtures"

AFP_URL = "https://faktencheck.afp.com/doc.afp.com.B2LA2G3"
AFP_HTML = DATA / "html" / "faktencheck.afp.com_doc.afp.com.B2LA2G3_2026-05-24.html"
CORRECTIV_HTML = DATA / "html" / "correctiv.org_investigation_no-claimreview_2026-05-24.html"
CORRECTIV_URL = "https://correctiv.org/hybride-kriegsfuehrung/2026/05/21/von-muenchen-bis-aachen-im-netz-der-china-agenten/"
IFCN_CSV = DATA / "claimreview" / "ifcn_coronavirusfacts_sample_epfl.csv"


LANG_CODES = {"English": "en", "French": "fr", "Spanish": "es", "Turkish": "tr", "Italian": "it"}

PROFILES = {  # the publisher's own social accounts: linked from its pages, never appearances
    "AFP": ["https://twitter.com/AFPFactCheck", "https://www.facebook.com/AFPFactCheck"],
    "AFP-fr": ["https://twitter.com/AFPFactuel", "https://www.facebook.com/AFPFactuel"],
    "Full Fact": ["https://twitter.com/FullFact", "https://www.facebook.com/FullFactOrg"],
    "PolitiFact": ["https://twitter.com/PolitiFact", "https://www.facebook.com/PolitiFact"],
    "AfricaCheck": ["https://twitter.com/AfricaCheck", "https://www.facebook.com/AfricaCheck"],
    "Maldita.es": ["https://twitter.com/maldita_es", "https://www.instagram.com/maldita.es/"],
    "Teyit": ["https://twitter.com/teyitorg", "https://www.instagram.com/teyitorg/"],
    "Animal Político": ["https://twitter.com/Pajaropolitico", "https://www.youtube.com/user/animalpolitico"],
    "CheckNews": ["https://twitter.com/CheckNewsfr", "https://www.facebook.com/liberation.fr"],
    "AAP FactCheck": ["https://twitter.com/AAPNewswire", "https://www.facebook.com/AAPNewswire"],
    "Science Feedback": ["https://twitter.com/scifeedback", "https://www.facebook.com/sciencefeedback"],
    "FactCheck.org": ["https://twitter.com/factcheckdotorg", "https://www.facebook.com/factcheck.org"],
    "PesaCheck": ["https://twitter.com/PesaCheck", "https://www.facebook.com/PesaCheck"],
}

# ---------------------------------------------------------------------------------------------
# The 2020Q2 reviews: real IFCN rows (picked by fact_check_url) plus what we add around them.
# claim/title/background/findings are written by us; url, date, organization, rating, language,
# source_url and explanation come from the CSV row.
#   page: "ok" | "botwall" | "missing"      feed_appearance: source_url in itemReviewed.appearance
#   links: how the article links the post: post, wayback (web.archive.org/web/<ts>/<post>),
#          tco (only a t.co short link), archive (the CSV's own archive link)
# ---------------------------------------------------------------------------------------------
REVIEWS_2020 = [
    dict(
        key="afp_kenya", match="kenya-governor-quotes-non-existent-who-research",
        claim="A Kenyan governor said World Health Organization research shows that alcohol plays a major role in killing the novel coronavirus.",
        title="Kenyan governor quotes non-existent WHO research to defend alcohol donations",
        background="A video of a press briefing in Nairobi spread on Facebook in mid-April 2020. In it, a county governor explains why small bottles of cognac were packed into food parcels handed out to residents during the coronavirus restrictions, and says the decision was backed by research from the World Health Organization.",
        findings="The WHO has published no such research. On the contrary, the organisation's regional office for Europe warned in April 2020 that drinking alcohol does not protect against COVID-19 and that heavy drinking weakens the immune system. Hand sanitiser containing alcohol kills the virus on skin, but swallowing spirits has no comparable effect inside the body.",
        links=["archive"], feed_appearance=False, page="ok", numbers=True, lang_form="object", profile="AFP",
    ),
    dict(
        key="afp_honjo_fr", match="le-prix-nobel-tasuku-honjo-dement",
        claim="Le prix Nobel de médecine Tasuku Honjo a déclaré que le nouveau coronavirus n'était pas naturel et avait été fabriqué dans un laboratoire chinois.",
        title="Le prix Nobel Tasuku Honjo dément avoir déclaré que le nouveau coronavirus n'était pas naturel",
        background="Depuis la mi-avril 2020, une longue citation attribuée au chercheur japonais Tasuku Honjo, lauréat du prix Nobel de médecine en 2018, circule sur Facebook en plusieurs langues. Selon ce texte, le scientifique aurait travaillé quatre ans dans un laboratoire de Wuhan et affirmerait que le virus a été fabriqué par l'homme.",
        findings="Le professeur Honjo a publiquement démenti ces propos, qu'il qualifie de désinformation et de fausses accusations, dans un communiqué publié par l'université de Kyoto. Il n'a jamais travaillé dans un laboratoire chinois. Aucune interview ni publication scientifique de sa main ne contient les phrases qui lui sont prêtées.",
        links=["archive"], feed_appearance=False, page="ok", numbers=True, lang_form="string", profile="AFP-fr",
    ),
    dict(
        key="fullfact_honjo", match="fullfact.org/online/tasuku-honjo",
        claim="Nobel laureate Professor Tasuku Honjo said the coronavirus is not natural and was manufactured in a laboratory in Wuhan.",
        title="Nobel laureate did not say coronavirus was made in a lab",
        background="A post shared on Twitter and Facebook quotes the Japanese immunologist Tasuku Honjo, who won the Nobel prize for medicine in 2018. The text claims that he worked in a Wuhan laboratory for four years and that the new coronavirus could not have arisen in nature.",
        findings="This is incorrect. Professor Honjo has denied saying this, and there is no evidence that he ever did. Kyoto University, where he works, published a statement in his name calling the quote false. We found no interview, lecture or paper in which he makes the claims attributed to him.",
        links=["post", "wayback"], feed_appearance=True, page="ok", numbers=False, lang_form="object", profile="Full Fact",
        jsonld=True,
    ),
    dict(
        key="fullfact_hcq", match="hydroxychloroquine-not-radiation-sickness",
        claim="Hydroxychloroquine cures COVID-19 because it is really a treatment for radiation sickness.",
        title="Hydroxychloroquine is not a treatment for radiation sickness",
        background="A post in a Facebook group argues that the symptoms of COVID-19 are caused by radiation and that this is why the antimalarial drug hydroxychloroquine appears to help patients. The post was copied into several groups in May 2020.",
        findings="Hydroxychloroquine has not been proven to cure COVID-19, and it is not used as a treatment for radiation sickness. The drug is licensed in the UK for malaria, lupus and rheumatoid arthritis. Radiation sickness is treated with supportive care and, in some cases, with drugs that help the bone marrow recover.",
        links=["post"], feed_appearance=False, page="ok", numbers=False, lang_form="string", profile="Full Fact",
    ),
    dict(
        key="politifact_5g_video", match="no-video-doesnt-show-people-china-destroying-5g",
        claim="A video shows people in China tearing down 5G poles because the network spreads the coronavirus.",
        title="No, video doesn't show people in China destroying 5G poles to stop the coronavirus",
        background="A Facebook video shows a crowd pulling a tall metal pole to the ground while others cheer. The caption says that people in China have realised 5G towers spread the coronavirus and are destroying them.",
        findings="The video shows Hong Kong protesters tearing down smart lampposts in August 2019, months before the first COVID-19 cases. The protesters feared that cameras and sensors on the lampposts could be used to collect personal data from citizens. News agencies filmed the same scene from several angles at the time.",
        links=["post"], feed_appearance=True, page="ok", numbers=True, lang_form="object", profile="PolitiFact",
        jsonld=True, page_date="2020-04-07",
    ),
    dict(
        key="politifact_gates_polio", match="anti-vaxxers-spread-conspiracy-about-bill-gates-an",
        claim="A polio vaccine campaign funded by the Gates Foundation paralysed 496,000 children in India.",
        title="Anti-vaxxers spread conspiracy about Bill Gates and polio vaccines in India",
        background="A Facebook post shared widely in April 2020 says that Bill Gates was thrown out of India after a polio vaccine paid for by his foundation left almost half a million children paralysed. The post uses the claim to warn against any future coronavirus vaccine.",
        findings="The Gates Foundation has long supported polio vaccination efforts in India. There is no evidence that 496,000 children were paralysed because of a polio vaccine. India was certified polio-free in 2014, and the figure in the post appears to come from a misreading of surveillance data on acute flaccid paralysis, which has many causes.",
        links=["archive"], feed_appearance=False, page="ok", numbers=True, lang_form="string", profile="PolitiFact",
    ),
    dict(
        key="africacheck_steam_tea", match="no-hot-steam-and-tea-cant-cure-covid-19",
        claim="Inhaling hot steam and drinking hot tea kills the coronavirus and cures COVID-19.",
        title="No, hot steam and tea can't cure Covid-19",
        background="A long Facebook post written as advice from a doctor tells readers to breathe in steam several times a day and to drink hot tea, because the virus supposedly cannot survive temperatures above 26 degrees.",
        findings="According to the World Health Organization there is no way to raise your body temperature enough to kill the coronavirus, and there is currently no cure for COVID-19. Caffeine, which is found in tea, is often combined with other compounds to treat migraines and headaches. It is not used to treat viral infections, and steam inhalation can cause burns.",
        links=["post", "wayback"], feed_appearance=False, page="ok", numbers=False, lang_form="object", profile="AfricaCheck",
    ),
    dict(
        key="maldita_gates_children", match="bill-gates-hijos-vacunas",
        claim="Bill Gates no quiso vacunar a sus propios hijos.",
        title="No hay pruebas de que Bill Gates no vacunara a sus hijos",
        background="En varias páginas web y foros circula desde mayo de 2020 un texto que asegura que Bill Gates, cuya fundación financia campañas de vacunación en todo el mundo, se negó a vacunar a sus propios hijos. El mensaje se ha compartido también en grupos de Facebook y WhatsApp.",
        findings="La afirmación no está respaldada por ninguna prueba, aunque se ha hecho viral y aparece en distintas webs. Consultada por Maldita.es, la Fundación Bill y Melinda Gates respondió que las afirmaciones son falsas. En entrevistas anteriores, el propio Gates ha contado que sus hijos recibieron todas las vacunas recomendadas.",
        links=["archive"], feed_appearance=False, page="ok", numbers=False, lang_form="string", profile="Maldita.es",
    ),
    dict(
        key="teyit_hk_5g", match="videonun-hong-kongda-salgindan",
        claim="Video, Hong Kong'da salgından sorumlu tutulan 5G direklerinin yıkıldığını gösteriyor.",
        title="Videonun Hong Kong'da salgından sorumlu tutulan 5G direklerinin yıkıldığını gösterdiği iddiası",
        background="Twitter'da paylaşılan bir videoda bir grup insanın uzun bir direği ip ile çekerek devirdiği görülüyor. Paylaşımda, Hong Kong halkının koronavirüs salgınından sorumlu tuttuğu 5G direklerini yıktığı iddia ediliyor.",
        findings="Video 2019 yazında Hong Kong'daki protestolar sırasında çekildi. Protestocuların yıktığı direkler 5G istasyonu değil, yüz tanıma kameraları taşıdığı düşünülen akıllı sokak lambalarıydı. Görüntüler salgının başlamasından aylar önce uluslararası haber ajansları tarafından da yayımlandı.",
        links=["tco"], feed_appearance=False, page="ok", numbers=True, lang_form="string", profile="Teyit",
    ),
    dict(
        key="animal_5g_electrification", match="coronavirus-no-electrificacion-red5g",
        claim="La electrificación de la red 5G es la verdadera causa de la pandemia de coronavirus.",
        title="El coronavirus no es causado por la electrificación de la red 5G",
        background="Un video publicado en YouTube y reenviado por WhatsApp sostiene que cada gran pandemia de la historia coincidió con una nueva ola de electrificación, y que el despliegue de la red 5G explica la aparición del COVID-19.",
        findings="No existe ninguna relación científica entre la red 5G y el coronavirus. Tampoco puede demostrarse que la electrificación cause pandemias: la gripe de 1918, por ejemplo, se propagó en regiones sin electricidad. El virus SARS-CoV-2 se transmite entre personas por gotículas y aerosoles, y ha circulado en países sin cobertura 5G.",
        links=["post"], feed_appearance=True, page="ok", numbers=False, lang_form="object", profile="Animal Político",
    ),
    dict(
        key="checknews_raoult", match="didier-raoult-a-t-il-annonce",
        claim="Didier Raoult a annoncé qu'il quittait la France pour aller travailler en Chine.",
        title="Didier Raoult a-t-il annoncé qu'il quittait la France pour la Chine ?",
        background="Le 20 mai 2020, plusieurs comptes Twitter ont relayé une information selon laquelle l'infectiologue marseillais Didier Raoult aurait prévenu son éditeur par courriel de son départ pour la Chine. Le message a été partagé des milliers de fois en quelques heures.",
        findings="L'équipe du professeur Raoult a démenti l'information, et l'adresse électronique utilisée pour prévenir son éditeur est fausse. Aucune annonce de ce type n'a été publiée par l'IHU Méditerranée Infection. Le compte qui a lancé la rumeur a ensuite supprimé son message.",
        links=["archive"], feed_appearance=False, page="ok", numbers=False, lang_form="string", profile="CheckNews",
    ),
    dict(
        key="aap_chloroquine", match="instagrams-covid-19-chloroquine-merchants",
        claim="Chloroquine made from cinchona bark cures COVID-19, and many people have already recovered after taking it.",
        title="Instagram's COVID-19 chloroquine merchants are barking up the wrong tree",
        background="An Instagram post shared in April 2020 promotes a home-made remedy based on cinchona bark. It says the bark is the natural source of chloroquine and that many people have already recovered from COVID-19 after drinking it.",
        findings="Based on the evidence, AAP FactCheck found the claims in the post to be false. Chloroquine and hydroxychloroquine are synthetic analogues of quinine, and chloroquine is not made from cinchona bark. The claim that many people recovered from COVID-19 after receiving chloroquine is also not accurate; clinical trials were still under way.",
        links=["post"], feed_appearance=True, page="ok", numbers=True, lang_form="string", profile="AAP FactCheck",
    ),
    dict(
        key="scifeedback_5g_hemoglobin", match="conspiracy-theorists-claim-that-5g-increases",
        claim="5G radiation alters haemoglobin and starves the body of oxygen, which makes people more vulnerable to COVID-19.",
        title="Conspiracy theorists claim that 5G increases vulnerability to COVID-19 with baseless theory that it affects hemoglobin",
        background="An article on a website known for health misinformation argues that millimetre waves used by 5G networks change the shape of haemoglobin, so that red blood cells carry less oxygen and patients develop the breathing problems seen in severe COVID-19.",
        findings="Wireless communications use electromagnetic waves to transfer data. These waves carry energy proportional to their frequency and can interact with biological tissue. However, the energy and penetration depth of the waves used for 5G do not allow them to alter the structure and function of large biological molecules such as haemoglobin. There is also no correlation between the very limited 5G coverage in the world and the progression of the pandemic.",
        links=["archive"], feed_appearance=False, page="ok", numbers=False, lang_form="object", profile="Science Feedback",
    ),
    dict(
        key="factcheckorg_gates_microchips", match="conspiracy-theory-misinterprets-goals-of-gates-foundation",
        claim="Bill Gates and his foundation plan to use the coronavirus pandemic to implant microchips in people.",
        title="Conspiracy theory misinterprets goals of Gates Foundation",
        background="Posts in a Facebook group claim that Bill Gates wants to use mass testing and a future coronavirus vaccine to put microchips into people, so that everyone's movements and vaccination status can be tracked.",
        findings="The Gates Foundation has advocated for expanded testing and has funded vaccine research, but neither of those involves implanted microchips. The claim twists a remark Gates made about digital certificates of vaccination, and a separate study on invisible ink markers for vaccine records that the foundation funded, which has nothing to do with chips.",
        links=["post"], feed_appearance=False, page="ok", numbers=True, lang_form="string", profile="FactCheck.org",
        jsonld=True,
    ),
    dict(
        key="newschecker_nanavati", match="four-common-treatments-recommended-by-doctors",
        claim="Doctors at Nanavati Hospital in Mumbai recommend four common treatments, including vitamin C, to cure COVID-19 at home.",
        title="A message claiming four common treatments recommended by doctors at Nanavati Hospital is fake",
        background="", findings="",
        links=[], feed_appearance=True, page="botwall", numbers=False, lang_form="object", profile=None,
    ),
    dict(
        key="facta_gates_sterilize", match="non-e-vero-che-bill-gates-ha-ammesso",
        claim="Bill Gates ha ammesso che i vaccini servono a sterilizzare e ridurre la popolazione mondiale.",
        title="Non è vero che Bill Gates ha ammesso che i vaccini servono a sterilizzare la popolazione",
        background="", findings="",
        links=[], feed_appearance=False, page="missing", numbers=True, lang_form="string", profile=None,
    ),
    dict(  # claim date after review date: ingestion must drop it
        key="pesacheck_aspirin_late", match="false-there-is-no-evidence-that-aspirin-cures-covid-19",
        claim="Aspirin cures COVID-19, because the disease is caused by bacteria and not by a virus.",
        title="FALSE: There is no evidence that aspirin cures COVID-19",
        background="A Facebook post claims that autopsies in Italy showed COVID-19 is caused by a bacterium that clots the blood, and that aspirin is therefore enough to cure it.",
        findings="The WHO says that there is no treatment or cure for COVID-19 at the moment. The disease is caused by the SARS-CoV-2 virus, not by bacteria, and no autopsy study has shown otherwise. Aspirin can be dangerous for people with bleeding disorders and should not be taken without medical advice.",
        links=[], feed_appearance=False, page="ok", numbers=True, lang_form="string", profile="PesaCheck",
        claim_date="2020-06-02",
    ),
    dict(  # malformed: the feed record has no url at all
        key="thejournal_gates_italy_nourl", match="debunked-no-italy-does-not-want-to-charge-bill-gates",
        claim="Italy wants to charge Bill Gates with crimes against humanity.",
        title="", background="", findings="",
        links=[], feed_appearance=False, page="none", numbers=False, lang_form="object", profile=None,
        drop_url=True,
    ),
]
DUPLICATE_OF = "fullfact_honjo"  # this review appears a second time in another feed element

# Appearance pages (social posts, archives) and the media they carry. Keyed by post URL.
# kind: image | video | youtube | 404.  Texts are ours; URLs of the posts are the CSV's.
POSTS = {
    "https://www.facebook.com/watch/?v=2585538508365616": dict(
        platform="facebook", kind="video", author="Citizen TV Kenya fan page",
        text="Governor explains why cognac was added to the food parcels: WHO research shows alcohol kills the virus."),
    "https://www.facebook.com/634352629929715/posts/3132801580084795": dict(
        platform="facebook", kind="404", author="", text=""),
    "https://twitter.com/harish151981/status/1253012624184393733": dict(
        platform="twitter", kind="image", author="harish151981",
        text="Japanese Nobel laureate Prof. Tasuku Honjo says the coronavirus is not natural and was made in a Wuhan lab."),
    "https://www.facebook.com/groups/698141807656499/permalink/725836158220397/": dict(
        platform="facebook", kind="image", author="Group post",
        text="Covid symptoms are radiation sickness. That is why hydroxychloroquine works. Wake up."),
    "https://www.facebook.com/liil.biitt.9/videos/pcb.3411741318855266/3411740422188689/?type=3&theater": dict(
        platform="facebook", kind="video", author="Liil Biitt",
        text="People in China figured out 5G spreads the virus and are tearing the towers down."),
    "https://www.facebook.com/kay.shemirani/posts/10222568001978996": dict(
        platform="facebook", kind="image", author="Kay Shemirani",
        text="Gates polio vaccine paralysed 496,000 children in India. Now he wants to vaccinate the world."),
    "https://www.facebook.com/vytjie.mentor/posts/4221347434545770": dict(
        platform="facebook", kind="image", author="Vytjie Mentor",
        text="Breathe hot steam and drink hot tea. The virus cannot survive heat. Share to save lives."),
    "https://twitter.com/monserr066/status/1244918870768582656": dict(
        platform="twitter", kind="video", author="monserr066",
        text="Hong Kong halkı salgının sorumlusu 5G direklerini yıkıyor!"),
    "https://www.youtube.com/watch?v=uzXguH9wirM": dict(
        platform="youtube", kind="youtube", author="Canal de videos",
        text="La verdad sobre el 5G y el coronavirus: la electrificación del planeta."),
    "https://twitter.com/Entreprendre/status/1263027602152980480": dict(
        platform="twitter", kind="image", author="Entreprendre",
        text="Didier Raoult quitte la France pour la Chine, selon un courriel adressé à son éditeur."),
    "https://www.instagram.com/p/B-w22FvhhuC/": dict(
        platform="instagram", kind="image", author="natural.remedies.daily",
        text="Cinchona bark tea = natural chloroquine. So many people have recovered already!"),
    "https://www.facebook.com/groups/346378325942318/permalink/628567417723406": dict(
        platform="facebook", kind="image", author="Group post",
        text="Gates wants to microchip everyone with the coronavirus vaccine. Do not comply."),
    "https://twitter.com/harishgadappa/status/1262416881589186561?s=20": dict(
        platform="twitter", kind="image", author="harishgadappa",
        text="Doctors of Nanavati Hospital recommend: vitamin C, zinc, steam and warm water. Forward to all."),
    "https://x.com/RealAlexJones/status/2052459009425252459": dict(
        platform="x", kind="image", author="Alex Jones",
        text="LOCKDOWN ALERT: Globalists launch Covid 2.0 as hantavirus spreads worldwide. Just like a light switch."),
}
TCO = {"https://t.co/4mQz7XbR2k": "https://twitter.com/monserr066/status/1244918870768582656"}
WAYBACK_TS = {"fullfact_honjo": "20200430151204", "africacheck_steam_tea": "20200424083012"}

NON_FACT_CHECKER = dict(
    url="https://www.morningbuzz-news.com/health/2026/05/18/hantavirus-lab-claims-what-we-know/",
    name="Morning Buzz News", site="https://www.morningbuzz-news.com/", date="2026-05-18",
    claim="The 2026 hantavirus outbreak on a cruise ship was caused by a leak from a research laboratory.",
    rating="Unproven",
)


# ------------------------------------------------------------------------------ page writers (the rest: pages.py)


def original_of(row):
    """The post a CSV row points at: resolved_url for archive links, with Wayback's 'https:/x' repaired."""
    url = row["resolved_url"] if "archive" in row["source_url"] else row["source_url"]
    return re.sub(r"^(https?):/(?!/)", r"\1://", url)


def post_media(url):
    """Image and (for video posts) MP4 URLs of a post, on the platform's CDN hosts."""
    post = POSTS[url]
    tag = hashlib.sha1(url.encode()).hexdigest()[:12]
    if post["kind"] == "youtube":
        vid = url.split("v=")[1]
        return f"https://i.ytimg.com/vi/{vid}/hqdefault.jpg", f"https://www.youtube.com/embed/{vid}"
    img = {"twitter": f"https://pbs.twimg.com/media/E{tag}.jpg", "x": f"https://pbs.twimg.com/media/G{tag}.jpg",
           "facebook": f"https://scontent.xx.fbcdn.net/v/t1.0-9/{tag}_n.jpg",
           "instagram": f"https://scontent.cdninstagram.com/v/t51.2885-15/e35/{tag}_n.jpg"}[post["platform"]]
    video = None
    if post["kind"] == "video":
        video = {"twitter": f"https://video.twimg.com/ext_tw_video/{url.rsplit('/', 1)[-1]}/pu/vid/320x240/{tag}.mp4",
                 "facebook": f"https://video.xx.fbcdn.net/v/t42.9040-2/{tag}_n.mp4"}[post["platform"]]
    return img, video


def article_page(rec, row, arch):
    lang = LANG_CODES[row["fact_check_lang"]]
    url, org = row["fact_check_url"], row["organization"]
    site = site_of(url)
    c = CHROME[lang]
    slug = rec["key"].replace("_", "-")
    post_url = original_of(row)
    post = POSTS.get(post_url)
    shot_url = f"{site}/wp-content/uploads/2020/{row['date'][5:7]}/{slug}-screenshot.jpg"
    stamp_url = f"{site}/static/img/rating-{row['final_rating'].lower().replace(' ', '-')}-{slug[:6]}.jpg"
    hero_url = f"{site}/wp-content/uploads/2020/{row['date'][5:7]}/{slug}-header.jpg"
    base = photo("post" + post_url, (post or {}).get("text", rec["title"])[:40])
    arch.jpeg(shot_url, screenshot(base, (post or {}).get("author", "") or org, (post or {}).get("text", rec["claim"])))
    arch.jpeg(stamp_url, stamp(org, row["final_rating"]))
    n_images = 2 + (len(rec["key"]) % 2)  # 2 or 3 images, fixed per record
    if n_images == 3:
        arch.jpeg(hero_url, photo("hero" + url, rec["title"][:40]))

    link_parts = []
    for kind in rec["links"]:
        if kind == "post":
            target = row["source_url"]
        elif kind == "wayback":
            target = f"https://web.archive.org/web/{WAYBACK_TS[rec['key']]}/{row['source_url']}"
        elif kind == "tco":
            target = next(k for k, v in TCO.items() if v == row["source_url"])
        else:
            target = row["source_url"]
        link_parts.append(LINK_SENTENCE[lang][kind].format(u=esc(target)))
    method = METHOD[lang][len(rec["key"]) % len(METHOD[lang])]
    figure_shot = (f'<figure><img src="{shot_url}" alt="{esc(c["screenshot"].format(org=org))}" width="640" height="560">'
                   f'<figcaption>{esc(c["screenshot"].format(org=org))}</figcaption></figure>')
    figure_stamp = (f'<figure class="rating"><img src="{stamp_url}" alt="{esc(c["stamp"].format(org=org))}: {esc(row["final_rating"])}" width="640" height="360">'
                    f'<figcaption>{esc(c["rating"])}: {esc(row["final_rating"])}</figcaption></figure>')
    hero = f'<img class="hero" src="{hero_url}" alt="{esc(rec["title"])}" width="640" height="427">' if n_images == 3 else ""
    body = "\n".join([
        hero,
        f"<p><strong>{esc(rec['claim'])}</strong></p>",
        f"<p>{esc(rec['background'])} {' '.join(link_parts)}</p>",
        figure_shot,
        f"<h2>{esc(c['rating'])}</h2>" if lang != "en" else "<h2>What we found</h2>",
        f"<p>{esc(rec['findings'])}</p>",
        f"<p>{esc(method)}</p>",
        f"<p>{esc(CONTEXT[lang][len(rec['claim']) % len(CONTEXT[lang])])}</p>",
        figure_stamp,
        f"<p>{esc(VERDICT[lang].format(rating=row['final_rating'], org=org))}</p>",
    ])
    jsonld = None
    if rec.get("jsonld"):
        jsonld = claim_review(rec, row)
        jsonld["@context"] = "https://schema.org"
        if rec.get("page_date"):
            jsonld["datePublished"] = rec["page_date"]
    published = rec.get("page_date", row["date"])
    profiles = PROFILES.get(rec["profile"], [])
    return page_shell(lang, url, rec["title"], rec["claim"], published, org, body, stamp_url, profiles, jsonld)


# ------------------------------------------------------------------------------ feed
def lang_field(code, form):
    names = {"en": "English", "fr": "French", "es": "Spanish", "tr": "Turkish", "it": "Italian", "de": "German"}
    return code if form == "string" else {"@type": "Language", "name": names[code], "alternateName": code}


NUMBERS = {"false": "1", "misleading": "2", "mostly false": "2"}


def claim_review(rec, row):
    lang = LANG_CODES[row["fact_check_lang"]]
    review = {"@type": "ClaimReview", "datePublished": row["date"], "url": row["fact_check_url"],
              "claimReviewed": rec["claim"],
              "author": {"@type": "Organization", "name": row["organization"], "url": site_of(row["fact_check_url"]) + "/"},
              "reviewRating": {"@type": "Rating", "alternateName": row["final_rating"]},
              "itemReviewed": {"@type": "Claim", "author": {"@type": "Person", "name": row["source"].strip()}},
              "inLanguage": lang_field(lang, rec["lang_form"])}
    if rec["numbers"]:
        review["reviewRating"].update(ratingValue=NUMBERS.get(row["final_rating"].lower(), "1"), bestRating="5", worstRating="1")
    if rec["feed_appearance"]:
        review["itemReviewed"]["appearance"] = [{"@type": "CreativeWork", "url": row["source_url"]}]
        review["itemReviewed"]["firstAppearance"] = {"@type": "CreativeWork", "url": row["source_url"]}
    if rec.get("claim_date"):
        review["itemReviewed"]["datePublished"] = rec["claim_date"]
    if rec.get("drop_url"):
        del review["url"]
    return review


def afp_review():
    text = AFP_HTML.read_text(encoding="utf-8")
    start = text.index('<script type="application/ld+json">') + len('<script type="application/ld+json">')
    graph = json.loads(text[start:text.index("</script>", start)])["@graph"]
    return next(node for node in graph if node.get("@type") == "ClaimReview")


def non_fc_review():
    n = NON_FACT_CHECKER
    return {"@type": "ClaimReview", "datePublished": n["date"], "url": n["url"], "claimReviewed": n["claim"],
            "author": {"@type": "Organization", "name": n["name"], "url": n["site"]},
            "reviewRating": {"@type": "Rating", "alternateName": n["rating"]},
            "itemReviewed": {"@type": "Claim", "author": {"@type": "Person", "name": "social media users"}},
            "inLanguage": "en"}


def element(created, items, url=None):
    el = {"@type": "DataFeedItem", "dateCreated": created, "item": items}
    if url:
        el["url"] = url
    return el


# ------------------------------------------------------------------------------ build
def load_rows():
    with open(IFCN_CSV, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    picked = {}
    for rec in REVIEWS_2020:
        hits = [r for r in rows if rec["match"] in r["fact_check_url"]]
        assert len(hits) == 1, (rec["key"], len(hits))
        picked[rec["key"]] = hits[0]
    return rows, picked


def build_snapshot():
    SNAPSHOT.mkdir(parents=True, exist_ok=True)
    _, picked = load_rows()
    arch = Archive()

    # --- 2026Q2: the real AFP page and the images it references (ours, under their real URLs)
    afp_bytes = AFP_HTML.read_bytes()
    arch.add(AFP_URL, afp_bytes, "text/html; charset=UTF-8")
    afp_text = afp_bytes.decode("utf-8")
    srcs = re.findall(r'<img[^>]*?\ssrc="([^"]+)"', afp_text)
    srcs += re.findall(r'<meta property="og:image" content="([^"]+)"', afp_text)
    for src in dict.fromkeys(srcs):
        u = urljoin(AFP_URL, html.unescape(src))
        if u.endswith(".svg"):
            svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="160" height="48"><rect width="160" height="48" fill="#fff"/>'
                   '<text x="12" y="34" font-size="28" font-family="sans-serif" fill="#0a2a5c">AFP</text></svg>')
            arch.add(u, svg.encode(), "image/svg+xml")
        elif u.endswith(".png"):
            buf = io.BytesIO()
            stamp(u.rsplit("/", 1)[-1].split(".")[0], "member", size=(160, 90)).save(buf, "PNG", optimize=True)
            arch.add(u, buf.getvalue(), "image/png")
        else:
            key = re.sub(r"\?.*$", "", u.rsplit("/", 1)[-1])
            img = photo("afp" + key, f"AFP Faktencheck {key[:8]}")
            # og_image / header styles are Drupal crops of the same picture: keep them near-duplicates
            arch.jpeg(u, img.resize((640, 336)) if "og_image" in u or "header_article" in u else img)
    # the X post the article names (JSON-LD itemReviewed.url) and its perma.cc capture
    x_url = "https://x.com/RealAlexJones/status/2052459009425252459"
    x_img, _ = post_media(x_url)
    arch.html(x_url, social_page(x_url, POSTS[x_url], image_url=x_img))
    arch.jpeg(x_img, photo("x" + x_url, "Covid 2.0"))
    perma = "https://perma.cc/LK9M-EQU5"
    arch.html(perma, f"""<!DOCTYPE html><html><head><meta charset="utf-8"><title>Perma.cc record LK9M-EQU5</title></head>
<body><header><a href="https://perma.cc/">Perma.cc</a></header><main><h1>Record LK9M-EQU5</h1>
<p>Captured May 13, 2026 by AFP. This is a record of <a class="original-url" href="{x_url}">{x_url}</a></p>
<iframe src="https://perma-archives.org/warc/LK9M-EQU5/{x_url}" title="archived page"></iframe></main></body></html>""")
    arch.html(CORRECTIV_URL, CORRECTIV_HTML.read_text(encoding="utf-8"))
    arch.html(NON_FACT_CHECKER["url"], page_shell(
        "en", NON_FACT_CHECKER["url"], "Hantavirus lab claims: what we know so far", NON_FACT_CHECKER["claim"],
        NON_FACT_CHECKER["date"], NON_FACT_CHECKER["name"],
        "<p>" + " ".join([
            "Posts claiming that the hantavirus outbreak on a cruise ship began with a laboratory leak have been shared widely this week.",
            "Health authorities say the source of the outbreak is still under investigation and have not linked it to any laboratory.",
            "Hantaviruses are carried by rodents, and most human infections come from contact with their droppings or urine.",
            "We will update this story as more information becomes available from the investigators and the ship's operator.",
        ] * 3) + "</p>", NON_FACT_CHECKER["site"] + "img/hantavirus.jpg", []))

    # --- 2020Q2 article pages and their appearances
    wayback_done = set()
    for rec in REVIEWS_2020:
        row = picked[rec["key"]]
        if rec["page"] == "ok":
            arch.html(row["fact_check_url"], article_page(rec, row, arch))
        elif rec["page"] == "botwall":
            arch.html(row["fact_check_url"], botwall_page(), status=403, reason="Forbidden")
        if rec["page"] != "ok":
            continue
        src = row["source_url"]
        for kind in rec["links"]:
            if kind == "wayback":
                ts = WAYBACK_TS[rec["key"]]
                wb = f"https://web.archive.org/web/{ts}/{src}"
                img = f"https://web.archive.org/web/{ts}im_/{post_media(src)[0]}"
                arch.html(wb, wayback_page(wb, src, ts, rec["title"], POSTS[src]["text"], img))
                arch.jpeg(img, photo("post" + src, POSTS[src]["text"][:40]))
            elif kind == "tco":
                short = next(k for k, v in TCO.items() if v == src)
                arch.redirect(short, src)
            elif kind == "archive" and src.startswith(("http://archive.", "https://archive.")):
                original = original_of(row)
                post = POSTS.get(original, {"text": rec["claim"], "author": ""})
                code = src.rstrip("/").split("/")[-1]
                img = f"https://{src.split('/')[2]}/{code}/{hashlib.sha1(src.encode()).hexdigest()}.jpg"
                arch.html(src, archive_today_page(src, original, f"2020-{row['date'][5:7]}-{row['date'][8:10]} 10:15:00",
                                                  rec["title"], post["text"], img))
                arch.jpeg(img, photo("post" + original, post["text"][:40]))
            elif kind == "archive" and "web.archive.org" in src:
                if "/save/" in src:
                    original = original_of(row)
                    ts = row["date"].replace("-", "") + "093011"
                    target = f"https://web.archive.org/web/{ts}/{original}"
                    arch.redirect(src, target, status=302, reason="Found")
                else:
                    target, ts = src, src.split("/web/", 1)[1].split("/", 1)[0]
                    original = original_of(row)
                if target not in wayback_done:
                    wayback_done.add(target)
                    post = POSTS.get(original, {"text": rec["claim"]})
                    live_img = post_media(original)[0] if original in POSTS else f"{site_of(original)}/images/{ts}.jpg"
                    img = f"https://web.archive.org/web/{ts}im_/{live_img}"
                    arch.html(target, wayback_page(target, original, ts, rec["title"], post.get("text") or rec["claim"], img,
                                                   LANG_CODES[row["fact_check_lang"]]))
                    arch.jpeg(img, photo("post" + original, (post.get("text") or rec["claim"])[:40]))

    # --- the social posts themselves (image / video / youtube / 404)
    for url, post in POSTS.items():
        if url.startswith("https://x.com/"):
            continue
        if post["kind"] == "404":
            arch.html(url, "<!DOCTYPE html><html><head><title>Page not found | Facebook</title></head><body>"
                           "<h2>This content isn't available right now</h2><p>When this happens, it's usually because the owner "
                           "only shared it with a small group of people, changed who can see it or it's been deleted.</p></body></html>",
                      status=404, reason="Not Found")
            continue
        img, video = post_media(url)
        if post["kind"] == "video":
            arch.mp4(video, video_mp4("video" + url, post["author"][:20]))
        arch.html(url, social_page(url, post, image_url=img, video_url=video))
        arch.jpeg(img, photo("post" + url, post["text"][:40]))

    arch.write(SNAPSHOT / "pages.warc.gz")

    # --- the feed
    elements = [element("2020-04-03T08:00:00Z", None), element("2020-04-04T08:00:00Z", [])]
    for rec in REVIEWS_2020:
        row = picked[rec["key"]]
        created = row["date"] + "T12:00:00Z"
        elements.append(element(created, [claim_review(rec, row)], row["fact_check_url"] if not rec.get("drop_url") else None))
    dup = next(r for r in REVIEWS_2020 if r["key"] == DUPLICATE_OF)
    dup_review = claim_review(dup, picked[dup["key"]])
    dup_review["inLanguage"] = "en"  # same review, other language form, as a second crawl would give
    elements.append(element("2020-06-30T12:00:00Z", [dup_review], dup_review["url"]))
    afp = afp_review()
    elements.append(element("2026-05-13T13:44:00Z", [afp], afp["url"]))
    elements.append(element(NON_FACT_CHECKER["date"] + "T12:00:00Z", [non_fc_review()], NON_FACT_CHECKER["url"]))
    feed = {"@context": "https://schema.org", "@type": "DataFeed", "dateModified": "2026-06-01T00:00:00Z",
            "dataFeedElement": elements}
    (SNAPSHOT / "feed.json").write_text(json.dumps(feed, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    lic = SNAPSHOT / "LICENSES"
    lic.mkdir(exist_ok=True)
    shutil.copyfile(DATA / "licenses" / "fundus_LICENSE_MIT.txt", lic / "fundus_LICENSE_MIT.txt")
    return arch, picked


# ------------------------------------------------------------------------------ fixtures
def build_fixtures(picked):
    FIXTURES.mkdir(parents=True, exist_ok=True)

    def gz(src, dst):
        # mtime=0 keeps the gzip bytes identical across runs
        with open(dst, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as fh:
            fh.write(src.read_bytes())

    gz(AFP_HTML, FIXTURES / "afp_B2LA2G3.html.gz")
    gz(CORRECTIV_HTML, FIXTURES / "correctiv_no_claimreview.html.gz")
    shutil.copyfile(DATA / "html" / "faktencheck.afp.com_fundus_expected.json", FIXTURES / "afp_B2LA2G3_expected.json")
    for name in ("factors_org_stats.csv", "factors_mapped_verdicts.txt", "factcheck_orgs_country_epfl.csv"):
        shutil.copyfile(DATA / "publishers" / name, FIXTURES / name)

    # GFC claims:search excerpt: multi-review claims, both sides of duplicate review URLs, Arabic ratings, en/my.
    claims = json.loads((DATA / "claimreview" / "gfc_claims_search_ar_2023-2025.json").read_text(encoding="utf-8"))
    counts = {}
    for c in claims:
        for r in c.get("claimReview", []):
            counts[r["url"]] = counts.get(r["url"], 0) + 1
    keep = set(i for i, c in enumerate(claims) if len(c.get("claimReview", [])) > 1)
    dup_urls = [u for u, n in counts.items() if n > 1][:10]
    keep |= {i for i, c in enumerate(claims) if any(r["url"] in dup_urls for r in c.get("claimReview", []))}
    for lang in ("en", "my"):
        keep |= set([i for i, c in enumerate(claims) if any(r.get("languageCode") == lang for r in c["claimReview"])][:3])
    arabic = [i for i, c in enumerate(claims)
              if any(r.get("textualRating", "")[:1] >= "\u0600" and len(r.get("textualRating", "")) < 40 for r in c["claimReview"])]
    for i in arabic:
        if len(keep) >= 60:
            break
        keep.add(i)
    excerpt = [claims[i] for i in sorted(keep)][:60]
    (FIXTURES / "gfc_claims_search_ar_excerpt.json").write_text(json.dumps(excerpt, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    # IFCN excerpt: the rows the snapshot uses, then a spread of others (archive links, social links, 'Unavaliable').
    rows, _ = load_rows()
    used = {(r["fact_check_url"], r["claim"]) for r in picked.values()}
    social_hosts = ("twitter.com", "facebook.com", "instagram.com", "youtube.com")
    kinds = {"archive": [], "social": [], "other": []}
    for i, r in enumerate(rows):
        if (r["fact_check_url"], r["claim"]) in used:
            continue
        kind = "archive" if "archive" in r["source_url"] else "social" if any(h in r["source_url"] for h in social_hosts) else "other"
        kinds[kind].append(i)
    keep = {i for i, r in enumerate(rows) if (r["fact_check_url"], r["claim"]) in used}
    keep |= set(kinds["archive"][::6][:25] + kinds["social"][::12][:26] + kinds["other"][::40][:10])
    chosen = [rows[i] for i in sorted(keep)]
    with open(FIXTURES / "ifcn_excerpt.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(chosen)

    averitec = json.loads((DATA / "evaluation" / "averitec_dev.json").read_text(encoding="utf-8"))
    by_label = {}
    for c in averitec:
        by_label.setdefault(c["label"], [])
        if len(by_label[c["label"]]) < 5:
            by_label[c["label"]].append(c)
    picked_av = sorted((c for v in by_label.values() for c in v), key=averitec.index)
    (FIXTURES / "averitec_dev_excerpt.json").write_text(json.dumps(picked_av, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    pils = json.loads((DATA / "image_text" / "5pils_test.json").read_text(encoding="utf-8"))
    by_type = {}
    for p in pils:
        by_type.setdefault(p["type_of_image"], [])
        if len(by_type[p["type_of_image"]]) < 7:
            by_type[p["type_of_image"]].append(p)
    picked_p = sorted((p for v in by_type.values() for p in v), key=pils.index)[:20]
    (FIXTURES / "5pils_test_excerpt.json").write_text(json.dumps(picked_p, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")

    lic = FIXTURES / "LICENSES"
    lic.mkdir(exist_ok=True)
    for name in ("fundus_LICENSE_MIT.txt", "FACTors_LICENSE_MIT.txt", "5Pils_dataset_LICENSE_CC-BY-SA-4.0.txt"):
        shutil.copyfile(DATA / "licenses" / name, lic / name)
    return dict(gfc=len(excerpt), ifcn=len(chosen), averitec=len(picked_av), pils=len(picked_p))


def main():
    arch, picked = build_snapshot()
    sizes = build_fixtures(picked)
    print(f"records={len(arch.records)} images={len(arch.images)} videos={len(arch.videos)} fixtures={sizes}")
    for p in sorted(SNAPSHOT.rglob("*")):
        if p.is_file():
            print(f"{p.relative_to(ROOT)}\t{p.stat().st_size}")


if __name__ == "__main__":
    main()
