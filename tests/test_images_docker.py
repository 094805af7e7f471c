"""Images against the real Docker engine: build, reuse, failures, distribution to another engine.

A tiny fake tt-metal checkout (a build_metal.sh that lays out build_<type>/ like the real one)
is built with the real tt-metal-source template on the local Debian base. The "lab host" is a
second dockerd with its own storage, reached through the local transport; the registry is
Debian's docker-registry on loopback.
"""

from __future__ import annotations

import io
import json
import tarfile
import threading
import uuid
from pathlib import Path

import docker
import pytest
import requests
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.inventory import Host, Registry
from harness.core.outcomes import EnvCategory
from harness.core.spec import load_job
from harness.execution import images
from harness.execution.transport.local import LocalTransport
from tests.jobspec import write_job

pytestmark = pytest.mark.docker

BUILD_METAL = """#!/bin/bash
# Stands in for tt-metal's build_metal.sh: same flags, same build_<type>/ + build symlink layout.
set -eu
type=Release; flags=()
while [ $# -gt 0 ]; do
  case "$1" in --build-type) type=$2; shift 2 ;; *) flags+=("$1"); shift ;; esac
done
mkdir -p "build_$type/test/tt_metal" "build_$type/lib"
printf '#!/bin/sh\\necho "unit_tests_api ok (%s %s)"\\n' "$type" "${flags[*]}" > "build_$type/test/tt_metal/unit_tests_api"
chmod +x "build_$type/test/tt_metal/unit_tests_api"
ln -nsf "build_$type" build
echo "fake build_metal: $type with ${flags[*]}"
"""

FAILING_BUILD_METAL = """#!/bin/bash
echo "configuring..."
echo "error: compiler exploded in layernorm_bw.cpp" >&2
exit 3
"""


def fake_checkout(root: Path, script: str = BUILD_METAL) -> Path:
    root.mkdir(parents=True)
    (root / "build_metal.sh").write_text(script)
    (root / "build_metal.sh").chmod(0o755)
    # Unique content: every test run builds afresh instead of finding an earlier run's image.
    (root / "RUN_ID").write_text(uuid.uuid4().hex)
    return root


@pytest.fixture
def cleanup_images(docker_engine):
    tags: list[str] = []
    yield tags
    for tag in tags:
        try:
            docker_engine.images.remove(tag, force=True)
        except docker.errors.ImageNotFound:
            pass


def cli(*args: str):
    return CliRunner().invoke(app, list(args))


