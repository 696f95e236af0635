"""What an annotator sees and answers in Label Studio: the labelling config (XML) that asks VeriTaS's questions on its
scale, the annotator guide as the project's instructions, and how an answer's name reads back as a property.

Everything the config says about a property comes from the label scheme (prompts/label_scheme.yaml), the guide from
prompts/annotator_guide.md: the questions people answer are the ones the ensemble was asked. Plain functions."""

import html
import re
from xml.sax.saxutils import quoteattr

from prompts import HERE as PROMPTS_DIR
from prompts import label_scheme

CATEGORIES = ("positive", "negative", "unknown")
CERTAINTIES = ("certain", "rather certain", "rather uncertain")
CLAIM_QUESTIONS = ("veracity", "context_coverage")
MEDIA_QUESTIONS = ("authenticity", "contextualization")
NOTE = "note"
CLAIM_OBJECT = "claim"  # the object the claim's questions and the note are about
IDX = "{{idx}}"  # Label Studio's Repeater index: medium questions are named <property>_<index in the claim's media>
# an answer's name -> (property, medium index or -1, whether it is the certainty)
ANSWER_NAME = re.compile(r"^(veracity|context_coverage|authenticity|contextualization)(_certainty)?(?:_(\d+))?$")
GUIDE = PROMPTS_DIR / "annotator_guide.md"


def answer_name(prop: str, medium: int | str | None = None, certainty: bool = False) -> str:
    """The Label Studio control name of a question: ``veracity``, ``veracity_certainty``, ``authenticity_0``..."""
    return prop + ("_certainty" if certainty else "") + (f"_{medium}" if medium is not None else "")


def read_answer_name(name: str) -> tuple[str, int, bool] | None:
    """(property, medium index or -1, is the certainty) of a control name; None for the note and unknown names."""
    m = ANSWER_NAME.match(name)
    if not m:
        return None
    prop, certainty, medium = m.groups()
    if (prop in MEDIA_QUESTIONS) != (medium is not None):
        return None
    return prop, int(medium) if medium is not None else -1, bool(certainty)


def _question(prop: str, to_name: str, medium: str | None) -> list[str]:
    """One property's question: its header and definition, the category, and the certainty unless unknown."""
    p = label_scheme()["properties"][prop]
    label = {"positive": f"Positive: {p['positive']}", "negative": f"Negative: {p['negative']}",
             "unknown": f"Unknown: {label_scheme()['categories']['unknown']}"}
    name, sure = answer_name(prop, medium), answer_name(prop, medium, certainty=True)
    title = f"{prop.replace('_', ' ').capitalize()}: {p['question']}"
    help_text = f"{p['definition']} {p['hint']}"
    return [
        f'<Header value={quoteattr(title)} size="5"/>',
        f'<Header value={quoteattr(help_text)} size="6" style="font-weight: normal"/>',
        f'<Choices name="{name}" toName="{to_name}" choice="single-radio" showInline="true">',
        *[f'  <Choice value={quoteattr(label[c])} alias="{c}"/>' for c in CATEGORIES],
        "</Choices>",
        f'<Choices name="{sure}" toName="{to_name}" choice="single-radio" showInline="true" '
        f'visibleWhen="choice-unselected" whenTagName="{name}" whenChoiceValue={quoteattr(label["unknown"])}>',
        *[f'  <Choice value={quoteattr("Certainty: " + c)} alias="{c}"/>' for c in CERTAINTIES],
        "</Choices>",
    ]


def labelling_config() -> str:
    """The Label Studio labelling config: the claim, its date and language; each medium (a Repeater over the task's
    ``media``, so a claim shows as many as it has) with its authenticity and contextualization; the claim's veracity
    and context coverage; a note; the fact-check article as the evidence. Each question is a category and, unless
    unknown, a certainty: the ensemble's scale (score = +-certainty, 0 for unknown)."""
    lines = [
        '<View style="max-width: 960px">',
        '<Header value="The claim" size="4"/>',
        f'<Text name="{CLAIM_OBJECT}" value="$claim"/>',
        '<Text name="when" value="$context_line"/>',
        '<Header value="Its media" size="4"/>',
        f'<Repeater on="$media" indexFlag="{IDX}">',
        f'  <HyperText name="medium_{IDX}" value="$media[{IDX}].html" inline="true"/>',
        *[f"  {line}" for prop in MEDIA_QUESTIONS for line in _question(prop, f"medium_{IDX}", IDX)],
        "</Repeater>",
        '<Header value="The claim as a whole" size="4"/>',
        *[line for prop in CLAIM_QUESTIONS for line in _question(prop, CLAIM_OBJECT, None)],
        '<Header value="Note (what kept you from judging, anything odd)" size="5"/>',
        f'<TextArea name="{NOTE}" toName="{CLAIM_OBJECT}" rows="2" editable="true" maxSubmissions="1"/>',
        '<Header value="The evidence: the fact-check article" size="4"/>',
        '<HyperText name="article" value="$article_html" inline="true"/>',
        "</View>",
    ]
    return "\n".join(lines) + "\n"


def guide_text() -> str:
    """The annotator guide (prompts/annotator_guide.md)."""
    return GUIDE.read_text(encoding="utf-8")


def instructions_html() -> str:
    """The project's instructions: the guide, then each property's question and definition from the label scheme."""
    out, items = [], []

    def flush():
        if items:
            out.append("<ul>" + "".join(f"<li>{html.escape(i)}</li>" for i in items) + "</ul>")
            items.clear()

    for block in guide_text().split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines()]
        if lines and lines[0].startswith("- "):
            for line in lines:
                if line.startswith("- "):
                    items.append(line[2:])
                elif items:
                    items[-1] += " " + line
            continue
        flush()
        if lines:
            out.append(f"<p>{html.escape(' '.join(lines))}</p>")
    flush()
    scheme = label_scheme()
    out.append("<h4>The questions</h4><dl>")
    for name, p in scheme["properties"].items():
        out.append(f"<dt>{html.escape(name.replace('_', ' ').capitalize())} ({p['scope']}): "
                   f"{html.escape(p['question'])}</dt><dd>{html.escape(p['definition'])} "
                   f"Positive: {html.escape(p['positive'])}. Negative: {html.escape(p['negative'])}. "
                   f"{html.escape(p['hint'])}</dd>")
    out.append("</dl>")
    return "\n".join(out)
