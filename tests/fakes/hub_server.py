"""A local fake of the Hugging Face Hub for dataset repositories, as huggingface_hub 2.4 talks to it.

One stdlib ``ThreadingHTTPServer`` on 127.0.0.1 (port 0) answers the requests that ``HfApi.create_repo``,
``dataset_info``, ``list_repo_refs``, ``list_repo_tree``, ``create_commit`` and ``create_tag`` send (read from
the client's source: ``hf_api.py``, ``_commit_api.py``, ``lfs.py``):

- ``POST /api/repos/create``: creates the repo with the Hub's own initial commit (``.gitattributes``); an
  existing repo is a 409 whose body carries the repo ``url``, as the Hub's does;
- ``GET /api/datasets/{repo}`` and ``.../revision/{rev}``: repo info (``sha`` of the head, ``private``);
- ``GET /api/datasets/{repo}/refs``: branches and tags; ``GET .../tree/{rev}?recursive=...``: files (with their
  git oid and, for LFS files, the sha256) and folders;
- ``POST /api/validate-yaml``: checks the README's YAML header (a mapping; ``configs`` and ``dataset_info``
  entries well formed), 400 with the errors otherwise;
- ``POST /api/datasets/{repo}/preupload/{rev}``: upload mode per file (``lfs`` for parquet, binary or large
  files, else ``regular``) and the oid of the file at the head, from which the client skips unchanged files;
- ``POST /datasets/{repo}.git/info/lfs/objects/batch``: an upload and a verify action per object not stored
  yet; ``PUT /lfs/objects/{oid}`` stores the bytes (checking their sha256), ``POST /lfs/verify`` checks them;
- ``POST /api/datasets/{repo}/commit/{rev}``: the NDJSON commit (header, ``file`` in base64, ``lfsFile`` by oid,
  ``deletedFile``/``deletedFolder``), applied all at once or not at all; a stale ``parentCommit`` is a 412;
- ``POST /api/datasets/{repo}/tag/{rev}``: tags a branch or commit; an existing tag is a 409.

Requests are checked for ``Authorization: Bearer <token>`` when the fake is given a token (the LFS ``PUT``
goes, as to S3, without one). Everything is recorded for assertions: repos with their commits (message,
description, full file snapshot), tags, stored LFS objects and every request (method, path, endpoint).

Faults: ``fail("commit", status=500)`` makes the next commit request fail; ``nth`` picks a later request of
that endpoint (``fail("lfs_put", status=403, nth=2)``: the second LFS upload). ``echo_authorization=True``
puts the request's Authorization header into the error message, the worst case for a leaking token. Note that
huggingface_hub retries 408/429/5xx with back-off on every call but ``commit``, ``validate_yaml`` and ``tag``.

Usage: ``with FakeHub(token=...) as hub: HfApi(endpoint=hub.url)``; set ``HF_HUB_DISABLE_XET=1`` (the Xet
upload path needs a real Xet service).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from tests.fakes.local_server import LocalServer, QuietHandler

GITATTRIBUTES = b"*.parquet filter=lfs diff=lfs merge=lfs -text\n*.arrow filter=lfs diff=lfs merge=lfs -text\n"
LFS_SUFFIXES = (".parquet", ".arrow", ".bin", ".safetensors")
REGULAR_LIMIT = 10 * 1024 * 1024
ENDPOINTS = frozenset(
    {
        "create_repo",
        "info",
        "refs",
        "tree",
        "validate_yaml",
        "preupload",
        "lfs_batch",
        "lfs_put",
        "lfs_verify",
        "commit",
        "tag",
    }
)
_REPO = r"(?P<repo>[\w.-]+/[\w.-]+)"
ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("POST", re.compile(r"/api/repos/create"), "create_repo"),
    ("GET", re.compile(rf"/api/datasets/{_REPO}/refs"), "refs"),
    ("GET", re.compile(rf"/api/datasets/{_REPO}/tree/(?P<rev>[^/]+)(?:/(?P<sub>.*))?"), "tree"),
    ("GET", re.compile(rf"/api/datasets/{_REPO}(?:/revision/(?P<rev>[^/]+))?"), "info"),
    ("POST", re.compile(r"/api/validate-yaml"), "validate_yaml"),
    ("POST", re.compile(rf"/api/datasets/{_REPO}/preupload/(?P<rev>[^/]+)"), "preupload"),
    ("POST", re.compile(rf"/datasets/{_REPO}\.git/info/lfs/objects/batch"), "lfs_batch"),
    ("PUT", re.compile(r"/lfs/objects/(?P<oid>[0-9a-f]{64})"), "lfs_put"),
    ("POST", re.compile(r"/lfs/verify"), "lfs_verify"),
    ("POST", re.compile(rf"/api/datasets/{_REPO}/commit/(?P<rev>[^/]+)"), "commit"),
    ("POST", re.compile(rf"/api/datasets/{_REPO}/tag/(?P<rev>[^/]+)"), "tag"),
)


class HubError(Exception):
    """An error answer: status, message, and what else the Hub puts in the body and the headers."""

    def __init__(
        self, status: int, message: str, *, headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}
        self.extra = extra or {}


@dataclass(frozen=True)
class StoredFile:
    content: bytes
    lfs: bool

    @property
    def git_oid(self) -> str:
        return git_blob_oid(self.pointer if self.lfs else self.content)

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.content).hexdigest()

    @property
    def pointer(self) -> bytes:
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.content)}\n".encode()
        )


@dataclass(frozen=True)
class Commit:
    oid: str
    message: str
    description: str
    files: dict[str, StoredFile]


@dataclass
class Repo:
    repo_id: str
    private: bool
    commits: list[Commit] = field(default_factory=list)
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> Commit:
        return self.commits[-1]

    def files(self) -> dict[str, bytes]:
        """The content of every file at the head."""
        return {path: stored.content for path, stored in self.head.files.items()}


@dataclass
class Fault:
    endpoint: str
    status: int
    message: str
    nth: int
    echo_authorization: bool


def git_blob_oid(data: bytes) -> str:
    """The git blob sha1 of ``data`` (what the Hub lists as a file's oid)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub(LocalServer):
    """A threaded fake of the Hub's dataset-repository API (see the module docstring)."""

    def __init__(self, *, token: str | None = None) -> None:
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.lfs_objects: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.calls: Counter[str] = Counter()
        self._faults: list[Fault] = []
        self._lock = threading.RLock()
        httpd = _Server(("127.0.0.1", 0), _Handler)
        httpd.hub = self
        super().__init__(httpd)  # its url is the endpoint to give ``HfApi(endpoint=...)`` and ``HF_ENDPOINT``

    def fail(
        self,
        endpoint: str,
        *,
        status: int = 500,
        message: str = "fake Hub failure",
        nth: int = 1,
        echo_authorization: bool = False,
    ) -> None:
        """Make the ``nth`` next request to ``endpoint`` fail once with ``status`` and ``message``."""
        if endpoint not in ENDPOINTS:
            raise ValueError(f"unknown endpoint {endpoint!r}; known: {sorted(ENDPOINTS)}")
        with self._lock:
            self._faults.append(Fault(endpoint, status, message, self.calls[endpoint] + nth, echo_authorization))

    def repo(self, repo_id: str) -> Repo:
        return self.repos[repo_id]

    # ------------------------------------------------------------------------------------------- dispatch

    def handle(self, method: str, target: str, headers: dict[str, str], body: bytes) -> tuple[int, Any, dict]:
        """Answer one request: (status, JSON payload, extra headers)."""
        split = urlsplit(target)
        path, query = unquote(split.path), parse_qs(split.query)
        route = _route(method, path)
        if route is None:
            return 404, {"error": f"fake Hub: no route for {method} {path}"}, {}
        endpoint, groups = route
        with self._lock:
            self.calls[endpoint] += 1
            self.requests.append((method, path, endpoint))
            fault = next((f for f in self._faults if f.endpoint == endpoint and f.nth == self.calls[endpoint]), None)
            if fault is not None:
                self._faults.remove(fault)
        presented = headers.get("authorization", "")
        if fault is not None:
            message = fault.message + (f" (request authorization: {presented})" if fault.echo_authorization else "")
            return fault.status, {"error": message}, {}
        if self.token is not None and endpoint != "lfs_put" and presented != f"Bearer {self.token}":
            return 401, {"error": "Invalid credentials in Authorization header"}, {}
        handler = getattr(self, f"_on_{endpoint}")
        try:
            with self._lock:
                return 200, handler(groups, query, body), {}
        except HubError as error:
            return error.status, {"error": error.message, **error.extra}, error.headers

    def _get_repo(self, repo_id: str) -> Repo:
        if repo_id not in self.repos:
            raise HubError(404, "Repository not found", headers={"X-Error-Code": "RepoNotFound"})
        return self.repos[repo_id]

    def _resolve(self, repo: Repo, revision: str) -> Commit:
        if revision == "main":
            return repo.head
        for commit in repo.commits:
            if commit.oid == revision or (len(revision) >= 7 and commit.oid.startswith(revision)):
                return commit
        if revision in repo.tags:
            return self._resolve(repo, repo.tags[revision])
        raise HubError(404, f"Invalid rev id: {revision}", headers={"X-Error-Code": "RevisionNotFound"})

    def _add_commit(self, repo: Repo, message: str, description: str, files: dict[str, StoredFile]) -> Commit:
        parent = repo.commits[-1].oid if repo.commits else ""
        digest = hashlib.sha1(f"{parent}\n{message}\n{description}".encode())
        for path in sorted(files):
            digest.update(f"{path}\0{files[path].git_oid}\n".encode())
        commit = Commit(digest.hexdigest(), message, description, dict(files))
        repo.commits.append(commit)
        return commit

    def _repo_url(self, repo_id: str) -> str:
        return f"{self.url}/datasets/{repo_id}"

    # ------------------------------------------------------------------------------------------ endpoints

    def _on_create_repo(self, _: dict, __: dict, body: bytes) -> dict[str, Any]:
        payload = json.loads(body)
        if payload.get("type") != "dataset":
            raise HubError(400, f"this fake Hub serves dataset repos only, not {payload.get('type')!r}")
        repo_id = f"{payload['organization']}/{payload['name']}" if payload.get("organization") else payload["name"]
        if repo_id in self.repos:
            raise HubError(409, "You already created this dataset repo", extra={"url": self._repo_url(repo_id)})
        repo = Repo(repo_id, private=payload.get("visibility") == "private")
        self._add_commit(repo, "initial commit", "", {".gitattributes": StoredFile(GITATTRIBUTES, lfs=False)})
        self.repos[repo_id] = repo
        return {"url": self._repo_url(repo_id), "name": repo_id, "id": repo_id}

    def _on_info(self, groups: dict, _: dict, __: bytes) -> dict[str, Any]:
        repo = self._get_repo(groups["repo"])
        commit = self._resolve(repo, groups.get("rev") or "main")
        siblings = [{"rfilename": path} for path in sorted(commit.files)]
        return {"id": repo.repo_id, "sha": commit.oid, "private": repo.private, "siblings": siblings, "tags": []}

    def _on_refs(self, groups: dict, _: dict, __: bytes) -> dict[str, Any]:
        repo = self._get_repo(groups["repo"])
        return {
            "branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": repo.head.oid}],
            "converts": [],
            "tags": [
                {"name": name, "ref": f"refs/tags/{name}", "targetCommit": oid}
                for name, oid in sorted(repo.tags.items())
            ],
        }

    def _on_tree(self, groups: dict, query: dict, _: bytes) -> list[dict[str, Any]]:
        repo = self._get_repo(groups["repo"])
        files = self._resolve(repo, groups["rev"]).files
        prefix = f"{groups['sub'].strip('/')}/" if groups.get("sub") else ""
        recursive = query.get("recursive", ["False"])[0].lower() in ("true", "1")
        entries: dict[str, dict[str, Any]] = {}
        for path in sorted(p for p in files if p.startswith(prefix)):
            parts = path[len(prefix) :].split("/")
            folders = [prefix + "/".join(parts[:depth]) for depth in range(1, len(parts) if recursive else 2)]
            for folder in folders[: len(parts) - 1]:
                entries.setdefault(folder, {"type": "directory", "path": folder, "oid": git_blob_oid(folder.encode())})
            if recursive or len(parts) == 1:
                stored = files[path]
                entry = {"type": "file", "path": path, "oid": stored.git_oid, "size": len(stored.content)}
                if stored.lfs:
                    entry["lfs"] = {
                        "oid": stored.sha256,
                        "size": len(stored.content),
                        "pointerSize": len(stored.pointer),
                    }
                entries[path] = entry
        return [entries[key] for key in sorted(entries)]

    def _on_validate_yaml(self, _: dict, __: dict, body: bytes) -> dict[str, Any]:
        content = json.loads(body)["content"]
        match = re.match(r"\A---\r?\n(.*?)\r?\n---\r?\n", content, flags=re.DOTALL)
        errors = []
        if match is None:
            errors.append("README.md has no YAML metadata block")
        else:
            try:
                metadata = yaml.safe_load(match.group(1))
            except yaml.YAMLError as error:
                metadata, errors = None, [f"invalid YAML: {error}"]
            if not errors and not isinstance(metadata, dict):
                errors.append("the YAML metadata must be a mapping")
            if isinstance(metadata, dict):
                errors += _metadata_errors(metadata)
        if errors:
            raise HubError(400, "Invalid metadata in README.md", extra={"errors": [{"message": e} for e in errors]})
        return {"errors": [], "warnings": []}

    def _on_preupload(self, groups: dict, _: dict, body: bytes) -> dict[str, Any]:
        repo = self._get_repo(groups["repo"])
        head = self._resolve(repo, groups["rev"]).files
        answer = []
        for item in json.loads(body)["files"]:
            sample = base64.b64decode(item["sample"])
            lfs = item["path"].endswith(LFS_SUFFIXES) or item["size"] > REGULAR_LIMIT or b"\0" in sample
            stored = head.get(item["path"])
            oid = None if stored is None else (stored.sha256 if stored.lfs else stored.git_oid)
            answer.append(
                {"path": item["path"], "uploadMode": "lfs" if lfs else "regular", "shouldIgnore": False, "oid": oid}
            )
        return {"files": answer, "commitOid": repo.head.oid}

    def _on_lfs_batch(self, groups: dict, _: dict, body: bytes) -> dict[str, Any]:
        self._get_repo(groups["repo"])
        objects = []
        for item in json.loads(body)["objects"]:
            entry = {"oid": item["oid"], "size": item["size"], "authenticated": True}
            if item["oid"] not in self.lfs_objects:
                entry["actions"] = {
                    "upload": {"href": f"{self.url}/lfs/objects/{item['oid']}"},
                    "verify": {"href": f"{self.url}/lfs/verify"},
                }
            objects.append(entry)
        return {"transfer": "basic", "objects": objects}

    def _on_lfs_put(self, groups: dict, _: dict, body: bytes) -> dict[str, Any]:
        if hashlib.sha256(body).hexdigest() != groups["oid"]:
            raise HubError(400, "uploaded content does not match its sha256")
        self.lfs_objects[groups["oid"]] = body
        return {}

    def _on_lfs_verify(self, _: dict, __: dict, body: bytes) -> dict[str, Any]:
        item = json.loads(body)
        stored = self.lfs_objects.get(item["oid"])
        if stored is None or len(stored) != item["size"]:
            raise HubError(404, f"LFS object {item['oid']} was not uploaded")
        return {}

    def _on_commit(self, groups: dict, _: dict, body: bytes) -> dict[str, Any]:
        repo = self._get_repo(groups["repo"])
        if groups["rev"] != "main":
            raise HubError(400, "this fake Hub commits to main only")
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = lines[0]["value"] if lines and lines[0]["key"] == "header" else None
        if header is None or not header.get("summary"):
            raise HubError(400, "a commit needs a header with a summary")
        parent = header.get("parentCommit")
        if parent is not None and not repo.head.oid.startswith(parent):
            raise HubError(412, "A commit has happened since. Please refresh and try again.")
        files = dict(repo.head.files)
        for line in lines[1:]:
            value = line["value"]
            if line["key"] == "file":
                files[value["path"]] = StoredFile(base64.b64decode(value["content"]), lfs=False)
            elif line["key"] == "lfsFile":
                if value["oid"] not in self.lfs_objects:
                    raise HubError(422, f"LFS object {value['oid']} of {value['path']} was never uploaded")
                files[value["path"]] = StoredFile(self.lfs_objects[value["oid"]], lfs=True)
            elif line["key"] == "deletedFile":
                if files.pop(value["path"], None) is None:
                    raise HubError(404, f"A file with this name doesn't exist: {value['path']}")
            elif line["key"] == "deletedFolder":
                files = {
                    path: stored
                    for path, stored in files.items()
                    if not path.startswith(value["path"].rstrip("/") + "/")
                }
            else:
                raise HubError(400, f"unknown commit operation {line['key']!r}")
        commit = self._add_commit(repo, header["summary"], header.get("description", ""), files)
        return {
            "success": True,
            "commitOid": commit.oid,
            "commitUrl": f"{self._repo_url(repo.repo_id)}/commit/{commit.oid}",
            "hookOutput": "",
            "pullRequestUrl": None,
        }

    def _on_tag(self, groups: dict, _: dict, body: bytes) -> dict[str, Any]:
        repo = self._get_repo(groups["repo"])
        tag = json.loads(body)["tag"]
        if tag in repo.tags:
            raise HubError(409, f"Tag {tag} already exists")
        repo.tags[tag] = self._resolve(repo, groups["rev"]).oid
        return {}


