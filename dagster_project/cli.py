"""``veritas``: thin wrappers over Dagster to run quarters, read the stage yields and export a release."""

import argparse
import gc
import importlib
import os
import pkgutil
import sys

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("LITELLM_OFFLINE_MODE", "true")
os.environ.setdefault("DAGSTER_GRPC_TIMEOUT_SECONDS", "300")  # read at import: a busy code server answers late

FIRST = ("demo", "run", "yields")  # the core commands lead ``veritas --help``; the others follow by name


def command_modules() -> list:
    """The subcommand modules under ``dagster_project.commands``; each has ``register(subparsers) -> [parsers]``
    and sets ``handler`` on its parsers. They import heavy libraries inside their handlers, not at import."""
    from dagster_project import commands

    order = sorted(pkgutil.iter_modules(commands.__path__),
                   key=lambda m: (FIRST.index(m.name) if m.name in FIRST else len(FIRST), m.name))
    return [importlib.import_module(f"{commands.__name__}.{m.name}") for m in order]


READ_ONLY = {"yields", "costs", "export", "evaluate", "averitec-score", "models", "plan", "web"}  # write no data_dir


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="veritas", description=__doc__)
    parser.add_argument("--config", help="config file (default: $VERITAS_CONFIG or veritas.yaml)")
    sub = parser.add_subparsers(dest="command", required=True)
    extra = []
    for module in command_modules():  # each dagster_project/commands/<name>.py adds its own subcommand(s)
        extra.extend(module.register(sub))
    for p in extra:
        p.add_argument("--config", default=argparse.SUPPRESS, help="config file")
    args = parser.parse_args(argv)
    try:
        from dagster_project.core.config_file import check_data_dir, load_config

        check_data_dir(load_config(args.config), writes=args.command not in READ_ONLY)
        if getattr(args, "handler", None):
            return args.handler(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"veritas: {err}", file=sys.stderr)
        return 2
    return 1


def entry() -> int:
    """The ``veritas`` program: ``main``, whose objects are then left for the exit to free (``gc.freeze``): Python's
    last collection at exit walked every object the Dagster code location made, 0.7 s after each command."""
    code = main()
    gc.freeze()
    return code


if __name__ == "__main__":
    sys.exit(entry())
