"""Container images for jobs: render, build (or reuse) and distribute to lab hosts.

An image is named by what goes into it: ``tt-harness/<job>:<16 hex of sha256>`` over the
Dockerfile template, the build args and base image reference, and, for a local checkout, every
file sent to the build (minus an ignore list). The same spec and sources give the same tag, so
:func:`ensure_image` builds only when that tag is missing.

Templates live in ``containers/``; the harness never edits their text. The spec reaches the build
only as build args, and the local checkout as ``src/`` in the build context.

:func:`distribute` puts a built image on a lab host through its transport: pushed to the
inventory's registry and pulled on the host, or, without a registry, ``docker save`` streamed into
the host's ``docker load``. A host that already has the image under its tag is skipped.
"""

from __future__ import annotations

import collections
import contextlib
import enum
import errno
import fcntl
import fnmatch
import hashlib
import io
import json
import os
import re
import shlex
import stat
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import docker
import docker.errors
import requests.exceptions

from harness.core.inventory import Host, Registry
from harness.core.outcomes import EnvCategory
from harness.core.secretref import secret_name
from harness.core.spec import ImageSpec, JobSpec

ProgressCallback = Callable[[str], None]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "containers"
IMAGE_REPOSITORY = "tt-harness"
BASE_IMAGES_SCRIPT = "containers/base/build-base.sh"

# Never part of an image: VCS data, caches and build outputs (which the image rebuilds itself).
# Names are ignored at any depth; top-level patterns only at the checkout's root, so that a
# source directory named e.g. "build_utils" deep in the tree is kept.
IGNORED_NAMES = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache", ".ccache"})
IGNORED_TOP_DIRS = ("build", "build_*", "build-*", ".cpmcache", "python_env", ".venv", "generated", "env/build")

_HASH_CHUNK = 1024 * 1024
_LOG_TAIL = 30
_INSPECT_TIMEOUT = 120.0
_LOAD_TIMEOUT = 3600.0


class ImageError(Exception):
    """Building or moving an image failed; never a traceback for the user.

    ``category`` is the environment fault (``docker``: an engine unreachable or unusable;
    ``image``: a build, push, pull or load failed; ``disk``: out of space; ``timeout``: a remote
    docker command ran out of time). ``step_failed`` marks a build whose
    Dockerfile step itself failed: a real failure of the build rather than of the environment.
    ``log_tail`` holds the last output lines of the failing step or command.
    """

    def __init__(
        self,
        category: EnvCategory,
        message: str,
        *,
        step_failed: bool = False,
        log_tail: Sequence[str] = (),
    ):
        super().__init__(message)
        self.category = category
        self.message = message
        self.step_failed = step_failed
        self.log_tail = tuple(log_tail)

    def __str__(self) -> str:
        if not self.log_tail:
            return self.message
        return self.message + "\n" + "\n".join(f"  | {line}" for line in self.log_tail)


# ---------------------------------------------------------------------------------------------
# Rendering (pure: no Docker)


@dataclass(frozen=True)
class Rendering:
    """Everything a build of one job's image needs, and the tag it gets."""

    job: str
    template: str  # containers/<template>.Dockerfile
    dockerfile: str  # the template's text, used unchanged
    build_args: tuple[tuple[str, str], ...]
    context: Path | None  # the local checkout sent as src/, if any
    tag: str
    labels: tuple[tuple[str, str], ...]


def render(job: JobSpec) -> Rendering:
    """The Dockerfile, build args, context and content-hash tag for ``job``'s image."""
    image = job.image
    return render_dockerfile(
        job.name, image.template, template_path(image.template).read_text(), build_args(image), image.path
    )


