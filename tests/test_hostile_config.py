"""Issue 51, section 3: a hostile config file or environment ends in one short line naming the file (and the line) or
the variable, never in gigabytes of memory, a message that echoes a huge value, a silently dropped section or a
traceback. The alias bombs run in a child process under a memory limit, which a bomb expanded anywhere would pass."""

import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dagster_project.cli import main
from dagster_project.config import load_config as check_and_load
from dagster_project.core.config_file import (
    ALIAS_BUDGET,
    SHOWN_CHARS,
    ConfigError,
    _yaml_load,
    load_config,
    log_level,
)
from tests.conftest import write_demo_config

ROOT = Path(__file__).resolve().parents[1]
MEMORY_LIMIT = 1536 * 2**20  # address space of the child: a bomb expanded by repr, iteration or a check needs GBs
PEAK_RSS_KB = 400 * 1024  # the child's peak resident memory when the bomb is refused (it imports no Dagster)
NO_QUARTER = "1999Q1"  # a quarter with no data: a command that got past the config check fails on it, in one line


def bomb(levels: int = 9, width: int = 9) -> str:
    """A "billion laughs" as one flow value: ``width ** levels`` strings once its aliases are expanded."""
    parts = [f"&a0 [{', '.join(['lol'] * width)}]"]
    parts += [f"&a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return f"[{', '.join(parts)}]"


def _with(folder: Path, text: str) -> str:
    """The demo config (a valid one) with ``text`` appended in place of the sections it writes."""
    path = Path(write_demo_config(folder))
    raw = yaml.safe_load(path.read_text())
    for section in re.findall(r"^(\w+):", text, flags=re.MULTILINE):
        raw.pop(section, None)
    path.write_text(yaml.safe_dump(raw, sort_keys=False) + text)
    return str(path)


def _line_of(path: str, needle: str, after: str = "") -> int:
    """The first line holding ``needle`` (after the first line that starts with ``after``)."""
    lines = Path(path).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(after)) if after else 0
    return next(i for i, line in enumerate(lines[start:], start + 1) if needle in line)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err and len(err) < 300, err[:2000]
    return err


# the child's own peak resident memory: VmHWM belongs to its address space, made anew at exec, whereas getrusage's
# ru_maxrss carries over the peak of the process it was forked from (pytest's, over 1 GB late in a full run)
CHILD = """
import sys
from dagster_project.cli import main
rc = main(sys.argv[1:])
with open("/proc/self/status") as status:
    print(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
sys.exit(rc)
"""


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


@pytest.mark.parametrize("section,text,command", [
    ("release_size", f"stages:\n  release_size: {bomb()}\n", "run"),
    ("executor", f"executor:\n  kind: multiprocess\n  max_concurrent: {bomb()}\n", "run"),
    ("data_dir", f"data_dir: {bomb()}\n", "yields"),
    ("pools", f"pools:\n  llm: {bomb()}\n", "yields"),
])
def test_an_alias_bomb_is_one_short_line_in_little_memory(tmp_path, section, text, command):
    cfg = _with(tmp_path, text)
    done = subprocess.run([sys.executable, "-c", CHILD, "--config", cfg, command, "--quarter", NO_QUARTER],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, preexec_fn=_limited,
                          env={"PATH": "/usr/bin:/bin", "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HOME": str(tmp_path)})
    err = done.stderr.strip()
    # before the fix: a 2 GB message, or a MemoryError's traceback under the limit
    assert done.returncode == 2, err[-2000:]
    assert err.count("\n") == 0 and len(err) < 300, err[:2000]
    assert err.startswith(f"veritas: {cfg}:{_line_of(cfg, '&a0')}: the aliases expand past {ALIAS_BUDGET} "), err
    assert int(done.stdout.split()[-1]) < PEAK_RSS_KB


def _weight(value, budget: int) -> int:
    """Nodes plus characters of a loaded value with every shared part counted each time, up to ``budget`` + 1."""
    total, stack = 0, [value]
    while stack and total <= budget:
        item = stack.pop()
        if isinstance(item, dict):
            total += 1
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            total += 1
            stack.extend(item)
        else:
            total += 1 + len(str(item))
    return total


@st.composite
def aliased_config(draw) -> tuple[str, int]:
    """A config whose one hostile value nests anchors and aliases at random (and a value's literal size)."""
    parts: list[str] = []
    for i in range(draw(st.integers(1, 7))):
        width = draw(st.integers(0, 8))
        items = [draw(st.sampled_from([f"*a{j}" for j in range(i)] or ["lol"])) if i and draw(st.booleans())
                 else draw(st.sampled_from(["lol", "1", "x" * 40, "{k: v}"])) for _ in range(width)]
        if draw(st.booleans()):  # a mapping of the items, keyed apart (a key written twice is another refusal)
            parts.append(f"&a{i} {{{', '.join(f'k{n}: {item}' for n, item in enumerate(items))}}}")
        else:
            parts.append(f"&a{i} [{', '.join(items)}]")
        if i and draw(st.booleans()):  # the same alias again and again: each use counts
            parts.append(f"[{', '.join([f'*a{i}'] * draw(st.integers(1, 8)))}]")
    value = f"[{', '.join(parts)}]"
    where = draw(st.sampled_from(["stages:\n  release_size: {v}\n", "data_dir: {v}\n", "pools:\n  llm: {v}\n",
                                  "executor:\n  max_concurrent: {v}\n", "web:\n  warc_paths: {v}\n"]))
    return where.format(v=value), len(value)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(aliased_config())
