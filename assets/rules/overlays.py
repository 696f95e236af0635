"""The platforms' own overlays on a post they hold false or misleading: text that the OCR reads on a screenshot
of such a post and that says the verdict as plainly as a fact-checker's stamp ("False information / Checked by
independent fact-checkers" on Facebook and Instagram), though its words are not all verdict words. Stage 5 reads a
line that is one of these, give or take the stamp words, as a verdict stamp.

Each entry names its platform, its language and where the wording comes from. The English strings are the
platforms' help pages' own; the other languages are the interface strings of the same labels as the platforms
show them in that language (the help pages exist in each, at the same address with the language chosen).
"""

META = "https://transparency.meta.com/features/how-fact-checking-works/"  # the ratings and their labels
META_2017 = "http://www.absatzwirtschaft.de/umstritten-mit-diesem-warnsymbol-markiert-facebook-fake-news-leider-tage-zu-spaet-100385/"
X_NOTES = "https://help.x.com/en/using-x/community-notes"  # "Readers added context"
X_LABELS = "https://help.x.com/en/resources/addressing-misleading-info"  # misleading-information labels
TIKTOK = "https://newsroom.tiktok.com/en-us/new-prompts-to-help-people-consider-before-they-share"  # unverified content
YOUTUBE = "https://support.google.com/youtube/answer/9229632"  # fact-check information panels

# (platform, language, overlay text, source)
PLATFORM_OVERLAYS: tuple[tuple[str, str, str, str], ...] = (
    ("meta", "en", "False information", META),
    ("meta", "en", "Partly false information", META),
    ("meta", "en", "Altered photo", META),
    ("meta", "en", "Altered video", META),
    ("meta", "en", "Missing context", META),
    ("meta", "en", "Checked by independent fact-checkers", META),
    ("meta", "en", "Disputed by 3rd party fact-checkers", META_2017),
    ("meta", "de", "Falsche Informationen", META),
    ("meta", "de", "Teilweise falsche Informationen", META),
    ("meta", "de", "Fehlender Kontext", META),
    ("meta", "de", "Von unabhängigen Faktenprüfern geprüft", META),
    ("meta", "de", "Angezweifelt von", META_2017),
    ("meta", "fr", "Fausse information", META),
    ("meta", "fr", "Fausses informations", META),
    ("meta", "fr", "Informations partiellement fausses", META),
    ("meta", "fr", "Contexte manquant", META),
    ("meta", "fr", "Vérifié par des vérificateurs de faits indépendants", META),
    ("meta", "es", "Información falsa", META),
    ("meta", "es", "Información parcialmente falsa", META),
    ("meta", "es", "Falta contexto", META),
    ("meta", "es", "Revisado por verificadores de datos independientes", META),
    ("meta", "pt", "Informação falsa", META),
    ("meta", "pt", "Informação parcialmente falsa", META),
    ("meta", "pt", "Falta contexto", META),
    ("meta", "pt", "Verificado por verificadores de fatos independentes", META),
    ("meta", "it", "Informazioni false", META),
    ("meta", "it", "Informazioni parzialmente false", META),
    ("meta", "it", "Contesto mancante", META),
    ("meta", "it", "Verificato da fact-checker indipendenti", META),
    ("meta", "ar", "معلومات خاطئة", META),
    ("meta", "ar", "معلومات خاطئة جزئيًا", META),
    ("meta", "ar", "سياق مفقود", META),
    ("x", "en", "Readers added context", X_NOTES),
    ("x", "en", "Readers added context they thought people might want to know", X_NOTES),
    ("x", "en", "Manipulated media", X_LABELS),
    ("x", "de", "Leser haben Kontext hinzugefügt", X_NOTES),
    ("x", "fr", "Les lecteurs ont ajouté du contexte", X_NOTES),
    ("x", "es", "Los lectores añadieron contexto", X_NOTES),
    ("x", "pt", "Os leitores adicionaram contexto", X_NOTES),
    ("x", "it", "I lettori hanno aggiunto un contesto", X_NOTES),
    ("tiktok", "en", "Caution: Video flagged for unverified content", TIKTOK),
    ("tiktok", "en", "Video flagged for unverified content", TIKTOK),
    ("tiktok", "en", "Unverified content", TIKTOK),
    ("tiktok", "de", "Nicht verifizierter Inhalt", TIKTOK),
    ("tiktok", "fr", "Contenu non vérifié", TIKTOK),
    ("tiktok", "es", "Contenido no verificado", TIKTOK),
    ("tiktok", "pt", "Conteúdo não verificado", TIKTOK),
    ("tiktok", "it", "Contenuto non verificato", TIKTOK),
    ("youtube", "en", "Claim rated false", YOUTUBE),
    ("youtube", "en", "Fact check", YOUTUBE),
)