def render_dockerfile(
    name: str, template: str, dockerfile: str, args: tuple[tuple[str, str], ...], context: Path | None
) -> Rendering:
    """A rendering of any Dockerfile (a job's template, or the simulated lab's host image),
    tagged ``tt-harness/<name>:<content hash>``; ``context`` is sent as ``src/``."""
    digest = hashlib.sha256()
    base = dict(args).get("BASE", "")
    for part in (template, dockerfile, base, *(f"{k}={v}" for k, v in args)):
        _add_field(digest, part)
    if context is not None:
        _add_field(digest, "tree")
        _add_field(digest, tree_digest(context))
    content = digest.hexdigest()[:16]
    tag = f"{IMAGE_REPOSITORY}/{repository_name(name)}:{content}"
    labels = (
        ("org.tt-harness.job", name),
        ("org.tt-harness.template", template),
        ("org.tt-harness.content", content),
    )
    return Rendering(name, template, dockerfile, args, context, tag, labels)


def template_path(template: str) -> Path:
    return TEMPLATE_DIR / f"{template}.Dockerfile"


def build_args(image: ImageSpec) -> tuple[tuple[str, str], ...]:
    """The build args the template for ``image`` reads (see its ARG lines)."""
    args: dict[str, str] = {"BASE": image.base}
    packages = " ".join(image.packages)
    if image.template == "tt-metal-wheel":
        args.update(TTNN_VERSION=image.wheel or "", PACKAGES=packages)
    elif image.template == "tt-metal-sim":
        args.update(PACKAGES=packages)
    else:
        prefix = "TT_MLIR" if image.template == "tt-mlir" else "TT_METAL"
        args.update(
            {
                f"{prefix}_GIT": image.git or "",
                f"{prefix}_REF": image.ref or "",
                "BUILD_TYPE": image.build_type,
                "BUILD_FLAGS": " ".join(image.build_flags),
                "PACKAGES": packages,
            }
        )
    return tuple(args.items())


def repository_name(job_name: str) -> str:
    """A job name as a Docker repository path component (lowercase, no separator runs)."""
    name = re.sub(r"[^a-z0-9]+", "-", job_name.lower()).strip("-")
    return name or "job"


def image_tag(job: JobSpec) -> str:
    return render(job).tag


def docker_build_argv(job: JobSpec) -> list[str]:
    """The ``docker build`` command equivalent to what :func:`ensure_image` does.

    The Dockerfile comes on stdin (``-f -``); CONTEXT stands for the build context, a directory
    holding ``src/``: the local checkout minus ignored files, or empty for git and wheel sources.
    """
    return _build_argv(render(job))


def _build_argv(rendering: Rendering) -> list[str]:
    argv = ["docker", "build", "-t", rendering.tag, "-f", "-"]
    for key, value in rendering.build_args:
        argv += ["--build-arg", f"{key}={value}"]
    for key, value in rendering.labels:
        argv += ["--label", f"{key}={value}"]
    return argv + ["CONTEXT"]


def describe_build(rendering: Rendering) -> str:
    """What ``harness build --render-only`` prints: the Dockerfile, then the build command."""
    source = (
        f"{rendering.context} (without {', '.join(sorted(IGNORED_NAMES))} and top-level "
        f"{', '.join(IGNORED_TOP_DIRS)})"
        if rendering.context
        else "nothing (the source is fetched in the image)"
    )
    return (
        f"# containers/{rendering.template}.Dockerfile\n{rendering.dockerfile.rstrip()}\n\n"
        f"# build: CONTEXT/src/ = {source}\n{shlex.join(_build_argv(rendering))}\n"
    )


def _add_field(digest: "hashlib._Hash", text: str) -> None:
    # Length-prefixed, so that no two different field lists hash the same.
    data = text.encode()
    digest.update(len(data).to_bytes(8, "big"))
    digest.update(data)


# ---------------------------------------------------------------------------------------------
# The local checkout: one walk decides what is hashed and what is sent


@dataclass(frozen=True)
class TreeEntry:
    relpath: str  # posix, relative to the checkout
    path: Path
    kind: str  # "dir" | "file" | "link"


