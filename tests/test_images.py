"""Image rendering and content-hash tags: pure, no Docker."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import tarfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

import harness.cli  # noqa: F401  (registers the commands)
from harness.cli.app import app
from harness.core.outcomes import EnvCategory
from harness.core.spec import load_job
from harness.execution import images
from tests.jobspec import write_job

REPO = Path(__file__).resolve().parents[1]


def make_checkout(root: Path) -> Path:
    """A small tt-metal-like checkout with the clutter a real one has."""
    (root / "tt_metal" / "impl").mkdir(parents=True)
    (root / "tt_metal" / "impl" / "device.cpp").write_text("int device() { return 0; }\n")
    (root / "build_metal.sh").write_text("#!/bin/sh\necho build\n")
    (root / "build_metal.sh").chmod(0o755)
    (root / "tests" / "build_utils").mkdir(parents=True)  # a source dir named build*, not at the top
    (root / "tests" / "build_utils" / "helper.py").write_text("X = 1\n")
    (root / "docs").symlink_to("tt_metal")
    return root


def job_at(tmp_path: Path, image: str, name: str = "img-test"):
    return load_job(write_job(tmp_path, image, name))


GIT = "{base: 'ubuntu:22.04', git: 'https://github.com/tenstorrent/tt-metal.git', ref: v0.62.0, build_flags: [--debug, --build-all, --enable-ccache], packages: [gdb, 'vim=2:8.2']}"
WHEEL = "{base: 'ubuntu:22.04', wheel: 0.81.1, packages: [graphviz]}"
MLIR = "{project: tt-mlir, base: 'ghcr.io/tenstorrent/tt-mlir/tt-mlir-base-ubuntu-22-04:latest', git: 'https://github.com/tenstorrent/tt-mlir.git', ref: 19c86fca45ae, build_flags: [-DTTMLIR_ENABLE_RUNTIME=OFF]}"


# ---------------------------------------------------------------------------------------------
# Rendering each template


def declared_args(dockerfile: str) -> set[str]:
    return set(re.findall(r"^ARG ([A-Z_]+)", dockerfile, re.M))


def test_git_source_renders_the_source_template_with_the_spec_as_build_args(tmp_path):
    rendering = images.render(job_at(tmp_path, GIT))
    assert rendering.template == "tt-metal-source"
    assert rendering.dockerfile == (REPO / "containers" / "tt-metal-source.Dockerfile").read_text()
    assert dict(rendering.build_args) == {
        "BASE": "ubuntu:22.04",
        "TT_METAL_GIT": "https://github.com/tenstorrent/tt-metal.git",
        "TT_METAL_REF": "v0.62.0",
        "BUILD_TYPE": "Debug",
        "BUILD_FLAGS": "--debug --build-all --enable-ccache",
        "PACKAGES": "gdb vim=2:8.2",
    }
    assert rendering.context is None
    assert re.fullmatch(r"tt-harness/img-test:[0-9a-f]{16}", rendering.tag)


def test_path_source_sends_the_checkout(tmp_path):
    checkout = make_checkout(tmp_path / "tt-metal")
    rendering = images.render(job_at(tmp_path, "{base: 'tt-harness/debian:bookworm', path: tt-metal, build_type: RelWithDebInfo}"))
    assert rendering.template == "tt-metal-source"
    assert rendering.context == checkout
    args = dict(rendering.build_args)
    assert args["TT_METAL_GIT"] == "" and args["TT_METAL_REF"] == ""
    assert args["BUILD_TYPE"] == "RelWithDebInfo" and args["BUILD_FLAGS"] == ""


def test_wheel_renders_the_wheel_template(tmp_path):
    rendering = images.render(job_at(tmp_path, WHEEL))
    assert rendering.template == "tt-metal-wheel"
    assert dict(rendering.build_args) == {"BASE": "ubuntu:22.04", "TTNN_VERSION": "0.81.1", "PACKAGES": "graphviz"}
    assert 'pip install --no-cache-dir --no-deps "ttnn==$TTNN_VERSION"' in rendering.dockerfile


def test_tt_mlir_renders_the_mlir_template(tmp_path):
    rendering = images.render(job_at(tmp_path, MLIR))
    assert rendering.template == "tt-mlir"
    args = dict(rendering.build_args)
    assert args["TT_MLIR_GIT"] == "https://github.com/tenstorrent/tt-mlir.git"
    assert args["TT_MLIR_REF"] == "19c86fca45ae"
    assert args["BUILD_FLAGS"] == "-DTTMLIR_ENABLE_RUNTIME=OFF"


@pytest.mark.parametrize("image", [GIT, WHEEL, MLIR])
def test_every_build_arg_is_declared_by_its_template(tmp_path, image):
    # A build arg the template does not declare would be silently ignored by Docker.
    rendering = images.render(job_at(tmp_path, image))
    assert {key for key, _ in rendering.build_args} <= declared_args(rendering.dockerfile)


@pytest.mark.parametrize("image", [GIT, MLIR])
def test_templates_install_the_project_where_the_spec_says_it_lives(tmp_path, image):
    job = job_at(tmp_path, image)
    dockerfile = images.render(job).dockerfile
    assert f"COPY src/ {job.image.home}/" in dockerfile
    assert f"WORKDIR {job.image.home}" in dockerfile


def test_source_template_sets_the_tt_metal_environment():
    dockerfile = (REPO / "containers" / "tt-metal-source.Dockerfile").read_text()
    env = dockerfile[dockerfile.index("ENV TT_METAL_HOME") :]
    for setting in ("TT_METAL_HOME=/tt-metal", "TT_METAL_RUNTIME_ROOT=/tt-metal", "LD_LIBRARY_PATH=/tt-metal/build/lib", "PYTHONPATH=/tt-metal"):
        assert setting in env


@pytest.mark.parametrize("template", ["tt-metal-source", "tt-metal-wheel", "tt-mlir"])
def test_spec_values_reach_run_lines_only_as_quoted_variables(template):
    # Lists split on purpose; every other arg must be in double quotes wherever a RUN uses it.
    dockerfile = (REPO / "containers" / f"{template}.Dockerfile").read_text()
    singles = declared_args(dockerfile) - {"BASE", "BUILD_FLAGS", "PACKAGES"}
    for line in dockerfile.splitlines():
        for use in re.finditer(r"\$\{?([A-Z_]+)", line):
            if use.group(1) in singles:
                assert line[: use.start()].count('"') % 2 == 1, (template, line)  # inside "..."
    for listed in ("BUILD_FLAGS", "PACKAGES"):
        for line in dockerfile.splitlines():
            if f"${listed}" in line and line.lstrip().startswith("RUN"):
                assert "set -f" in line, (template, line)  # split, but never glob-expanded


def test_job_names_become_valid_repository_names():
    assert images.repository_name("LayerNorm_BW.v2") == "layernorm-bw-v2"
    assert images.repository_name("device-smoke") == "device-smoke"


# ---------------------------------------------------------------------------------------------
# Content hash: stable, and sensitive to everything that goes into the image


def tag_for(tmp_path: Path, image: str) -> str:
    return images.render(job_at(tmp_path, image)).tag


def test_same_inputs_give_the_same_tag(tmp_path):
    assert tag_for(tmp_path, GIT) == tag_for(tmp_path, GIT)


@pytest.mark.parametrize(
    "old, new",
    [
        ("--enable-ccache]", "]"),
        ("'vim=2:8.2'", "'vim=2:9.0'"),
        ("ref: v0.62.0", "ref: v0.62.1"),
        ("base: 'ubuntu:22.04'", "base: 'ubuntu:24.04'"),
        ("[--debug, --build-all, --enable-ccache]", "[--build-all, --enable-ccache]"),
    ],
)
def test_any_spec_change_changes_the_tag(tmp_path, old, new):
    assert old in GIT
    assert tag_for(tmp_path, GIT) != tag_for(tmp_path, GIT.replace(old, new))


def test_template_text_is_part_of_the_tag(tmp_path, monkeypatch):
    before = tag_for(tmp_path, WHEEL)
    edited = tmp_path / "containers"
    edited.mkdir()
    for template in (REPO / "containers").glob("*.Dockerfile"):
        (edited / template.name).write_text(template.read_text() + "\n# edited\n")
    monkeypatch.setattr(images, "TEMPLATE_DIR", edited)
    assert tag_for(tmp_path, WHEEL) != before


PATH_SPEC = "{base: 'tt-harness/debian:bookworm', path: tt-metal}"


def test_checkout_tag_does_not_depend_on_where_the_checkout_is(tmp_path):
    make_checkout(tmp_path / "a" / "tt-metal")
    make_checkout(tmp_path / "b" / "tt-metal")
    (tmp_path / "a").joinpath("x").mkdir()
    assert tag_for(tmp_path / "a", PATH_SPEC) == tag_for(tmp_path / "b", PATH_SPEC)


@pytest.mark.parametrize(
    "change",
    [
        lambda root: (root / "tt_metal" / "impl" / "device.cpp").write_text("int device() { return 1; }\n"),
        lambda root: (root / "tt_metal" / "new.hpp").write_text(""),
        lambda root: (root / "tt_metal" / "impl" / "device.cpp").unlink(),
        lambda root: (root / "build_metal.sh").chmod(0o644),
        lambda root: ((root / "docs").unlink(), (root / "docs").symlink_to("tests")),
        lambda root: (root / "tests" / "build_utils" / "helper.py").write_text("X = 2\n"),
        lambda root: (root / "tt_metal" / "impl" / "device.cpp").rename(root / "tt_metal" / "device.cpp"),
    ],
    ids=["content", "added", "removed", "exec-bit", "symlink-target", "nested-build-dir", "moved"],
)
def test_a_change_in_the_checkout_changes_the_tag(tmp_path, change):
    root = make_checkout(tmp_path / "tt-metal")
    before = tag_for(tmp_path, PATH_SPEC)
    change(root)
    assert tag_for(tmp_path, PATH_SPEC) != before


def test_ignored_files_do_not_change_the_tag(tmp_path):
    root = make_checkout(tmp_path / "tt-metal")
    before = tag_for(tmp_path, PATH_SPEC)
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "build_Release" / "lib").mkdir(parents=True)
    (root / "build_Release" / "lib" / "libtt_metal.so").write_bytes(b"\x7fELF")
    (root / "build").symlink_to("build_Release")
    (root / ".cpmcache").mkdir()
    (root / "tt_metal" / "__pycache__").mkdir()
    (root / "tt_metal" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (root / "tests" / ".git").write_text("gitdir: ../.git/modules/tests\n")  # a submodule's .git file
    assert tag_for(tmp_path, PATH_SPEC) == before


def test_creation_order_and_timestamps_do_not_change_the_tag(tmp_path):
    first = tmp_path / "one" / "tt-metal"
    make_checkout(first)
    second = tmp_path / "two" / "tt-metal"
    (second / "tests" / "build_utils").mkdir(parents=True)
    (second / "tests" / "build_utils" / "helper.py").write_text("X = 1\n")
    (second / "docs").symlink_to("tt_metal")
    (second / "build_metal.sh").write_text("#!/bin/sh\necho build\n")
    (second / "build_metal.sh").chmod(0o755)
    (second / "tt_metal" / "impl").mkdir(parents=True)
    (second / "tt_metal" / "impl" / "device.cpp").write_text("int device() { return 0; }\n")
    os.utime(second / "build_metal.sh", (0, 0))
    assert tag_for(tmp_path / "one", PATH_SPEC) == tag_for(tmp_path / "two", PATH_SPEC)


# ---------------------------------------------------------------------------------------------
# The build context and the printed command


def test_context_holds_the_dockerfile_and_exactly_the_hashed_files(tmp_path):
    root = make_checkout(tmp_path / "tt-metal")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / "build_Debug").mkdir()
    (root / "build_Debug" / "unit_tests_api").write_text("binary")
    rendering = images.render(job_at(tmp_path, PATH_SPEC))
    buffer = io.BytesIO()
    images.write_context(rendering, buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert tar.extractfile("Dockerfile").read().decode() == rendering.dockerfile
    assert sorted(members) == sorted(
        ["Dockerfile", "src", "src/build_metal.sh", "src/docs", "src/tests", "src/tests/build_utils",
         "src/tests/build_utils/helper.py", "src/tt_metal", "src/tt_metal/impl", "src/tt_metal/impl/device.cpp"]
    )
    assert members["src/docs"].issym() and members["src/docs"].linkname == "tt_metal"
    assert members["src/build_metal.sh"].mode & 0o111


def test_git_context_is_just_the_dockerfile(tmp_path):
    buffer = io.BytesIO()
    images.write_context(images.render(job_at(tmp_path, GIT)), buffer)
    buffer.seek(0)
    with tarfile.open(fileobj=buffer) as tar:
        assert tar.getnames() == ["Dockerfile", "src"]


def test_build_argv_is_an_argv_with_every_build_arg(tmp_path):
    job = job_at(tmp_path, GIT)
    argv = images.docker_build_argv(job)
    assert argv[:6] == ["docker", "build", "-t", images.image_tag(job), "-f", "-"]
    assert "BUILD_FLAGS=--debug --build-all --enable-ccache" in argv
    assert argv[argv.index("BUILD_FLAGS=--debug --build-all --enable-ccache") - 1] == "--build-arg"
    assert argv[-1] == "CONTEXT"


def test_render_only_prints_dockerfile_and_quoted_command_without_docker(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    path = write_job(tmp_path, GIT)
    result = CliRunner().invoke(app, ["build", str(path), "--render-only"])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.startswith("# containers/tt-metal-source.Dockerfile\n")
    assert (REPO / "containers" / "tt-metal-source.Dockerfile").read_text().rstrip() in out
    command = out.rstrip().splitlines()[-1]
    assert shlex.split(command) == images.docker_build_argv(load_job(path))


def test_build_with_a_bad_spec_exits_2_with_the_location(tmp_path):
    path = write_job(tmp_path, "{base: 'ubuntu:22.04', wheel: 0.81.1, build_flags: ['--x;rm']}")
    result = CliRunner().invoke(app, ["build", str(path)])
    assert result.exit_code == 2
    assert re.search(rf"^{re.escape(str(path))}:\d+:\d+: ", result.stderr, re.M), result.stderr
    assert "Traceback" not in result.output


# ---------------------------------------------------------------------------------------------
# Secrets


def test_secret_references_resolve_from_the_environment_at_use_time():
    assert images.resolve_secret("${REG_PW}", "registry password", {"REG_PW": "s3cret"}) == "s3cret"


@pytest.mark.parametrize("reference", ["s3cret", "$REG_PW", None])
def test_a_literal_secret_is_refused(reference):
    with pytest.raises(images.ImageError) as info:
        images.resolve_secret(reference, "registry password", {"REG_PW": "s3cret"})
    assert "s3cret" not in str(info.value)


def test_an_unset_secret_is_an_environment_fault():
    with pytest.raises(images.ImageError) as info:
        images.resolve_secret("${REG_PW}", "registry password", {})
    assert info.value.category is EnvCategory.IMAGE
    assert "REG_PW is not set" in str(info.value)


# ---------------------------------------------------------------------------------------------
# The file-hash cache that keeps re-hashing a large checkout cheap


def test_cached_file_hashes_are_used_only_while_the_file_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(images._HashCache, "_RACY_NS", 0)  # files made just now may be cached
    root = make_checkout(tmp_path / "tt-metal")
    cache_dir = tmp_path / "cache"
    truth = images.tree_digest(root, tmp_path / "no-cache-1")
    assert images.tree_digest(root, cache_dir) == truth
    (cache_file,) = cache_dir.iterdir()
    entries = json.loads(cache_file.read_text())
    assert set(entries) == {"build_metal.sh", "tests/build_utils/helper.py", "tt_metal/impl/device.cpp"}

    # Proof the cache is read: a doctored entry for an unchanged file is believed.
    entries["build_metal.sh"][4] = "00" * 32
    cache_file.write_text(json.dumps(entries))
    assert images.tree_digest(root, cache_dir) != truth

    # Same size, new content: the changed stat makes the cache re-hash it.
    (root / "build_metal.sh").write_text("#!/bin/sh\necho BUILD\n")
    fresh = images.tree_digest(root, tmp_path / "no-cache-2")
    assert fresh != truth
    assert images.tree_digest(root, cache_dir) == fresh


def test_a_broken_or_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    monkeypatch.setattr(images._HashCache, "_RACY_NS", 0)
    root = make_checkout(tmp_path / "tt-metal")
    truth = images.tree_digest(root, tmp_path / "no-cache")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    assert images.tree_digest(root, blocker) == truth
    corrupt = tmp_path / "corrupt"
    images.tree_digest(root, corrupt)
    (cache_file,) = corrupt.iterdir()
    cache_file.write_text("{not json")
    assert images.tree_digest(root, corrupt) == truth