def test_real_build_streams_progress_then_is_reused(tmp_path, debian_image, docker_engine, cleanup_images):
    checkout = fake_checkout(tmp_path / "tt-metal")
    (checkout / ".git").mkdir()
    (checkout / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (checkout / "build_Release").mkdir()
    (checkout / "build_Release" / "stale").write_text("from a host build")
    spec = write_job(tmp_path, f"{{base: '{debian_image}', path: tt-metal, build_flags: [--debug, --build-all]}}")
    job = load_job(spec)
    cleanup_images.append(images.image_tag(job))

    lines: list[str] = []
    built = images.ensure_image(job, lines.append)

    assert built.built and built.tag == images.image_tag(job)
    assert built.image_id.startswith("sha256:") and built.digest == built.image_id  # never pushed
    assert any(line.startswith("Step 1/") for line in lines)
    built_line = lines.index("fake build_metal: Debug with --debug --build-all")
    assert built_line < next(i for i, line in enumerate(lines) if line.startswith("Successfully built"))

    again: list[str] = []
    reused = images.ensure_image(job, again.append)
    assert reused == images.BuiltImage(built.tag, built.image_id, built.digest, built=False)
    assert again == []  # no build ran

    run = ["sh", "-c", 'build/test/tt_metal/unit_tests_api; echo "$TT_METAL_HOME:$TT_METAL_RUNTIME_ROOT:$LD_LIBRARY_PATH:$PYTHONPATH"; ls -A']
    output = docker_engine.containers.run(built.tag, run, remove=True, network_mode="none").decode().splitlines()
    assert output[0] == "unit_tests_api ok (Debug --debug --build-all)"
    assert output[1] == "/tt-metal:/tt-metal:/tt-metal/build/lib:/tt-metal"
    assert sorted(output[2:]) == ["RUN_ID", "build", "build_Debug", "build_metal.sh"]  # no .git, no host build
    assert docker_engine.images.get(built.tag).labels["org.tt-harness.job"] == "img-test"

    result = cli("build", str(spec), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "job": "img-test", "tag": built.tag, "image_id": built.image_id, "digest": built.digest, "built": False,
    }


def test_two_runs_building_one_image_at_once_share_one_build(tmp_path, debian_image, cleanup_images):
    """Two `harness run`s of one job starting together on a machine without its image: one
    builds, the other waits its turn and reuses that image (before, both built and the first
    found its tag moved to the second's image: env_fault/image)."""
    spec = write_job(tmp_path, f"{{base: '{debian_image}', path: tt-metal}}")
    fake_checkout(tmp_path / "tt-metal")
    job = load_job(spec)
    cleanup_images.append(images.image_tag(job))
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(images.ensure_image(job, lambda line: None))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    assert len(results) == 2
    assert results[0].image_id == results[1].image_id
    assert sorted(r.built for r in results) == [False, True]


def test_a_failing_build_step_reports_its_output_and_exits_1(tmp_path, debian_image, cleanup_images):
    fake_checkout(tmp_path / "tt-metal", FAILING_BUILD_METAL)
    spec = write_job(tmp_path, f"{{base: '{debian_image}', path: tt-metal}}")
    job = load_job(spec)
    cleanup_images.append(images.image_tag(job))

    with pytest.raises(images.ImageError) as info:
        images.ensure_image(job)
    error = info.value
    assert error.step_failed and error.category is EnvCategory.IMAGE
    assert "returned a non-zero code: 3" in error.message
    assert "build_metal.sh" in error.log_tail[0]  # the failing step's title
    assert "error: compiler exploded in layernorm_bw.cpp" in error.log_tail

    result = cli("build", str(spec))
    assert result.exit_code == 1
    assert "error: compiler exploded in layernorm_bw.cpp" in result.stderr
    assert "Traceback" not in result.output


def test_a_missing_base_image_is_an_environment_fault(tmp_path, docker_engine):
    fake_checkout(tmp_path / "tt-metal")
    spec = write_job(tmp_path, "{base: 'tt-harness/no-such-base:never', path: tt-metal}")
    with pytest.raises(images.ImageError) as info:
        images.ensure_image(load_job(spec))
    assert info.value.category is EnvCategory.IMAGE and not info.value.step_failed
    assert "containers/base/build-base.sh" in str(info.value)
    assert cli("build", str(spec)).exit_code == 3


def test_unreachable_docker_is_a_docker_fault(tmp_path, monkeypatch):
    fake_checkout(tmp_path / "tt-metal")
    spec = write_job(tmp_path, "{base: 'tt-harness/debian:bookworm', path: tt-metal}")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/dead.sock")
    with pytest.raises(images.ImageError) as info:
        images.ensure_image(load_job(spec))
    assert info.value.category is EnvCategory.DOCKER
    assert "not reachable" in str(info.value)
    result = cli("build", str(spec))
    assert result.exit_code == 3
    assert "environment fault: docker" in result.stderr and "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------
# Distribution


@pytest.fixture
def small_image(busybox_image, docker_engine, cleanup_images):
    """A few-MB image unique to this test, as ensure_image would return it."""
    marker = uuid.uuid4().hex
    dockerfile = f"FROM {busybox_image}\nRUN echo {marker} > /payload\n".encode()
    image, _ = docker_engine.images.build(fileobj=io.BytesIO(dockerfile), tag=f"tt-harness/dist-src:{marker[:12]}", rm=True)
    cleanup_images.append(f"tt-harness/dist-src:{marker[:12]}")
    built = images.BuiltImage(f"tt-harness/dist-test:{marker[:16]}", image.id, image.id, built=True)
    return built, marker


def lab_host(engine_url: str) -> Host:
    return Host(name="lab-1", transport="local", docker=engine_url)


def test_save_load_into_a_host_engine_then_skip(small_image, remote_engine):
    built, marker = small_image
    docker_cmd = images.host_docker_command(lab_host(remote_engine.url))
    lines: list[str] = []
    with LocalTransport("lab-1") as transport:
        first = images.distribute(built, transport, on_progress=lines.append, docker_argv=docker_cmd)
        second = images.distribute(built, transport, docker_argv=docker_cmd)
    assert first == images.DistributionResult("lab-1", built.tag, built.image_id, built.image_id, images.Delivery.LOADED)
    assert f"Loaded image ID: {built.image_id}" in lines
    assert second.delivery is images.Delivery.SKIPPED
    remote = remote_engine.client
    assert remote.images.get(built.tag).id == built.image_id
    payload = remote.containers.run(built.tag, ["cat", "/payload"], remove=True, network_mode="none")
    assert payload.decode().strip() == marker


def test_push_and_pull_through_a_registry_without_leaking_the_password(
    small_image, local_registry, cleanup_images, monkeypatch, tmp_path
):
    # The host here is this machine's engine: the second engine has no network to reach the
    # registry. It does not hold the image under built.tag, so it really logs in, pulls and tags.
    built, _ = small_image
    name = built.tag.rsplit(":", 1)[0]
    cleanup_images += [built.tag, f"{local_registry}/lab/{built.tag}"]
    secret = f"pw-{uuid.uuid4().hex}"
    monkeypatch.setenv("TT_HARNESS_TEST_REGISTRY_PW", secret)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))  # docker login writes here, not ~/.docker
    registry = Registry(url=f"http://{local_registry}/lab", username="ci", password="${TT_HARNESS_TEST_REGISTRY_PW}")
    lines: list[str] = []
    with LocalTransport("lab-1") as transport:
        result = images.distribute(built, transport, registry, on_progress=lines.append)
        again = images.distribute(built, transport, registry)
    assert result.delivery is images.Delivery.PULLED and again.delivery is images.Delivery.SKIPPED
    assert result.digest.startswith(f"{local_registry}/lab/{name}@sha256:")
    assert docker.from_env().images.get(built.tag).id == built.image_id
    catalog = requests.get(f"http://{local_registry}/v2/_catalog", timeout=5).json()
    assert f"lab/{name}" in catalog["repositories"]
    assert any("Login Succeeded" in line or "Pulling from" in line for line in lines), lines
    assert not any(secret in line for line in lines)


