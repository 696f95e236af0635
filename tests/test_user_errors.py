"""Issue 35: a careless user's config and command line end in one line that names the file, the line and the key (or
the path) and says what to do, never in a traceback, and never in a run that quietly uses the defaults."""

import os
from pathlib import Path

import pytest
import yaml

from dagster_project.cli import main
from dagster_project.config import ConfigError, load_config
from dagster_project.core.config_file import load_config as read_config
from dagster_project.core.quarters import current_quarter
from tests.conftest import write_demo_config


def _config(folder: Path, edit) -> str:
    """The demo config, edited as a user would (``edit`` gets the parsed YAML, or returns the new text)."""
    path = Path(write_demo_config(folder))
    raw = yaml.safe_load(path.read_text())
    text = edit(raw)
    path.write_text(text if isinstance(text, str) else yaml.safe_dump(raw, sort_keys=False))
    return str(path)


def _line_of(path: str, needle: str) -> int:
    return next(i for i, line in enumerate(Path(path).read_text().splitlines(), 1) if needle in line)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("section,key,nearest", [
    ("stages", "relase_size", "release_size"),
    ("web", "modee", "mode"),
    ("llm", "cache_pth", "cache_path"),
    ("store", "rooot", "root"),
])
def test_a_mistyped_key_is_refused_with_the_nearest_known_one(tmp_path, section, key, nearest):
    def edit(raw):
        raw[section] = {**(raw.get(section) or {}), key: 5}

    cfg = _config(tmp_path, edit)
    with pytest.raises(ConfigError) as err:
        load_config(cfg)  # before the fix: accepted, and the run used the default
    assert str(err.value) == (f"{cfg}:{_line_of(cfg, key + ':')}: {section}.{key}: unknown key; "
                              f"did you mean {nearest}?")


def test_a_mistyped_key_deeper_down_is_found_where_the_file_writes_it(tmp_path):
    def source(raw):
        raw["sources"][0]["pth"] = raw["sources"][0].pop("path")

    def member(raw):
        raw["llm"]["members"][1]["modle"] = raw["llm"]["members"][1].pop("model")

    cfg = _config(tmp_path, source)
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value) == f"{cfg}:{_line_of(cfg, 'pth:')}: sources[0].pth: unknown key; did you mean path?"
    cfg = _config(tmp_path, member)
    with pytest.raises(ConfigError, match=r"llm\.members\[1\]\.modle: unknown key; did you mean model\?"):
        load_config(cfg)


@pytest.mark.parametrize("key,value,says", [
    ("release_size", -5, "must be greater than 0, not -5"),
    ("release_size", 0, "must be greater than 0, not 0"),
    ("media_share", 1.5, "must be less than or equal to 1, not 1.5"),
    ("expected_rewrite_success", 0, "must be greater than 0, not 0"),
    ("min_ratings", "three", "must be a valid integer, unable to parse string as an integer, not 'three'"),
])
def test_a_value_out_of_its_range_is_refused(tmp_path, key, value, says):
    cfg = _config(tmp_path, lambda raw: raw["stages"].__setitem__(key, value))
    with pytest.raises(ConfigError) as err:
        load_config(cfg)
    assert str(err.value) == f"{cfg}:{_line_of(cfg, key + ':')}: stages.{key}: {says}"


def test_the_shipped_configs_pass_the_checks():
    root = Path(__file__).resolve().parents[1]
    for name in ("veritas.yaml", "veritas.real.yaml"):
        load_config(root / name)


@pytest.mark.parametrize("case", ["invalid_yaml", "web_5", "folder", "list", "pools_0", "unknown_section"])
def test_a_broken_config_file_gives_one_line_naming_file_line_and_key(tmp_path, capsys, case):
    if case == "folder":
        cfg, expected = str(tmp_path), f"veritas: {tmp_path}: is a folder, not a config file: give --config a YAML file"
    else:
        cfg = str(tmp_path / "veritas.yaml")
        text, expected = {
            "invalid_yaml": ("data_dir: x\nstages:\n  release_size: [1000\n",
                             "4:1: not valid YAML (expected ',' or ']', but got '<stream end>'): fix the file there"),
            "web_5": ("data_dir: x\nweb: 5\n",
                      "2: web: must be a mapping of settings (e.g. 'web: {name: value}'), not 5"),
            "list": ("- data_dir: x\n", "1: the config must be a mapping of sections (data_dir, sources, web, ...), "
                                        "not list"),
            "pools_0": ("pools:\n  llm: 0\n", "2: pools.llm: must be a whole number of steps >= 1, not 0"),
            "unknown_section": ("data_dir: x\nstage:\n  release_size: 10\n", "2: stage: unknown key; did you mean "
                                "stages? (the sections are: alerts, data_dir, executor, freshness, instance, llm, pools, "
                                "schedule, sources, stages, store, web)"),
        }[case]
        Path(cfg).write_text(text)
        expected = f"veritas: {cfg}:{expected}"
    for command in (["yields", "--quarter", "2020Q2"], ["costs"], ["export", "--quarter", "2020Q2", "--out",
                                                                    str(tmp_path / "out")]):
        assert main(["--config", cfg, *command]) == 2  # before the fix: a traceback
        assert _one_line(capsys) == expected


