"""Issue 47: every path, module, command and config key that the handbook, the README and the config files name
exists. The strict mkdocs build checks the handbook's links, not a path or a module written in its prose, and
nothing checks the README or the comments of the config files: those drifted as the code moved."""

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), ROOT / "veritas.yaml", ROOT / "veritas.real.yaml",
                    *(ROOT / "systems").glob("*.yaml"), ROOT / "mkdocs.yml"])
TOP = ("assets", "dagster_project", "schemas", "prompts", "tests", "bench", "demo", "docs", "registry", "systems", ".ci")
# a path in the repository: a top-level folder, then path characters; placeholders (<quarter>, {name}) end it
PATH = re.compile(r"(?<![\w./@-])((?:" + "|".join(map(re.escape, TOP)) + r")/[\w./*-]*)")
MODULE = re.compile(r"(?<![\w./-])((?:assets|dagster_project|schemas|prompts)(?:\.[A-Za-z_]\w*)+)")
COMMAND = re.compile(r"\bveritas ((?:[a-z][a-z-]*)(?: [a-z][a-z-]*)?)")
MAKE = re.compile(r"`make ([a-z][\w-]*)")
KEY = re.compile(r"`((?:stages|web|llm|store)\.[a-z_]+(?:\.[a-z_]+)?)")
# written under the data folder or by a run, not in the repository
# a module named from inside its top folder ("release/card.py", "resources/llm/cache.py")
SHORT_PATH = re.compile(r"(?<![\w./-])((?:ingestion|scraping|claims|release|evaluation|rules|stage|ensemble|selection|"
                        r"resources|commands|simulation|core)/[\w/]*\w\.py)")
GENERATED = ("docs/img/", "build/", "tests/fixtures/", "demo/snapshot/")
PROSE_EXCEPTIONS = {"docs/how-to", "docs/concepts", "docs/reference"}  # folders named as such
EXAMPLES = {"systems/their-system.yaml", "systems/gpt-retrieval.yaml"}  # files docs/how-to/score-a-system.md has you write
FILE_SUFFIXES = ("py", "md", "yaml", "yml", "json", "toml")  # `store.py` is a file, not the key store.py


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def named_paths(text: str) -> set[str]:
    out = set()
    for match in PATH.finditer(text):
        path = match.group(1).rstrip(".,:;")
        end = match.end()
        if end < len(text) and text[end] in "<{":  # a placeholder follows: the path is a pattern
            continue
        out.add(path)
    return out


def path_exists(path: str) -> bool:
    if path.rstrip("/") in PROSE_EXCEPTIONS or path in EXAMPLES:
        return True
    if "*" in path:
        return any(ROOT.glob(path))
    return (ROOT / path).exists()


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_path_named_exists(document):
    missing = sorted(p for p in named_paths(_text(document))
                     if not p.startswith(GENERATED) and not path_exists(p))
    assert not missing, f"{_rel(document)} names paths that are not in the repository: {missing}"


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_module_named_from_inside_its_package_exists(document):
    missing = sorted({p for p in SHORT_PATH.findall(_text(document))
                      if not any((ROOT / top / p).is_file() for top in ("assets", "dagster_project"))})
    assert not missing, f"{_rel(document)} names modules that are in neither assets/ nor dagster_project/: {missing}"


