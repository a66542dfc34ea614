"""The Hub upload of a release folder (docs/architecture.md §1, publish): one commit per release, tagged.

:func:`upload_release` makes ONE commit holding every file of the folder, with the build id and the manifest's
sha256 in its message, and tags it (the tag defaults to the build id). Files of the release's own paths
(``data/``, ``lm_eval/``, ``README.md``, ``manifest.json``, ``transcript.jsonl``) that the Hub holds but the folder
does not, e.g. a shard of an earlier, larger release, are deleted in the same commit; other files are left alone.
A failure anywhere before the commit leaves the repository's history as it was; the local folder is never
touched by an upload.

Publishing an unchanged release again makes NO commit: when the Hub's files already equal the folder's, the
head commit is the release; it is tagged if the tag is missing, and the call reports ``committed=False``.
huggingface_hub would also skip an empty commit on its own (after uploading nothing), but deciding from the
file listing first lets the tag rule be checked before anything changes. A release tag names one build: if the
tag exists on another commit, or the files differ from what it tagged, the upload is refused before any change.

The token is never a parameter: huggingface_hub reads ``HF_TOKEN`` or its own login. It is scrubbed from every
error this module raises, and never written to a file or a log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi, get_token
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils.sha import git_hash

from ..core.artifacts import sha256_file
from ..core.redaction import REDACTED
from ..core.verification import MANIFEST, VerificationError, compare_files, read_manifest, release_expected
from .release import TASK_FOLDER, config_key

log = logging.getLogger(__name__)

MANAGED_FILES = frozenset({"README.md", "manifest.json", "transcript.jsonl"})
MANAGED_PREFIX = "data/"
MANAGED_PREFIXES = (MANAGED_PREFIX, f"{TASK_FOLDER}/")
REPO_TYPE = "dataset"
REVISION = "main"


class PublishError(RuntimeError):
    """The upload to the Hub failed or was refused; the message carries the Hub's own and never the token."""


@dataclass(frozen=True)
class UploadResult:
    """What the Hub holds after an upload: the commit of the release, whether it was made now, and its tag."""

    repo_url: str
    commit_oid: str
    committed: bool
    tag: str
    deleted: tuple[str, ...]

    @property
    def release_url(self) -> str:
        return f"{self.repo_url}/tree/{self.tag}"


_TOKEN_LIKE = re.compile(r"hf_[A-Za-z0-9]{8,}")
"""What a Hub token looks like: scrubbed from errors even when it is not the token in use."""


def scrub(text: str, token: str | None) -> str:
    """``text`` with the token, and anything shaped like a Hub token, replaced by ``[REDACTED]``."""
    if token:
        text = text.replace(token, REDACTED)
    return _TOKEN_LIKE.sub(REDACTED, text)


def _error_text(exc: BaseException) -> str:
    """The messages of an exception and of its causes (huggingface_hub wraps the Hub's error in its own)."""
    messages: list[str] = []
    current: BaseException | None = exc
    while current is not None and len(messages) < 5:
        message = str(current).strip() or type(current).__name__
        if message not in messages:
            messages.append(message)
        current = current.__cause__ or current.__context__
    return " <- ".join(messages)


def _release_files(folder: Path) -> dict[str, Path]:
    """Every file of the release folder by its path in the repository."""
    files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
    if "README.md" not in files or not any(path.startswith(MANAGED_PREFIX) for path in files):
        raise PublishError(f"{folder} is not a release folder (README.md and data/ expected)")
    return files


def _managed(path: str) -> bool:
    return path in MANAGED_FILES or path.startswith(MANAGED_PREFIXES)


def _same(remote: RepoFile | None, local: Path) -> bool:
    """Whether the Hub's file has the local file's content (LFS: sha256; regular: git blob sha1)."""
    if remote is None or remote.size != local.stat().st_size:
        return False
    if remote.lfs is not None:
        return remote.lfs.sha256 == sha256_file(local)
    return remote.blob_id == git_hash(local.read_bytes())


def _commit_text(build_id: str, manifest_sha256: str, files: Mapping[str, Path]) -> tuple[str, str]:
    message = f"PBBQ release of build {build_id} (manifest sha256 {manifest_sha256})"
    configs = sorted({path.split("/")[1] for path in files if path.startswith(MANAGED_PREFIX)}, key=config_key)
    description = "\n".join(
        [
            f"Build: {build_id}",
            f"Manifest sha256: {manifest_sha256}",
            f"Configs: {', '.join(configs)}",
            f"Files: {len(files)}",
        ]
    )
    return message, description


def _check_files(folder: Path, files: Mapping[str, str] | None) -> None:
    """Refuse a release folder that is not what it was written as (``files``) or what its manifest lists for its
    data, task and transcript (:func:`~pbbq.tasks.core.verification.release_expected`): each file differing,
    missing or extra named, before anything reaches the Hub."""
    present = set(_release_files(folder)) - {MANIFEST}
    try:
        manifest = read_manifest(folder)
    except VerificationError as exc:
        raise PublishError(str(exc)) from None
    listed = release_expected(manifest, present)
    found = compare_files(folder, listed, set(listed) & present)
    if files is not None:
        found += compare_files(folder, {path: sha for path, sha in files.items() if path != MANIFEST}, present)
    if found:
        lines = sorted({mismatch.line() for mismatch in found})
        shown = "; ".join(lines[:5]) + (f"; and {len(lines) - 5} more" if len(lines) > 5 else "")
        raise PublishError(f"{folder} is not what its manifest lists; nothing was uploaded: {shown}")