def tree_entries(root: Path) -> list[TreeEntry]:
    """Every entry of the checkout that goes into the image, in a fixed (sorted) order."""
    root = Path(root)
    if not root.is_dir():
        raise ImageError(EnvCategory.IMAGE, f"the local checkout {root} is not a directory")
    entries: list[TreeEntry] = []

    def walk(directory: Path, prefix: str) -> None:
        try:
            names = sorted(os.listdir(directory))
        except OSError as exc:
            raise ImageError(EnvCategory.IMAGE, f"cannot read {directory}: {exc.strerror}") from None
        for name in names:
            path = directory / name
            relpath = f"{prefix}{name}"
            if name in IGNORED_NAMES or _ignored_top_dir(relpath, path):
                continue
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                entries.append(TreeEntry(relpath, path, "link"))
            elif stat.S_ISDIR(mode):
                entries.append(TreeEntry(relpath, path, "dir"))
                walk(path, relpath + "/")
            elif stat.S_ISREG(mode):
                entries.append(TreeEntry(relpath, path, "file"))
            # sockets, fifos and devices cannot be part of an image: skipped

    walk(root, "")
    return entries


def _ignored_top_dir(relpath: str, path: Path) -> bool:
    depth = relpath.count("/")
    matched = any(p.count("/") == depth and fnmatch.fnmatchcase(relpath, p) for p in IGNORED_TOP_DIRS)
    # Directories only (build_metal.sh stays); "build" is usually a symlink to build_<type>/,
    # which is_dir() follows on purpose.
    return matched and path.is_dir()


def tree_digest(root: Path, cache_dir: Path | None = None) -> str:
    """sha256 over the checkout's paths, kinds, executable bits, file contents and link targets.

    A tt-metal checkout is gigabytes, so each file's hash is kept in a cache under ``cache_dir``
    (default: ``$XDG_CACHE_HOME/tt-harness/tree-hashes``) and reused while the file's size,
    mtime, ctime and inode are unchanged, as git's index does.
    """
    root = Path(root)
    cache = _HashCache(cache_dir or default_cache_dir(), root)
    digest = hashlib.sha256()
    for entry in tree_entries(root):
        _add_field(digest, f"{entry.kind}:{entry.relpath}")
        try:
            if entry.kind == "link":
                _add_field(digest, os.readlink(entry.path))
            elif entry.kind == "file":
                info = entry.path.stat()
                _add_field(digest, "x" if info.st_mode & stat.S_IXUSR else "-")
                digest.update(cache.file_sha256(entry.relpath, entry.path, info))
        except OSError as exc:  # unreadable (a permission, a file that vanished): the image cannot be built
            raise ImageError(EnvCategory.IMAGE, f"cannot read {entry.path} of the local checkout: {exc.strerror or exc}") from None
    cache.save()
    return digest.hexdigest()


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tt-harness" / "tree-hashes"


class _HashCache:
    """File hashes of one checkout, keyed by path and trusted only while the stat matches."""

    # A file changed within this many ns of being hashed could change again within the same
    # mtime tick unnoticed ("racy git"): such hashes are not cached.
    _RACY_NS = 2_000_000_000

    def __init__(self, directory: Path, root: Path):
        self._path = directory / (hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:32] + ".json")
        self._started_ns = time.time_ns()
        try:
            self._old = json.loads(self._path.read_text())
        except (OSError, ValueError):
            self._old = {}
        self._new: dict[str, list] = {}

    def file_sha256(self, relpath: str, path: Path, info: os.stat_result) -> bytes:
        key = [info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino]
        cached = self._old.get(relpath)
        if isinstance(cached, list) and cached[:4] == key:
            value = bytes.fromhex(cached[4])
        else:
            value = _file_sha256(path)
        if info.st_mtime_ns < self._started_ns - self._RACY_NS and info.st_ctime_ns < self._started_ns - self._RACY_NS:
            self._new[relpath] = key + [value.hex()]
        return value

    def save(self) -> None:
        if self._new == self._old:
            return
        # A cache that cannot be written only costs time: never fail a build over it.
        with contextlib.suppress(OSError):
            self._path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._new))
            os.replace(tmp, self._path)


def _file_sha256(path: Path) -> bytes:
    file_digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            file_digest.update(chunk)
    return file_digest.digest()


