"""A Label Studio server through its SDK (``label-studio-sdk``): one project per quarter, created or updated with the
labelling config and the guide, the quarter's tasks added once each (a re-run adds no duplicate), the release's
media served from the store (a Local storage on the release's folder, for local-files serving), and the project's
JSON export read back. The export then goes the offline way (``veritas audit import``): the pipeline reads it."""

import os

TITLE = "veritas audit {quarter}"


class LabelStudioError(ValueError):
    """No server to talk to, or one that refused: the message says what to set or start."""


def connect(url: str, token_env: str):
    """The SDK's client for ``url``, with the access token held by the variable ``token_env`` (a personal access
    token, or a legacy token where the server enables them)."""
    if not url:
        raise LabelStudioError("no Label Studio server: set stages.label_studio_url (or use `veritas audit export`)")
    token = os.environ.get(token_env, "")
    if not token:
        raise LabelStudioError(f"${token_env} is empty: set it to an access token of {url} "
                               "(Account & Settings > Personal Access Token)")
    from label_studio_sdk import LabelStudio  # imported here: 1.7 s, and only these commands need it

    return LabelStudio(base_url=url.rstrip("/"), api_key=token)


def ensure_project(client, quarter: str, label_config: str, instructions: str) -> tuple[int, bool]:
    """The quarter's project (by its title), created, or updated to the current config and guide; (id, created)."""
    title = TITLE.format(quarter=quarter)
    found = [p for p in client.projects.list() if p.title == title]
    if found:
        client.projects.update(found[0].id, label_config=label_config, expert_instruction=instructions,
                               show_instruction=True)
        return found[0].id, False
    project = client.projects.create(title=title, label_config=label_config, expert_instruction=instructions,
                                     show_instruction=True, show_skip_button=False,
                                     description="Judge each claim blind: the evidence is the fact-check article.")
    return project.id, True


def ensure_local_storage(client, project_id: int, folder: str) -> int:
    """A Local storage on ``folder`` (the release's), so that local-files serving lets the project's annotators load
    its media; never synced (the tasks come from the push, not from the files)."""
    for storage in client.import_storage.local.list(project=project_id):
        if (storage.path or "").rstrip("/") == folder.rstrip("/"):
            return storage.id
    return client.import_storage.local.create(project=project_id, path=folder, title="release media",
                                              use_blob_urls=True, recursive_scan=True).id


def task_key(data: dict) -> tuple[str, int]:
    return str(data.get("release_version", "")), int(data.get("claim_id", -1))


def existing_tasks(client, project_id: int) -> dict[tuple[str, int], int]:
    """(release version, claim id) -> Label Studio task id of the project's tasks."""
    return {task_key(t.data or {}): t.id for t in client.tasks.list(project=project_id)}


def push_tasks(client, project_id: int, tasks: list[dict]) -> dict:
    """The tasks the project lacks (by release version and claim id); what was added and what was there."""
    have = existing_tasks(client, project_id)
    new = [t for t in tasks if task_key(t["data"]) not in have]
    if new:
        client.projects.import_tasks(project_id, request=new, commit_to_project=True)
    versions = {task_key(t["data"])[0] for t in tasks}
    return {"added": len(new), "present": len(tasks) - len(new),
            "other_versions": sum(1 for v, _ in have if v not in versions)}


def pull_export(client, project_id: int, release_version: str) -> tuple[list[dict], int]:
    """The project's JSON export, limited to the tasks of ``release_version`` (a rebuilt release's old tasks are left
    out); (tasks, how many were left out)."""
    tasks = client.projects.exports.as_json(project_id, timeout=300)
    kept = [t for t in tasks if task_key(t.get("data") or {})[0] == release_version]
    return kept, len(tasks) - len(kept)
