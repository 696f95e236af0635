"""Issue 47: the code location reaches Dagster's private API only through ``dagster_project/core/dagster_private.py``,
and every private name it lists is still where it says: a Dagster upgrade that moves one fails here, naming it,
instead of in the middle of a maintainer's backfill."""

import ast
from pathlib import Path

import pytest

from dagster_project.core.dagster_private import INSTANCE_ATTRIBUTES, PRIVATE, private

ROOT = Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "dagster_project" / "core" / "dagster_private.py"


@pytest.mark.parametrize("name", sorted(PRIVATE))
def test_every_private_name_is_where_the_adapter_says(name):
    module, attribute = PRIVATE[name]
    try:
        found = private(name)
    except (ImportError, AttributeError) as err:
        pytest.fail(f"Dagster moved {module}.{attribute} ({err}): update dagster_project/core/dagster_private.py")
    assert found is not None


def test_the_instance_attributes_that_veritas_backfill_replaces_exist():
    import dagster as dg

    with dg.instance_for_test() as instance:
        missing = [a for a in INSTANCE_ATTRIBUTES if not hasattr(instance, a)]
        assert not missing, f"DagsterInstance no longer has {missing}: update dagster_project/core/dagster_private.py"
        from dagster_project.core.dagster_private import replace_compute_log_manager

        manager = private("NoOpComputeLogManager")()
        replace_compute_log_manager(instance, manager)
        assert instance.compute_log_manager is manager  # the public property reads the attribute replaced


def private_uses(path: Path) -> list[str]:
    """Imports of ``dagster._...`` and assignments to an object's ``_run_launcher`` or ``_compute_log_manager``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dagster._"):
            found.append(f"{node.lineno}: from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: import {a.name}" for a in node.names if a.name.startswith("dagster._")]
        elif isinstance(node, ast.Assign):
            found += [f"{node.lineno}: sets .{t.attr}" for t in node.targets
                      if isinstance(t, ast.Attribute) and t.attr in INSTANCE_ATTRIBUTES]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "dagster._" in node.value:
            found.append(f"{node.lineno}: names {node.value.strip()[:60]!r}")
    return found


def test_no_module_of_the_code_location_reaches_the_private_api_itself():
    modules = [p for top in ("assets", "dagster_project", "schemas", "prompts") for p in (ROOT / top).rglob("*.py")
               if p != ADAPTER]
    assert len(modules) > 100
    wrong = {str(p.relative_to(ROOT)): uses for p in modules if (uses := private_uses(p))}
    assert not wrong, f"private Dagster API outside dagster_project/core/dagster_private.py: {wrong}"


def test_the_scan_sees_a_private_import(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from dagster._core.utils import make_new_backfill_id\ninstance._run_launcher = None\n")
    assert private_uses(sample) == ["1: from dagster._core.utils", "2: sets ._run_launcher"]