def _route(method: str, path: str) -> tuple[str, dict[str, str]] | None:
    """The endpoint a request is for and the parts of its path (repo, revision, oid), or None."""
    for route_method, pattern, endpoint in ROUTES:
        match = pattern.fullmatch(path)
        if route_method == method and match is not None:
            return endpoint, match.groupdict()
    return None


def _metadata_errors(metadata: dict[str, Any]) -> list[str]:
    """The checks the Hub makes that a dataset card could fail: configs and dataset_info well formed."""
    errors = []
    for config in metadata.get("configs", []) or []:
        if not isinstance(config, dict) or "config_name" not in config or "data_files" not in config:
            errors.append(f"configs: entry {config!r} needs config_name and data_files")
    for info in metadata.get("dataset_info", []) or []:
        if not isinstance(info, dict) or not isinstance(info.get("features"), list):
            errors.append(f"dataset_info: entry {info!r} needs a features list")
    if not isinstance(metadata.get("license", ""), str | list):
        errors.append("license must be a string or a list")
    return errors


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    hub: FakeHub


class _Handler(QuietHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: without this each answer waits ~40 ms
    server: _Server

    def _body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length", "0")))

    def _serve(self) -> None:
        body = self._body()
        headers = {key.lower(): value for key, value in self.headers.items()}
        status, payload, extra = self.server.hub.handle(self.command, self.path, headers, body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in extra.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = _serve