def test_nested_aliases_load_within_the_bound_or_raise_one_short_config_error(tmp_path, case):
    text, literal = case
    path = tmp_path / "veritas.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        raw = _yaml_load(text)
    except yaml.YAMLError:
        pass
    else:
        bound = literal + ALIAS_BUDGET  # what the file writes, and what its aliases may add
        assert _weight(raw, bound) <= bound
    try:
        load_config(path)
    except ConfigError as err:
        message = str(err)
        assert message.startswith(f"{path}:") and "\n" not in message and len(message) < 300 + len(str(path)), \
            message[:2000]


@pytest.mark.parametrize("text,key,lines", [
    ("stages:\n  release_size: 10\ndata_dir: data\nstages:\n  min_ratings: 2\n", "stages", (1, 4)),
    ("stages:\n  release_size: 10\n  min_ratings: 2\n  release_size: 20\n", "release_size", (2, 4)),
    ("sources:\n  - kind: datafeed\n    path: a.json\n    path: b.json\n", "path", (3, 4)),
])
def test_a_key_written_twice_is_refused_with_both_lines(tmp_path, capsys, text, key, lines):
    cfg = tmp_path / "veritas.yaml"
    cfg.write_text(text)
    assert main(["--config", str(cfg), "yields", "--quarter", NO_QUARTER]) == 2  # before: the first silently dropped
    assert _one_line(capsys) == (f"veritas: {cfg}:{lines[1]}: the key {key} is written twice in one mapping, at "
                                 f"lines {lines[0]} and {lines[1]}: keep one (YAML would silently drop the first)")


def test_an_alias_inside_the_node_it_names_is_refused(tmp_path):
    cfg = tmp_path / "veritas.yaml"
    cfg.write_text("stages: &s\n  release_size: 10\n  nested: *s\n")
    with pytest.raises(ConfigError, match=r":3: the alias \*s is inside the node it names"):
        load_config(cfg)


@pytest.mark.parametrize("text,key", [
    ("data_dir: [{long}]\n", "data_dir"),
    ("stages:\n  release_size: {long}\n", "stages.release_size"),
    ("pools:\n  llm: {long}\n", "pools.llm"),
    ("stages:\n  ? {long}\n  : 1\n", "stages.xxxx"),  # an explicit key: YAML's implicit ones stop at 1024
])
def test_a_message_shows_at_most_a_bounded_part_of_a_value(tmp_path, text, key):
    cfg = _with(tmp_path, text.format(long="x" * 100_000))
    with pytest.raises(ConfigError) as err:
        check_and_load(cfg)  # the shape (config_file) and the settings models (config.check_config)
    message = str(err.value)
    assert message.startswith(f"{cfg}:") and f": {key}" in message and len(message) < len(cfg) + 300, message[:500]
    assert "x" * (SHOWN_CHARS + 1) not in message


def test_a_huge_integer_is_one_line_naming_the_file(tmp_path):
    cfg = tmp_path / "veritas.yaml"
    cfg.write_text("pools:\n  llm: " + "9" * 5000 + "\n")  # Python refuses to build an int of > 4300 digits
    with pytest.raises(ConfigError, match=f"^{cfg}: a value cannot be read"):
        load_config(cfg)


# ---- the environment ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value,said", [("", "is empty"), ("  ", "is empty"), ("bogus", "is 'bogus'"),
                                        ("INFOx", "is 'INFOx'")])
def test_a_bad_log_level_is_one_line_naming_the_variable(monkeypatch, value, said):
    monkeypatch.setenv("VERITAS_LOG_LEVEL", value)
    with pytest.raises(ConfigError) as err:
        log_level("INFO")
    assert str(err.value) == (f"VERITAS_LOG_LEVEL {said}: set it to one of DEBUG, INFO, WARNING, ERROR, CRITICAL "
                              "(any case), or unset it")


def test_a_log_level_is_read_in_any_case_and_defaults_when_unset(monkeypatch):
    monkeypatch.delenv("VERITAS_LOG_LEVEL", raising=False)
    assert log_level("WARNING") == "WARNING"
    for value, level in (("debug", "DEBUG"), ("Warning", "WARNING"), (" error ", "ERROR"), ("CRITICAL", "CRITICAL")):
        monkeypatch.setenv("VERITAS_LOG_LEVEL", value)
        assert log_level("INFO") == level


