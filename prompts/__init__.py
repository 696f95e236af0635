"""Prompt templates (Jinja2, one file per prompt with ``system`` and ``user`` blocks) and the label scheme."""

import hashlib
from functools import lru_cache
from pathlib import Path

import jinja2
import yaml

HERE = Path(__file__).parent
# auto_reload off: a template is read once per process, as its version (template_hash) is; with it on, every render
# stats the template and its partials (about 0.2 ms of CPU per model call, under the GIL that the callers share)
_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE), undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    auto_reload=False,
)


@lru_cache(maxsize=1)
def label_scheme() -> dict:
    return yaml.safe_load((HERE / "label_scheme.yaml").read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def template_hash(name: str) -> str:
    """The version of a prompt: its own text, the partials it includes, and the label scheme."""
    digest = hashlib.sha256((HERE / "label_scheme.yaml").read_bytes())
    for path in sorted(HERE.glob("_*.j2")) + [HERE / f"{name}.j2"]:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def render(name: str, **inputs) -> list[dict]:
    """Chat messages for a prompt; the scheme is available to every template as ``scheme``."""
    template = _env.get_template(f"{name}.j2")
    context = template.new_context({"scheme": label_scheme(), **inputs})
    messages = []
    for role in ("system", "user"):
        text = "".join(template.blocks[role](context)).strip()
        if text:
            messages.append({"role": role, "content": text})
    return messages