def test_unusable_docker_on_the_host_is_a_docker_fault(small_image, tmp_path):
    built, _ = small_image
    with LocalTransport("lab-1") as transport:
        for docker_cmd in (("docker", "--host", f"unix://{tmp_path}/dead.sock"), ("no-such-docker-cli",)):
            with pytest.raises(images.ImageError) as info:
                images.distribute(built, transport, docker_argv=docker_cmd)
            assert info.value.category is EnvCategory.DOCKER, docker_cmd
            assert "lab-1" in str(info.value)


def test_an_image_missing_locally_is_an_image_fault(remote_engine):
    missing = images.BuiltImage("tt-harness/gone:1", "sha256:" + "0" * 64, "sha256:" + "0" * 64, built=True)
    with LocalTransport("lab-1") as transport, pytest.raises(images.ImageError) as info:
        images.distribute(missing, transport, docker_argv=("docker", "--host", remote_engine.url))
    assert info.value.category is EnvCategory.IMAGE
    assert "not in the local engine" in str(info.value)


# ---------------------------------------------------------------------------------------------
# tt-mlir: the template's flow, on a base whose build tools are stand-ins

STUB_CMAKE = """#!/bin/bash
# Stands in for cmake in a fake tt-mlir base image: does what the template's steps expect.
set -eu
case "$1" in
  -B) mkdir -p "$2" ;;  # cmake -B env/build env: configure the toolchain
  -G)  # cmake -G Ninja -B build ...: configure tt-mlir, only inside env/activate
    [ "${TTMLIR_ENV_ACTIVATED:-}" = 1 ] || { echo "env/activate was not sourced" >&2; exit 1; }
    mkdir -p "$4"; echo "${*:5}" > "$4/configure-args" ;;
  --build)
    if [ "$2" = env/build ]; then
      mkdir -p "$TTMLIR_TOOLCHAIN_DIR/bin"
    else
      mkdir -p "$2/bin"
      printf '#!/bin/sh\\necho "ttmlir-opt (fake) configured with: %s"\\n' "$(cat "$2/configure-args")" > "$2/bin/ttmlir-opt"
      chmod +x "$2/bin/ttmlir-opt"
    fi ;;
esac
"""