@pytest.mark.parametrize("command", [["run", "--quarter", NO_QUARTER], ["backfill", "--from", NO_QUARTER]])
def test_the_commands_that_run_stages_refuse_a_bogus_log_level_in_one_line(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setenv("VERITAS_LOG_LEVEL", "bogus")
    monkeypatch.delenv("VERITAS_CONFIG", raising=False)  # restored after: a backfill that got far would set it
    cfg = write_demo_config(tmp_path)
    assert main(["--config", cfg, *command]) == 2  # before: 51 lines of Dagster's config error, once a run started
    assert _one_line(capsys).startswith("veritas: VERITAS_LOG_LEVEL is 'bogus': set it to one of DEBUG, INFO, ")


def test_the_log_level_readers_all_use_the_one_parser():
    for path in sorted((ROOT / "dagster_project").rglob("*.py")):
        if path.name != "config_file.py":
            assert not re.search(r"environ(\.get\(|\[)\s*[\"']VERITAS_LOG_LEVEL", path.read_text()), \
                f"{path} reads $VERITAS_LOG_LEVEL itself, not through config_file.log_level"


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_a_blank_config_variable_is_one_line_naming_it(tmp_path, capsys, monkeypatch, value):
    monkeypatch.setenv("VERITAS_CONFIG", value)
    monkeypatch.chdir(tmp_path)
    assert main(["yields", "--quarter", NO_QUARTER]) == 2  # before: "cannot be read (None)", or veritas.yaml quietly
    assert _one_line(capsys) == (f"veritas: VERITAS_CONFIG is set but blank ({value!r}): set it to a YAML file, or "
                                 "unset it to read veritas.yaml")


# ---- the executor and schedule sections ------------------------------------------------------------------------------


@pytest.mark.parametrize("text,key,says", [
    ("executor:\n  kind: dask\n", "executor.kind", "unknown executor (in_process, multiprocess or celery), not 'dask'"),
    ("executor:\n  kind: multiproces\n", "executor.kind", "unknown executor; did you mean multiprocess?"),
    ("executor:\n  kind: multiprocess\n  max_concurrent: four\n", "executor.max_concurrent",
     "must be a whole number of processes >= 0 (0: one per CPU), not 'four'"),
    ("executor:\n  kind: multiprocess\n  max_concurrent: -2\n", "executor.max_concurrent", ">= 0"),
    ("executor:\n  kind: multiprocess\n  max_concurent: 4\n", "executor.max_concurent",
     "not a setting of the multiprocess executor; did you mean max_concurrent?"),
    ("executor:\n  kind: in_process\n  max_concurrent: 4\n", "executor.max_concurrent",
     "not a setting of the in_process executor (it takes no settings)"),
    ("executor:\n  kind: celery\n  broker: 6379\n", "executor.broker",
     "must be a URL such as redis://127.0.0.1:6379/0, not 6379"),
    ("executor:\n  kind: celery\n  backend: [redis]\n", "executor.backend", "must be a URL"),
    ("executor:\n  kind: celery\n  retries: 3\n", "executor.retries", "must be {enabled: {}} or {disabled: {}}, not 3"),
    ("executor:\n  kind: celery\n  brokr: redis://127.0.0.1:6379/0\n", "executor.brokr", "did you mean broker?"),
    ("schedule:\n  enabled: sometimes\n", "schedule.enabled", "must be true or false, not 'sometimes'"),
    ("schedule:\n  enabled: true\n  cron: 5\n", "schedule.cron", "must be a cron expression"),
    ("schedule:\n  enabled: true\n  cron: every monday\n", "schedule.cron", "not a cron expression Dagster reads"),
    ("schedule:\n  enabeld: true\n", "schedule.enabeld", "unknown key; did you mean enabled?"),
])
def test_run_checks_the_executor_and_schedule_up_front(tmp_path, capsys, text, key, says):
    cfg = _with(tmp_path, text)
    assert main(["--config", cfg, "run", "--quarter", NO_QUARTER]) == 2  # before: no check, the run went on
    err = _one_line(capsys)
    section, name = key.split(".")
    line = _line_of(cfg, f"{name}:", after=f"{section}:")
    assert err.startswith(f"veritas: {cfg}:{line}: {key}: ") and says in err, err


@pytest.mark.parametrize("executor", [{}, {"kind": "in_process"}, {"kind": "multiprocess", "max_concurrent": 0},
                                      {"kind": "multiprocess", "max_concurrent": 4},
                                      {"kind": "celery", "broker": "redis://127.0.0.1:6390/0", "backend": None,
                                       "retries": {"disabled": {}}}])
def test_the_executor_sections_the_docs_show_pass(tmp_path, executor):
    cfg = Path(write_demo_config(tmp_path))
    raw = yaml.safe_load(cfg.read_text())
    raw["executor"], raw["schedule"] = executor, {"enabled": False, "cron": "0 3 8 1,4,7,10 *"}
    cfg.write_text(yaml.safe_dump(raw))
    assert check_and_load(cfg)["executor"] == executor
