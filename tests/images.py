"""Docker test helpers: local base images, a second engine standing in for a lab host, a registry.

Nothing can be pulled here, so base images are built from Debian packages by
containers/base/build-base.sh (once; later calls find them). Every helper FAILS, never skips,
when Docker or a tool it needs is missing: a Docker test that silently skipped would prove nothing.

Fixtures (tests/conftest.py registers them: any test can ask for them by name):
``debian_image`` / ``busybox_image`` (session): the base image names, built if absent;
``docker_engine`` (session): a client for this machine's engine;
``remote_engine``: a second dockerd with its own storage, as a lab host's engine;
``local_registry``: a Docker registry (Debian's docker-registry) on a loopback port.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import docker
import docker.errors
import pytest
import requests

REPO = Path(__file__).resolve().parents[1]
BUILD_BASE = REPO / "containers" / "base" / "build-base.sh"
DEBIAN_IMAGE = "tt-harness/debian:bookworm"
BUSYBOX_IMAGE = "tt-harness/busybox:latest"
_START_TIMEOUT = 60.0


def docker_client() -> docker.DockerClient:
    """This machine's engine, or a test failure saying it is unreachable."""
    try:
        client = docker.from_env()
        client.ping()
        return client
    except (docker.errors.DockerException, requests.exceptions.RequestException) as exc:
        pytest.fail(f"the Docker engine is not reachable ({exc}); Docker tests need it", pytrace=False)


def ensure_base_image(which: str) -> str:
    """Build ``debian`` or ``busybox`` with build-base.sh unless it exists; return its name."""
    image = {"debian": DEBIAN_IMAGE, "busybox": BUSYBOX_IMAGE}[which]
    client = docker_client()
    with contextlib.suppress(docker.errors.ImageNotFound):
        client.images.get(image)
        return image
    result = subprocess.run([str(BUILD_BASE), which], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"{BUILD_BASE} {which} failed ({result.returncode}):\n{result.stderr}", pytrace=False)
    return image


def ensure_debian_image() -> str:
    return ensure_base_image("debian")


def ensure_busybox_image() -> str:
    return ensure_base_image("busybox")


@pytest.fixture(scope="session")
def docker_engine() -> docker.DockerClient:
    return docker_client()


@pytest.fixture(scope="session")
def debian_image() -> str:
    return ensure_debian_image()


@pytest.fixture(scope="session")
def busybox_image() -> str:
    return ensure_busybox_image()


# ---------------------------------------------------------------------------------------------
# A second engine: what a lab host's dockerd is to the harness, with storage of its own


@dataclass(frozen=True)
class Engine:
    url: str  # unix:///.../docker.sock, for DOCKER_HOST or `docker --host`
    client: docker.DockerClient


@contextlib.contextmanager
def second_engine() -> Iterator[Engine]:
    """A separate dockerd on a private socket (vfs storage), stopped afterwards.

    It runs in a network namespace of its own: a dockerd without a bridge deletes the "docker0"
    interface it finds, which in the host namespace is the main engine's. So this engine has no
    network at all (loading images and running containers with network_mode="none" need none).
    """
    dockerd = shutil.which("dockerd") or pytest.fail("dockerd is not installed (Debian package docker.io)", pytrace=False)
    unshare = shutil.which("unshare") or pytest.fail("unshare is not installed (util-linux)", pytrace=False)
    root = Path(tempfile.mkdtemp(prefix="tt-harness-engine-"))
    socket_path = root / "docker.sock"
    # An empty config file: the machine's /etc/docker/daemon.json would clash with these flags.
    (root / "daemon.json").write_text("{}")
    # containerd refuses "_" beside "-" or at an end, which mkdtemp's suffix may hold: use hex.
    namespace = f"tt-harness-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    log = open(root / "dockerd.log", "wb")
    process = subprocess.Popen(
        [
            unshare, "--net", "--fork", "--",
            dockerd, "--config-file", str(root / "daemon.json"),
            "--data-root", str(root / "data"), "--exec-root", str(root / "exec"),
            "--pidfile", str(root / "dockerd.pid"), "--host", f"unix://{socket_path}",
            "--storage-driver", "vfs", "--bridge", "none", "--iptables=false", "--ip-masq=false",
            "--containerd-namespace", namespace, "--containerd-plugins-namespace", f"{namespace}-plugins",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"unix://{socket_path}"
    try:
        client = _wait_for_engine(url, process, root / "dockerd.log")
        yield Engine(url, client)
        client.close()
    finally:
        # The group holds unshare, dockerd and the containerd it started; unshare exits after them.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _wait_for_engine(url: str, process: subprocess.Popen, log: Path) -> docker.DockerClient:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the second dockerd exited ({process.returncode}):\n{log.read_text()[-3000:]}", pytrace=False)
        try:
            client = docker.DockerClient(base_url=url)
            client.ping()
            return client
        except (docker.errors.DockerException, requests.exceptions.RequestException):
            time.sleep(0.2)
    pytest.fail(f"the second dockerd did not answer within {_START_TIMEOUT:.0f}s:\n{log.read_text()[-3000:]}", pytrace=False)


@pytest.fixture
def remote_engine() -> Iterator[Engine]:
    with second_engine() as engine:
        yield engine


# ---------------------------------------------------------------------------------------------
# A registry on loopback (engines push to and pull from 127.0.0.1 without TLS)


@contextlib.contextmanager
def registry_server() -> Iterator[str]:
    """Debian's docker-registry on a free loopback port; yields its address ``127.0.0.1:PORT``."""
    binary = shutil.which("docker-registry") or pytest.fail(
        "docker-registry is not installed (Debian package docker-registry)", pytrace=False
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(tempfile.mkdtemp(prefix="tt-harness-registry-"))
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}}}\n"
        f"http: {{addr: '127.0.0.1:{port}'}}\n"
    )
    process = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + _START_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"docker-registry exited: {process.stderr.read().decode()[-2000:]}", pytrace=False)
            with contextlib.suppress(requests.exceptions.RequestException):
                if requests.get(f"http://{address}/v2/", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                pytest.fail("docker-registry did not answer", pytrace=False)
            time.sleep(0.2)
        yield address
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stderr.close()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def local_registry() -> Iterator[str]:
    with registry_server() as address:
        yield address


def build_standin_image(tag: str, files: dict[str, Path], env_path: str = "/usr/local/bin:/bin") -> str:
    """busybox plus the given files (name in /usr/local/bin -> local path): a STAND-IN for a
    real tool image (ttml_tests, ttmlir-opt) that cannot be built here."""
    import io
    import tarfile

    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        lines = [f"FROM {ensure_busybox_image()}"]
        for name, path in files.items():
            tar.add(path, arcname=name)
            lines.append(f"COPY {name} /usr/local/bin/{name}")
        lines.append(f"ENV PATH={env_path}")
        dockerfile = ("\n".join(lines) + "\n").encode()
        info = tarfile.TarInfo("Dockerfile")
        info.size = len(dockerfile)
        tar.addfile(info, io.BytesIO(dockerfile))
    context.seek(0)
    docker_client().images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    return tag