def _upload(
    api: HfApi, folder: Path, repo_id: str, *, private: bool, build_id: str, manifest_sha256: str, tag: str
) -> UploadResult:
    local = _release_files(folder)
    repo_url = str(api.create_repo(repo_id, repo_type=REPO_TYPE, private=private, exist_ok=True))
    info = api.dataset_info(repo_id)
    if private and info.private is False:
        raise PublishError(
            f"{repo_id} exists and is public, but a private release was asked for: make the repository private "
            "on the Hub first, or publish with private = false"
        )
    head: str | None = info.sha
    tagged = next(
        (ref.target_commit for ref in api.list_repo_refs(repo_id, repo_type=REPO_TYPE).tags if ref.name == tag), None
    )
    remote = {}
    if head is not None:
        listing = api.list_repo_tree(repo_id, repo_type=REPO_TYPE, revision=head, recursive=True)
        remote = {entry.path: entry for entry in listing if isinstance(entry, RepoFile)}
    stale = tuple(sorted(path for path in remote if _managed(path) and path not in local))
    unchanged = head is not None and not stale and all(_same(remote.get(path), file) for path, file in local.items())
    if tagged is not None and not (tagged == head and unchanged):
        raise PublishError(
            f"tag {tag!r} exists already on {repo_id} (commit {tagged[:12]}) and does not name this release; "
            "a release tag names one build: publish with another tag"
        )
    if unchanged and head is not None:
        log.info("%s already holds this release at commit %s: no new commit", repo_id, head)
        commit_oid, committed = head, False
    else:
        message, description = _commit_text(build_id, manifest_sha256, local)
        operations: list[CommitOperationAdd | CommitOperationDelete] = [
            CommitOperationAdd(path_in_repo=path, path_or_fileobj=file) for path, file in local.items()
        ]
        operations += [CommitOperationDelete(path_in_repo=path) for path in stale]
        commit = api.create_commit(
            repo_id,
            operations,
            commit_message=message,
            commit_description=description,
            repo_type=REPO_TYPE,
            revision=REVISION,
            parent_commit=head,
        )
        commit_oid, committed = commit.oid, commit.oid != head
        log.info("committed %d file(s) to %s as %s (%d deleted)", len(local), repo_id, commit_oid, len(stale))
    if tagged is None:
        api.create_tag(repo_id, tag=tag, tag_message=f"PBBQ build {build_id}", revision=commit_oid, repo_type=REPO_TYPE)
        log.info("tagged %s of %s as %s", commit_oid, repo_id, tag)
    return UploadResult(repo_url=repo_url, commit_oid=commit_oid, committed=committed, tag=tag, deleted=stale)


def upload_release(
    folder: Path,
    repo_id: str,
    *,
    private: bool,
    build_id: str,
    manifest_sha256: str,
    endpoint: str | None = None,
    tag: str | None,
    files: Mapping[str, str] | None = None,
) -> UploadResult:
    """Publish the release folder to the dataset repository ``repo_id`` as one commit, tagged ``tag`` (default:
    the build id). ``endpoint`` is the Hub's URL (default: ``HF_ENDPOINT`` or huggingface.co). The folder must
    hold the ``manifest.json`` whose sha256 is ``manifest_sha256``, and exactly the files its manifest lists with
    their sha256 (``files``: every file of the folder by path with its sha256, as the release was written; the
    manifest's own list of the release data is checked too, :func:`_check_files`): nothing is uploaded
    otherwise. Raises :class:`PublishError`."""
    token = get_token()
    if token is None:
        raise PublishError("no Hugging Face token: set HF_TOKEN or log in with `hf auth login`")
    manifest = folder / "manifest.json"
    if not manifest.is_file():
        raise PublishError(f"{folder} has no manifest.json; a published release always carries its manifest")
    if sha256_file(manifest) != manifest_sha256:
        raise PublishError(f"{manifest} does not have the sha256 {manifest_sha256} it was published with")
    _check_files(folder, files)
    api = HfApi(endpoint=endpoint, library_name="pbbq-builder")
    try:
        return _upload(
            api,
            folder,
            repo_id,
            private=private,
            build_id=build_id,
            manifest_sha256=manifest_sha256,
            tag=tag or build_id,
        )
    except PublishError as exc:
        raise PublishError(scrub(str(exc), token)) from None
    except Exception as exc:
        # Any failure of the client (HfHubHTTPError, the RuntimeError it wraps a failed LFS upload in, a
        # ValueError for invalid card metadata, a connection error) becomes one error whose text is scrubbed;
        # ``from None`` keeps the unscrubbed original out of tracebacks.
        raise PublishError(f"publishing to {repo_id} failed: {scrub(_error_text(exc), token)}") from None
