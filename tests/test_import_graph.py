"""The floors of the code (issue 47): every module of the project's packages sits on a floor, and an import points
down or sideways on its floor, never up, and never round in a circle (issue 16), counting imports inside functions
too (a lazy import back up ties the modules together as one at the top does). The graph is read from the source with
``ast``. The Dagster-free floors are also imported, each module alone in a fresh interpreter. Issue 36: the code
location, and the process of an ingestion backfill, import no library that only the later stages use."""

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("assets", "dagster_project", "schemas", "prompts")

# bottom to top; a module's floor is that of the longest prefix naming it (docs/architecture.md shows them)
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("the data and the questions", ("schemas", "prompts")),
    ("core: config file, quarters, cost ledger, instance records, yields page", ("dagster_project.core",)),
    ("runtime base: partitions, the resources and their config, each stage's settings", (
        "dagster_project.partitions", "dagster_project.config", "dagster_project.resources",
        "dagster_project.stage_settings", "dagster_project.alerts")),
    ("the rules the stages share", ("assets.rules",)),
    ("what every stage shares: its wiring and tables, the ensemble", ("assets.stage", "assets.ensemble")),
    ("the release's selection and the demand plans of stages 6 and 7", ("assets.selection",)),
    ("stages 1-2", ("assets.ingestion",)),
    ("stages 3-4", ("assets.scraping",)),
    ("stages 5-7", ("assets.claims",)),
    ("the release and its audit", ("assets.release", "assets.audit")),
    ("the jobs that read the release", ("assets.evaluation",)),
    ("checks, schedule, executors, simulation", (
        "dagster_project.checks", "dagster_project.schedules", "dagster_project.executors",
        "dagster_project.simulation", "dagster_project.freshness", "dagster_project.sensors")),
    ("the definitions", ("dagster_project.definitions",)),
    ("running a quarter, the reports", ("dagster_project.quarter_run", "dagster_project.yield_report")),
    ("the commands", ("dagster_project.commands",)),
    ("the program", ("dagster_project.cli",)),
]
# modules that load without Dagster: the read-only commands start from the core, and the stages' rules run in
# worker processes and tools that never load the code location
DAGSTER_FREE = ("dagster_project.core", "assets.rules", "schemas", "prompts")
# a group whose stages may not import each other: what stages 5, 6 and 7 share sits on a floor below them
SEPARATE_STAGES = ("assets.claims",)