@pytest.mark.parametrize("quarter", ["1999Q1", "9999Q4", "2015Q4"])
def test_run_names_the_quarters_that_exist(tmp_path, capsys, quarter):
    cfg = write_demo_config(tmp_path)
    assert main(["--config", cfg, "run", "--quarter", quarter]) == 2  # before the fix: DagsterUnknownPartitionError
    assert _one_line(capsys) == (f"veritas: quarter {quarter} has no partition: the quarters run from 2016Q1 to "
                                 f"{current_quarter()} (the running quarter); give one of those")


COMMANDS = {
    "run": ["run", "--quarter", "2020Q2"],
    "yields": ["yields", "--quarter", "2020Q2"],
    "costs": ["costs"],
    "export": ["export", "--quarter", "2020Q2", "--out", "{out}"],
    "leaderboard": ["leaderboard"],
    "backfill": ["backfill", "--from", "2020Q2", "--to", "2020Q3"],
    "plan": ["plan", "--quarter", "2020Q2"],
    "evaluate": ["evaluate", "--predictions", "{out}/p.json", "--release", "{out}/r"],
}


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_data_dir_that_is_a_file_gives_one_line_in_every_command(tmp_path, capsys, command):
    data_dir = tmp_path / "data-as-file"
    data_dir.write_text("not a folder")
    cfg = _config(tmp_path, lambda raw: raw.__setitem__("data_dir", str(data_dir)))
    argv = [a.format(out=tmp_path / "out") for a in COMMANDS[command]]
    assert main(["--config", cfg, *argv]) == 2  # before the fix: NotADirectoryError and its traceback
    assert _one_line(capsys) == (f"veritas: data dir {data_dir} is a file, not a folder: move the file away, or set "
                                 f"data_dir in {cfg} to another folder")


@pytest.mark.parametrize("command", ["export", "leaderboard", "yields", "run"])
def test_an_unreadable_data_dir_gives_one_line(tmp_path, capsys, monkeypatch, command):
    data_dir = tmp_path / "locked"
    data_dir.mkdir()
    cfg = _config(tmp_path, lambda raw: raw.__setitem__("data_dir", str(data_dir)))
    if os.geteuid() == 0:  # root reads every folder: the permission is denied the way the kernel would
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if Path(p) == data_dir else real(p, mode, **kw))
    else:
        data_dir.chmod(0)
        monkeypatch.setattr(data_dir, "chmod", data_dir.chmod)  # restored below
    try:
        argv = [a.format(out=tmp_path / "out") for a in COMMANDS[command]]
        assert main(["--config", cfg, *argv]) == 2  # before the fix: PermissionError tracebacks in export, leaderboard
        can = "read" if command in ("export", "yields") else "read and written"
        assert _one_line(capsys) == (f"veritas: data dir {data_dir} cannot be {can} by this user: give it the "
                                     f"permissions (chmod u+rwx {data_dir}), or set data_dir in {cfg} to another "
                                     "folder")
    finally:
        os.chmod(data_dir, 0o755)


def test_the_light_loader_checks_the_shape_without_dagster(tmp_path):
    """The read-only commands load the config without Dagster: the file's shape is checked there too."""
    path = tmp_path / "veritas.yaml"
    path.write_text("sources:\n  - kind: datafeed\n    path: 5\n")
    with pytest.raises(ConfigError, match=r"veritas.yaml:3: sources\[0\]\.path: must be a path or a URL, not 5"):
        read_config(path)


def test_backfill_and_plan_name_the_quarters_that_exist(tmp_path, capsys):
    cfg = write_demo_config(tmp_path)
    for argv in (["backfill", "--from", "1999Q1", "--to", "1999Q4"], ["plan", "--quarter", "9999Q4"]):
        assert main(["--config", cfg, *argv]) == 2  # before: every key of the range listed; a run to make 9999Q4
        assert "has no partition: the quarters run from 2016Q1 to " in _one_line(capsys)


def test_a_store_root_under_a_file_is_named_too(tmp_path, capsys):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    cfg = _config(tmp_path, lambda raw: raw.__setitem__("store", {"root": str(blocker / "data")}))
    assert main(["--config", cfg, "yields", "--quarter", "2020Q2"]) == 2
    assert _one_line(capsys) == (f"veritas: store root {blocker / 'data'} cannot be made: {blocker} is a file, not a "
                                 f"folder: move the file away, or set store.root in {cfg} to another folder")


def test_a_mistyped_source_kind_is_refused_before_the_run(tmp_path):
    cfg = _config(tmp_path, lambda raw: raw["sources"][0].__setitem__("kind", "datafed"))
    with pytest.raises(ConfigError) as err:
        load_config(cfg)  # before the fix: the run failed in review_snapshot, after loading the code location
    assert str(err.value) == (f"{cfg}:{_line_of(cfg, 'kind:')}: sources[0].kind: must be 'datafeed', 'factcheck_api', "
                              "'factcheck_api_live' or 'page_markup', not 'datafed'")