@pytest.fixture
def stub_mlir_base(debian_image, docker_engine, cleanup_images):
    tag = f"tt-harness/stub-mlir-base:{uuid.uuid4().hex[:12]}"
    context = io.BytesIO()
    with tarfile.open(fileobj=context, mode="w") as tar:
        files = {
            "Dockerfile": f"FROM {debian_image}\nCOPY cmake ninja clang clang++ /usr/local/bin/\n",
            "cmake": STUB_CMAKE, "ninja": "#!/bin/sh\n", "clang": "#!/bin/sh\n", "clang++": "#!/bin/sh\n",
        }
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(text.encode()), 0o755
            tar.addfile(info, io.BytesIO(text.encode()))
    context.seek(0)
    docker_engine.images.build(fileobj=context, custom_context=True, tag=tag, rm=True)
    cleanup_images.append(tag)
    return tag


def fake_mlir_checkout(root: Path) -> None:
    (root / "env").mkdir(parents=True)
    (root / "env" / "activate").write_text("export TTMLIR_ENV_ACTIVATED=1\n")
    (root / "env" / "CMakeLists.txt").write_text("# toolchain\n")
    (root / "CMakeLists.txt").write_text(f"# tt-mlir {uuid.uuid4().hex}\n")


def test_tt_mlir_image_puts_ttmlir_opt_on_path(tmp_path, stub_mlir_base, docker_engine, cleanup_images):
    fake_mlir_checkout(tmp_path / "tt-mlir")
    spec = write_job(
        tmp_path,
        f"{{project: tt-mlir, base: '{stub_mlir_base}', path: tt-mlir, build_type: Debug, build_flags: [-DTTMLIR_ENABLE_RUNTIME=OFF]}}",
    )
    job = load_job(spec)
    cleanup_images.append(images.image_tag(job))
    lines: list[str] = []
    built = images.ensure_image(job, lines.append)
    expected = "ttmlir-opt (fake) configured with: -DCMAKE_BUILD_TYPE=Debug -DTTMLIR_ENABLE_RUNTIME=OFF"
    assert expected in lines  # the template's own smoke test ran it
    check = "ttmlir-opt --version && test -d /opt/ttmlir-toolchain/bin && test ! -e env/build && pwd"
    output = docker_engine.containers.run(built.tag, ["bash", "-c", check], remove=True, network_mode="none")
    assert output.decode().splitlines() == [expected, job.image.home]


def test_tt_mlir_on_a_base_without_build_tools_says_what_is_missing(tmp_path, debian_image, cleanup_images):
    fake_mlir_checkout(tmp_path / "tt-mlir")
    job = load_job(write_job(tmp_path, f"{{project: tt-mlir, base: '{debian_image}', path: tt-mlir}}"))
    cleanup_images.append(images.image_tag(job))
    with pytest.raises(images.ImageError) as info:
        images.ensure_image(job)
    assert info.value.step_failed
    assert "tt-mlir needs cmake ninja clang clang++ in the base image" in " ".join(info.value.log_tail)


@pytest.mark.ssh
def test_save_load_over_ssh_into_a_host_engine(small_image, remote_engine, sshd):
    """The same delivery through a real sshd: docker save streams over the SSH channel's stdin."""
    from harness.execution.transport import SshPool

    built, marker = small_image
    docker_cmd = images.host_docker_command(lab_host(remote_engine.url))
    with SshPool() as pool:
        transport = pool.get(sshd.target())
        first = images.distribute(built, transport, docker_argv=docker_cmd)
        second = images.distribute(built, transport, docker_argv=docker_cmd)
    assert first.delivery is images.Delivery.LOADED and second.delivery is images.Delivery.SKIPPED
    payload = remote_engine.client.containers.run(built.tag, ["cat", "/payload"], remove=True, network_mode="none")
    assert payload.decode().strip() == marker