def project_modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the packages (a package is its ``__init__``)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The project modules that ``name`` imports anywhere in its file."""
    is_package = path.name == "__init__.py"
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            # ``from package import module`` names the module; ``from module import function`` the module itself
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # ``import a.b.c`` of a function-less path: its nearest module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_circle_finder_sees_function_level_and_relative_imports(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n")
    (pkg / "c.py").write_text("import pkg.a\n")
    (pkg / "d.py").write_text("from pkg.a import x\n")
    modules = {"pkg": pkg / "__init__.py", **{f"pkg.{m}": pkg / f"{m}.py" for m in "abcd"}}
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}, "pkg.d": {"pkg.a"}}
    assert circles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]


def test_no_import_circles():
    modules = project_modules()
    assert {"assets.ingestion.reviews", "dagster_project.cli", "schemas.records"} <= set(modules)
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert "assets.ingestion.sources" in graph["assets.ingestion.cleaning"]  # the walk sees real edges
    assert circles(graph) == []


def test_resources_never_import_the_stages():
    """Issue 28: the arrows run from the stages (assets) down to the resources, never up."""
    modules = project_modules()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    resources = [name for name in graph if name.startswith("dagster_project.resources")]
    assert "dagster_project.resources.media" in resources and "dagster_project.resources.store" in graph
    upward = {name: sorted(t for t in graph[name] if t.split(".")[0] == "assets") for name in resources}
    assert {name: targets for name, targets in upward.items() if targets} == {}


def floor_of(name: str) -> int | None:
    best, level = -1, None
    for i, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and len(prefix) > best:
                best, level = len(prefix), i
    return level


def graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_every_module_sits_on_a_floor():
    top_packages = set(PACKAGES)
    homeless = sorted(n for n in project_modules() if n not in top_packages and floor_of(n) is None)
    assert not homeless, f"modules on no floor (add them to FLOORS): {homeless}"


def test_no_import_points_up():
    up = [f"{a} (floor {floor_of(a)}: {FLOORS[floor_of(a)][0]}) imports {b} (floor {floor_of(b)}: "
          f"{FLOORS[floor_of(b)][0]})"
          for a, targets in sorted(graph().items()) for b in sorted(targets)
          if floor_of(a) is not None and floor_of(b) is not None and floor_of(b) > floor_of(a)]
    assert not up, "imports that point up a floor:\n" + "\n".join(up)


def test_stages_5_to_7_share_rules_only_through_floors_below_them():
    across = [f"{a} imports {b}" for a, targets in sorted(graph().items()) for b in sorted(targets)
              for group in SEPARATE_STAGES
              if a.startswith(group + ".") and b.startswith(group + ".") and b != group]
    assert not across, "a stage imports another stage of its group:\n" + "\n".join(across)


def dagster_free_modules() -> list[str]:
    return sorted(n for n in project_modules() if any(n == p or n.startswith(p + ".") for p in DAGSTER_FREE))


def test_the_dagster_free_floors_import_no_dagster_module():
    """Read from the source first: a Dagster-free module imports only Dagster-free project modules."""
    free = set(dagster_free_modules())
    edges = graph()
    wrong = [f"{a} imports {b}" for a in sorted(free) for b in sorted(edges[a]) if b not in free]
    assert not wrong, "Dagster-free modules importing project modules that are not:\n" + "\n".join(wrong)


@pytest.mark.parametrize("package", DAGSTER_FREE)
def test_importing_a_dagster_free_module_loads_no_dagster(package):
    """Then for real: each module of the floor, imported alone in a fresh interpreter, leaves no ``dagster`` in
    ``sys.modules`` (a third-party import that pulls it in counts too)."""
    names = [n for n in dagster_free_modules() if n == package or n.startswith(package + ".")]
    assert names
    code = ("import importlib, sys\nbad = []\n"
            f"for name in {names!r}:\n"
            "    before = set(sys.modules)\n"
            "    importlib.import_module(name)\n"
            "    if any(m == 'dagster' or m.startswith('dagster.') for m in sys.modules):\n"
            "        bad.append(name); break\n"
            "print(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", f"importing {out.stdout.strip()} loads Dagster"


# ---- issue 36: what the ingestion stages' processes import -------------------------------------------------------

# Libraries that only the later stages use (claims, scoring, release, evaluation, export). Every run process imports
# the code location, and `veritas backfill` runs the ingestion quarters in its own process: a module-level import of
# one of these in any stage's module made each of them pay for it: the code location took 4.0 s of CPU and 304 MB
# with them (nltk alone pulls scipy, scikit-learn and pandas), 1.8 s and 132 MB without. Import them where used.
LATER_STAGE_LIBRARIES = (
    "nltk", "scipy", "sklearn", "pandas", "threadpoolctl", "trafilatura", "extruct", "rdflib", "yt_dlp", "litellm",
    "openai", "rapidocr_onnxruntime", "onnxruntime", "cv2", "mlcroissant", "datasets", "pyarrow", "matplotlib",
)
REPORT = "import atexit, json, sys\natexit.register(lambda: print('LOADED', json.dumps(sorted(sys.modules))))\n"


def later_stage_libraries_loaded(script: str, cwd: Path) -> list[str]:
    """The ``LATER_STAGE_LIBRARIES`` a fresh interpreter has imported by the end of ``script``."""
    env = {k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"}  # a backfill's instance: under its data dir
    done = subprocess.run([sys.executable, "-c", REPORT + script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    return sorted({m.split(".")[0] for m in json.loads(line[len("LOADED "):])} & set(LATER_STAGE_LIBRARIES))


def test_the_code_location_imports_no_library_that_only_later_stages_use():
    assert later_stage_libraries_loaded("import dagster_project.definitions", ROOT) == []


def test_an_ingestion_backfill_process_imports_no_library_that_only_later_stages_use(tmp_path):
    """The whole `veritas backfill --until trusted_reviews` of a demo quarter, in one process (``--launch auto``)."""
    from tests.conftest import write_demo_config

    config = write_demo_config(tmp_path)
    script = ("import runpy, sys\n"
              f"sys.argv = ['veritas', '--config', {config!r}, 'backfill', '--no-bars', '--from', '2020Q1', '--to',"
              " '2020Q1', '--until', 'trusted_reviews']\n"
              "runpy.run_module('dagster_project.cli', run_name='__main__')\n")
    assert later_stage_libraries_loaded(script, ROOT) == []


def test_a_feed_range_process_starts_without_dagster():
    """Stage 1 spawns a process per byte range of a large feed, and one to detect languages: what they import is
    paid once per range on every parse (Dagster alone took 0.45 s and 40 MB of each)."""
    script = ("import sys, assets.ingestion.feed_ranges, assets.ingestion.languages\n"
              "print('HEAVY', sorted({m.split('.')[0] for m in sys.modules} & {'dagster', 'py3langid', 'numpy'}))")
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HEAVY []" in done.stdout