def _module_file(name: str) -> Path | None:
    base = ROOT / name.replace(".", "/")
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _top_level_names(path: Path) -> set[str]:
    names = set()
    for node in ast.parse(_text(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def module_reference_exists(dotted: str) -> bool:
    """``a.b.c`` is a module, or a module followed by a name it defines (``a.b.func``, ``a.b.Class.attr``)."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        return not rest or rest[0] in _top_level_names(path)
    return False


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_module_named_exists(document):
    missing = sorted({m.rstrip(".") for m in MODULE.findall(_text(document))} - {""})
    missing = [m for m in missing if not module_reference_exists(m)]
    assert not missing, f"{_rel(document)} names modules or names that the code does not have: {missing}"


@pytest.fixture(scope="module")
def commands() -> dict[str, set[str]]:
    """Each ``veritas`` command with its sub-commands, from the parser ``veritas`` builds (docs/hooks.py)."""
    spec = importlib.util.spec_from_file_location("veritas_docs_hooks_refs", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    out = {}
    for name, _, parser in hooks._subcommands(hooks.veritas_parser()):
        out[name] = {sub for sub, _, _ in hooks._subcommands(parser)}
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_veritas_command_named_exists(document, commands):
    wrong = []
    for match in COMMAND.finditer(_text(document)):
        first, _, second = match.group(1).partition(" ")
        if first not in commands:
            wrong.append(first)
        elif commands[first] and second and second not in commands[first] and not second.startswith("-"):
            wrong.append(f"{first} {second}")
    # prose such as "veritas is", "veritas and": only words the parser could never take count as commands
    prose = {"is", "and", "a", "the", "to", "in", "on", "of", "for", "as", "runs", "with", "its", "or", "has", "does",
             "itself", "reads", "writes", "benchmark", "handbook", "program", "command", "commands", "code", "config",
             "release", "releases", "itself", "makes", "starts", "uses", "prints", "keeps", "never", "checks",
             "builds", "stages", "turns", "evaluates", "can", "will", "quarter", "project", "site"}
    wrong = sorted({w for w in wrong if w.split(" ")[0] not in prose})
    assert not wrong, f"{_rel(document)} names veritas commands that do not exist: {wrong}"


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][\w-]*):", _text(ROOT / "Makefile"), re.M))


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_make_target_named_exists(document):
    wrong = sorted(set(MAKE.findall(_text(document))) - make_targets())
    assert not wrong, f"{_rel(document)} names make targets that the Makefile lacks: {wrong}"


@pytest.fixture(scope="module")
def config_fields() -> dict[str, set[str]]:
    from dagster_project.config import _section_models

    out = {}
    for section, model in _section_models().items():
        out[section] = set(model.model_fields)
        for name, field in model.model_fields.items():
            inner = getattr(field.annotation, "model_fields", None)
            if inner:
                out[f"{section}.{name}"] = set(inner)
    return out


@pytest.mark.parametrize("document", DOCUMENTS, ids=_rel)
def test_every_config_key_named_exists(document, config_fields):
    wrong = []
    for key in KEY.findall(_text(document)):
        section, name, *deeper = key.split(".")
        if name in FILE_SUFFIXES:
            continue
        if name not in config_fields.get(section, set()):
            wrong.append(key)
        elif deeper and f"{section}.{name}" in config_fields and deeper[0] not in config_fields[f"{section}.{name}"]:
            wrong.append(key)
    assert not wrong, f"{_rel(document)} names config keys that no settings model has: {sorted(set(wrong))}"


README_SECTION = re.compile(r"README(?:\.md)?,? [\"']([^\"']+)[\"']")


def test_every_readme_section_named_exists():
    """The config files, the systems and the code's messages once sent readers to README sections that had moved
    into the handbook; a section named must be one of the README's headings."""
    headings = {h.strip() for h in re.findall(r"^#+ (.+)$", _text(ROOT / "README.md"), re.M)}
    sources = [*DOCUMENTS, *(ROOT / "assets").rglob("*.py"), *(ROOT / "dagster_project").rglob("*.py")]
    wrong = sorted({f"{_rel(path)}: {name}" for path in sources for name in README_SECTION.findall(_text(path))
                    if name.split(":")[0].strip() not in headings})
    assert not wrong, f"README sections that do not exist: {wrong}"


def test_the_checks_see_real_references():
    """The patterns find what the documents really name (a check that finds nothing passes on anything)."""
    architecture = _text(ROOT / "docs" / "architecture.md")
    assert "assets/stage/tables.py" in named_paths(architecture) or "dagster_project/definitions.py" in named_paths(
        architecture)
    assert not path_exists("assets/no_such_module.py") and not module_reference_exists("assets.release.release")
    assert module_reference_exists("dagster_project.stage_settings.ClaimRules")
    assert not module_reference_exists("dagster_project.config.NoSuchName")
    assert {"test", "demo", "dev", "docs", "check-defs"} <= make_targets()