def write_context(rendering: Rendering, out) -> None:
    """Write the build context tar to the binary file ``out``: Dockerfile plus ``src/``."""
    with tarfile.open(fileobj=out, mode="w") as tar:
        data = rendering.dockerfile.encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))
        src = tarfile.TarInfo("src")
        src.type = tarfile.DIRTYPE
        src.mode = 0o755
        tar.addfile(src)
        if rendering.context is not None:
            for entry in tree_entries(rendering.context):
                tar.add(entry.path, arcname=f"src/{entry.relpath}", recursive=False)


# ---------------------------------------------------------------------------------------------
# Building


@dataclass(frozen=True)
class BuiltImage:
    """An image ready to run. ``digest`` is the registry digest when pushed, else the image ID."""

    tag: str
    image_id: str
    digest: str
    built: bool  # False: the tag existed and was reused


def docker_client() -> docker.DockerClient:
    """A client for the local engine (``DOCKER_HOST`` etc.), checked to answer."""
    try:
        client = docker.from_env()
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _unreachable(exc) from None


def ensure_image(
    job: JobSpec,
    on_progress: ProgressCallback | None = None,
    client: docker.DockerClient | None = None,
) -> BuiltImage:
    """The job's image: reused when its content-hash tag exists, else built now.

    Build output is handed to ``on_progress`` line by line as it comes.
    """
    return ensure_rendered(render(job), on_progress, client)


def ensure_rendered(
    rendering: Rendering,
    on_progress: ProgressCallback | None = None,
    client: docker.DockerClient | None = None,
) -> BuiltImage:
    """The image of ``rendering``: reused when its tag exists, else built now. Builds of one tag
    on this machine take turns: two runs of one job starting together would otherwise build two
    images under one tag, and the first would find the tag moved under it."""
    client = client or docker_client()
    existing = find_image(client, rendering.tag)
    if existing is not None:
        return _built_image(rendering.tag, existing, built=False)
    with _build_turn(rendering.tag):
        existing = find_image(client, rendering.tag)  # built by whoever went first
        if existing is not None:
            return _built_image(rendering.tag, existing, built=False)
        image_id = _build(client, rendering, on_progress or (lambda line: None))
        image = find_image(client, rendering.tag)
    if image is None or image.id != image_id:
        raise ImageError(EnvCategory.IMAGE, f"the build finished but {rendering.tag} is not the image it built")
    return _built_image(rendering.tag, image, built=True)


@contextlib.contextmanager
def _build_turn(tag: str) -> Iterator[None]:
    """Hold this machine's build lock of ``tag`` (an flock: a killed builder's turn ends with it)."""
    folder = Path(tempfile.gettempdir()) / f"tt-harness-builds-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(folder / hashlib.sha256(tag.encode()).hexdigest()[:32], os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ImageError(EnvCategory.DISK, f"cannot take the build lock of {tag} in {folder}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _built_image(tag: str, image, built: bool) -> BuiltImage:
    repo_digests = image.attrs.get("RepoDigests") or []
    return BuiltImage(tag=tag, image_id=image.id, digest=repo_digests[0] if repo_digests else image.id, built=built)


def find_image(client: docker.DockerClient, ref: str):
    try:
        return client.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_error(exc, f"looking up {ref}") from None


def _build(client: docker.DockerClient, rendering: Rendering, on_progress: ProgressCallback) -> str:
    lines = _StepLog(on_progress)
    image_id = None
    error = None
    with tempfile.TemporaryFile(prefix="tt-harness-context-") as context:
        try:
            write_context(rendering, context)
        except OSError as exc:  # a file vanished mid-walk, or the temp dir is full
            category = EnvCategory.DISK if exc.errno == errno.ENOSPC else EnvCategory.IMAGE
            raise ImageError(category, f"cannot pack the build context of {rendering.tag}: {exc}") from None
        context.seek(0)
        try:
            stream = client.api.build(
                fileobj=context,
                custom_context=True,
                dockerfile="Dockerfile",
                tag=rendering.tag,
                buildargs=dict(rendering.build_args),
                labels=dict(rendering.labels),
                rm=True,
                forcerm=True,  # no intermediate containers left behind by a failed step
                pull=False,  # a base that is here is used as is (a missing one is still pulled)
                decode=True,
            )
            for message in stream:
                if "stream" in message:
                    lines.feed(message["stream"])
                if "aux" in message and isinstance(message["aux"], dict):
                    image_id = message["aux"].get("ID", image_id)
                if "error" in message:
                    error = (message.get("errorDetail") or {}).get("message") or message["error"]
        except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
            raise _engine_error(exc, f"building {rendering.tag}") from None
    lines.finish()
    if error is not None:
        raise _build_error(rendering, error, lines.step_tail())
    if image_id is None:
        # Older engines report the ID only as "Successfully built <short id>".
        image = find_image(client, rendering.tag)
        if image is None:
            raise ImageError(EnvCategory.IMAGE, f"the build reported success but {rendering.tag} does not exist")
        image_id = image.id
    return image_id


_ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_BUILDER_CHATTER = re.compile(r"^( ---> |Removing intermediate container )")


class _StepLog:
    """Splits the build stream into lines for the callback; keeps the current step's last lines."""

    def __init__(self, on_line: ProgressCallback):
        self._on_line = on_line
        self._partial = ""
        self._step: collections.deque[str] = collections.deque(maxlen=_LOG_TAIL)
        self._step_title = ""

    def feed(self, text: str) -> None:
        self._partial += text
        *complete, self._partial = self._partial.split("\n")
        for line in complete:
            self._emit(line)

    def finish(self) -> None:
        if self._partial:
            self._emit(self._partial)
            self._partial = ""

    def _emit(self, line: str) -> None:
        # The classic builder colours a step's stderr with ANSI escapes: plain text for logs.
        line = _ANSI_ESCAPE.sub("", line).rstrip("\r")
        if re.match(r"^Step \d+/\d+ : ", line):
            self._step.clear()
            self._step_title = line
        elif line.strip() and not _BUILDER_CHATTER.match(line):
            self._step.append(line)
        self._on_line(line)

    def step_tail(self) -> tuple[str, ...]:
        return ((self._step_title,) if self._step_title else ()) + tuple(self._step)


def _build_error(rendering: Rendering, error: str, tail: tuple[str, ...]) -> ImageError:
    what = f"building {rendering.tag} (containers/{rendering.template}.Dockerfile)"
    if "no space left on device" in error.lower():
        return ImageError(EnvCategory.DISK, f"{what}: the Docker host is out of disk space: {error}", log_tail=tail)
    if "returned a non-zero code" in error:
        return ImageError(EnvCategory.IMAGE, f"{what} failed: {error}", step_failed=True, log_tail=tail)
    if " : FROM " in (tail[0] if tail else ""):
        hint = (
            f" (build it with {BASE_IMAGES_SCRIPT})"
            if dict(rendering.build_args)["BASE"].startswith(f"{IMAGE_REPOSITORY}/")
            else " (the engine could not pull it: make its registry reachable or load it by hand)"
        )
        return ImageError(EnvCategory.IMAGE, f"{what}: base image not available: {error}{hint}", log_tail=tail)
    return ImageError(EnvCategory.IMAGE, f"{what} failed: {error}", log_tail=tail)


def _engine_error(exc: Exception, what: str) -> ImageError:
    """An error from the local engine: it answered with an error, or it cannot be reached."""
    if isinstance(exc, docker.errors.APIError):
        return ImageError(EnvCategory.IMAGE, f"{what}: the Docker engine refused: {exc.explanation or exc}")
    return _unreachable(exc)


def _unreachable(exc: Exception) -> ImageError:
    where = os.environ.get("DOCKER_HOST") or "the default socket"
    return ImageError(EnvCategory.DOCKER, f"the Docker engine at {where} is not reachable: {_first_line(exc)}")


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# ---------------------------------------------------------------------------------------------
# Distribution to lab hosts


def host_docker_command(host: Host) -> tuple[str, ...]:
    """How to run docker on an inventory host: its configured engine endpoint, if any."""
    return ("docker",) if host.docker is None else ("docker", "--host", host.docker)


