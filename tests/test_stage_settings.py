"""Issue 47: each stage receives the settings it reads, one model per stage or group of stages, named in its asset's
signature; the config file keeps its one flat ``stages:`` section, each key owned by exactly one model."""

import ast
import inspect
from pathlib import Path

import pytest

from dagster_project.stage_settings import OWNER, STAGE_SETTINGS, stage_settings

ROOT = Path(__file__).resolve().parents[1]
SIDE_EFFECTS = {"store", "web", "llm"}  # the resources that are not settings
DAGSTER_OWN = {"io_manager"}  # every asset requires it; Dagster provides it


def test_every_key_of_the_stages_section_belongs_to_exactly_one_model():
    seen: dict[str, str] = {}
    for key, model in STAGE_SETTINGS.items():
        for field in model.model_fields:
            assert field not in seen, f"stages.{field} is a field of both {seen[field]} and {key}"
            seen[field] = key
    assert seen == OWNER
    assert len(seen) > 50  # the whole of the old single settings object


def test_the_flat_section_is_routed_to_the_models_that_own_its_keys():
    settings = stage_settings({"release_size": 20, "refine_rounds": 0, "max_words": 40, "score": "all"})
    assert settings["release_rules"].release_size == 20 and settings["rectifying"].refine_rounds == 0
    assert settings["claim_rules"].max_words == 40 and settings["demand"].score == "all"
    assert settings["scoring"].min_ratings == 3  # a key the file leaves out keeps its default


def test_a_config_with_a_stages_key_of_any_model_loads_and_an_unknown_one_names_the_nearest(tmp_path):
    from dagster_project.config import ConfigError, load_config

    good = tmp_path / "good.yaml"
    good.write_text("stages:\n  release_size: 20\n  refine_rounds: 1\n  bootstrap_resamples: 50\n  platforms: {enabled: false}\n")
    assert load_config(good)["stages"]["refine_rounds"] == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("stages:\n  release_size: 20\n  refine_round: 1\n")
    with pytest.raises(ConfigError, match=r"bad.yaml:3: stages.refine_round: unknown key; did you mean refine_rounds\?"):
        load_config(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("stages:\n  refine_rounds: -1\n")
    with pytest.raises(ConfigError, match=r"wrong.yaml:2: stages.refine_rounds: .*greater than or equal to 0"):
        load_config(wrong)


@pytest.fixture(scope="module")
def definitions():
    from dagster_project.definitions import defs

    return defs


def test_every_asset_names_its_settings_in_its_signature_and_no_bag(definitions):
    """Dagster injects a resource by parameter name: each asset's settings are the parameters its function takes,
    and they are settings models or the three side-effect resources."""
    known = set(STAGE_SETTINGS) | SIDE_EFFECTS
    used: set[str] = set()
    for asset in definitions.assets:
        keys = set(asset.required_resource_keys) - DAGSTER_OWN
        assert keys <= known, f"{asset.key.to_user_string()} requires {sorted(keys - known)}"
        fn = asset.op.compute_fn.decorated_fn
        params = set(inspect.signature(fn).parameters) - {"context"}
        assert params == keys, f"{asset.key.to_user_string()}: signature {sorted(params)} against resources {sorted(keys)}"
        for name in params & set(STAGE_SETTINGS):
            annotation = inspect.signature(fn).parameters[name].annotation
            assert annotation is STAGE_SETTINGS[name], f"{fn.__name__}({name}: {annotation})"
        used |= keys
    for check in definitions.asset_checks:
        used |= set(check.required_resource_keys) - DAGSTER_OWN
    unread = set(STAGE_SETTINGS) - used
    assert not unread, f"settings no asset or check reads: {sorted(unread)}"


def modules_naming(field: str) -> set[str]:
    """The project modules whose code reads ``field`` as an attribute or names it as a keyword."""
    out = set()
    for top in ("assets", "dagster_project"):
        for path in (ROOT / top).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and node.attr == field) or (
                        isinstance(node, ast.keyword) and node.arg == field) or (
                        isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == field):
                    out.add(str(path.relative_to(ROOT)))
    return out


def test_walking_refine_rounds_stays_within_stage_7_and_its_settings():
    """The setting the issue walked through 8 modules: now its model and stage 7 (``veritas plan`` asks stage 7's
    ``refinements`` for the rounds it counts)."""
    assert modules_naming("refine_rounds") == {"dagster_project/stage_settings.py", "assets/claims/rectified_claims.py"}