class Delivery(str, enum.Enum):
    SKIPPED = "skipped"  # the host already had the image under its tag
    LOADED = "loaded"  # docker save | docker load over the transport
    PULLED = "pulled"  # pushed to the registry, pulled on the host

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class DistributionResult:
    host: str
    tag: str  # the tag the image has on the host
    image_id: str
    digest: str  # the registry digest (name@sha256:...) when pulled, else the image ID
    delivery: Delivery


def distribute(
    built: BuiltImage,
    transport,
    registry: Registry | None = None,
    *,
    on_progress: ProgressCallback | None = None,
    client: docker.DockerClient | None = None,
    docker_argv: Sequence[str] = ("docker",),
) -> DistributionResult:
    """Make ``built`` available on the transport's host under ``built.tag``.

    ``registry`` is the host's (an inventory :class:`Registry`: ``url`` like ``host:port[/ns]``,
    ``password`` a ``${ENV_VAR}`` reference resolved now and only sent on stdin or to the local
    engine). ``docker_argv`` is how docker is run there (:func:`host_docker_command`). Transport
    failures propagate as the transport's own ``TransportError`` (ssh/network faults).
    """
    progress = on_progress or (lambda line: None)
    host = getattr(transport, "name", "host")
    docker_cmd = tuple(docker_argv)
    if _remote_image_id(transport, docker_cmd, built.tag) == built.image_id:
        return DistributionResult(host, built.tag, built.image_id, built.digest, Delivery.SKIPPED)
    client = client or docker_client()
    if registry is None:
        _save_load(built, transport, docker_cmd, client, progress)
        delivery, digest = Delivery.LOADED, built.digest
    else:
        remote_ref, digest = _push(built, registry, client, progress)
        _pull(remote_ref, built, registry, transport, docker_cmd, progress)
        delivery = Delivery.PULLED
    found = _remote_image_id(transport, docker_cmd, built.tag)
    if found != built.image_id:
        raise ImageError(
            EnvCategory.IMAGE,
            f"after {delivery} on {host}, {built.tag} is {found or 'missing'}, not {built.image_id}",
        )
    return DistributionResult(host, built.tag, built.image_id, digest, delivery)


def _remote_image_id(transport, docker_cmd: tuple[str, ...], ref: str) -> str | None:
    out: list[str] = []
    result = transport.run(
        [*docker_cmd, "image", "inspect", "--format", "{{.Id}}", ref], timeout=_INSPECT_TIMEOUT, on_stdout=out.append
    )
    if result.exit_status == 0:
        return out[-1].strip() if out else None
    # "No such image" is an answer; anything else means docker itself is unusable there.
    if "no such image" not in result.stderr_tail.lower():
        raise _remote_docker_error(transport, "docker image inspect", result)
    return None


def _save_load(built: BuiltImage, transport, docker_cmd, client, progress: ProgressCallback) -> None:
    if find_image(client, built.image_id) is None:
        raise ImageError(EnvCategory.IMAGE, f"{built.tag} ({built.image_id}) is not in the local engine")
    try:
        # Saved by ID (no local tag needed), tagged on the host after loading.
        chunks = client.api.get_image(built.image_id)
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_error(exc, f"docker save {built.image_id}") from None
    result = transport.run(
        [*docker_cmd, "load"],
        stdin=_checked_stream(chunks, f"docker save {built.image_id}"),
        timeout=_LOAD_TIMEOUT,
        on_stdout=progress,
        on_stderr=progress,
    )
    if not result.ok:
        raise _remote_docker_error(transport, "docker load", result)
    _remote_ok(transport, "docker tag", [*docker_cmd, "tag", built.image_id, built.tag], progress)


def _checked_stream(chunks, what: str) -> Iterator[bytes]:
    # A local engine that breaks mid-save must fail the load, not end it early and quietly.
    try:
        yield from chunks
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_error(exc, what) from None


def _push(built: BuiltImage, registry: Registry, client, progress: ProgressCallback) -> tuple[str, str]:
    """Push to the registry; return the reference pushed and its ``name@sha256:...`` digest."""
    name, _, tag = built.tag.rpartition(":")
    repository = f"{_registry_prefix(registry)}/{name}"
    auth = _auth_config(registry)
    digest = None
    try:
        client.api.tag(built.image_id, repository, tag)
        stream = client.api.push(repository, tag, auth_config=auth, stream=True, decode=True)
        for message in stream:
            if "error" in message:
                detail = (message.get("errorDetail") or {}).get("message") or message["error"]
                raise ImageError(EnvCategory.IMAGE, f"pushing {repository}:{tag} failed: {detail}")
            if message.get("status") and not message.get("progressDetail"):  # skip byte counters
                progress(f"{message.get('id', '')} {message['status']}".strip())
            if isinstance(message.get("aux"), dict) and message["aux"].get("Digest"):
                digest = message["aux"]["Digest"]
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        raise _engine_error(exc, f"pushing {repository}:{tag}") from None
    if digest is None:
        raise ImageError(EnvCategory.IMAGE, f"pushing {repository}:{tag} reported no digest")
    return f"{repository}:{tag}", f"{repository}@{digest}"


def _pull(remote_ref: str, built: BuiltImage, registry: Registry, transport, docker_cmd, progress) -> None:
    auth = _auth_config(registry)
    if auth is not None:
        # The password goes on stdin: never on a command line, where ps and logs would show it.
        result = transport.run(
            [*docker_cmd, "login", "--username", auth["username"], "--password-stdin", _registry_host(registry)],
            stdin=auth["password"].encode(),
            timeout=_INSPECT_TIMEOUT,
        )
        if not result.ok:
            raise _remote_docker_error(transport, "docker login", result)
    _remote_ok(transport, "docker pull", [*docker_cmd, "pull", remote_ref], progress, timeout=_LOAD_TIMEOUT)
    _remote_ok(transport, "docker tag", [*docker_cmd, "tag", remote_ref, built.tag], progress)


def _registry_prefix(registry: Registry) -> str:
    # Image references carry no scheme: "https://reg.lab:5000/ns/" -> "reg.lab:5000/ns".
    return re.sub(r"^[a-z]+://", "", registry.url).rstrip("/")


def _registry_host(registry: Registry) -> str:
    return _registry_prefix(registry).split("/", 1)[0]


def _auth_config(registry: Registry) -> dict[str, str] | None:
    if registry.username is None:
        return None
    return {"username": registry.username, "password": resolve_secret(registry.password, "registry password")}


def resolve_secret(reference: str | None, what: str, environ: Mapping[str, str] | None = None) -> str:
    """The value of a ``${ENV_VAR}`` reference, read from the environment now."""
    environ = os.environ if environ is None else environ
    name = secret_name(reference)
    if name is None:
        raise ImageError(EnvCategory.IMAGE, f"{what} must be a ${{ENV_VAR}} reference")
    value = environ.get(name)
    if not value:
        raise ImageError(EnvCategory.IMAGE, f"{what}: environment variable {name} is not set")
    return value


def _remote_ok(
    transport, what: str, argv: list[str], progress: ProgressCallback, timeout: float = _INSPECT_TIMEOUT
) -> None:
    result = transport.run(argv, timeout=timeout, on_stdout=progress, on_stderr=progress)
    if not result.ok:
        raise _remote_docker_error(transport, what, result)


def _remote_docker_error(transport, what: str, result) -> ImageError:
    host = getattr(transport, "name", "host")
    tail = tuple(line for line in result.stderr_tail.splitlines() if line.strip())
    text = result.stderr_tail.lower()
    if result.timed_out:
        return ImageError(EnvCategory.TIMEOUT, f"{what} on {host} timed out", log_tail=tail)
    if result.exit_status == 127 or "cannot connect to the docker daemon" in text or "permission denied" in text:
        return ImageError(EnvCategory.DOCKER, f"docker is not usable on {host} ({what} failed)", log_tail=tail)
    if "no space left on device" in text:
        return ImageError(EnvCategory.DISK, f"{host} is out of disk space ({what} failed)", log_tail=tail)
    return ImageError(
        EnvCategory.IMAGE, f"{what} on {host} failed with exit status {result.exit_status}", log_tail=tail
    )
