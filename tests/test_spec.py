"""Job specs: the real jobs validate; broken variants fail with the offending node's location."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.core.errors import InputError
from harness.core.spec import load_job

REPO = Path(__file__).resolve().parents[1]
JOBS = sorted((REPO / "jobs").glob("*.yaml"))


def test_the_real_jobs_validate():
    names = {load_job(path).name for path in JOBS}
    assert names == {"layernorm-bw", "eraseinverseops-order", "device-smoke", "nightly"}


def test_layernorm_job_carries_the_seed_checks():
    job = load_job(REPO / "jobs" / "layernorm-bw.yaml")
    bugrepro = job.check("layernorm-bw-bugrepro")
    assert bugrepro.filter == "LayerNormBackwardOpTest.BugRepro_*"
    assert bugrepro.known_bug is not None and "sum_register" in bugrepro.known_bug.reason
    nightly = job.check("layernorm-bw-nightly")
    assert nightly.repeat == 5 and nightly.known_bug is None
    assert nightly.timeout == 20 * 60
    assert job.image.build_type == "Debug"  # implied by --debug
    assert job.profile.name == "full" and job.warnings == ()


def _variant(tmp_path: Path, name: str, old: str, new: str) -> Path:
    """A copy of a real job with one edit, placed beside a copy of its inputs."""
    text = (REPO / "jobs" / name).read_text()
    assert old in text, old
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    shutil.copytree(REPO / "jobs" / "inputs", tmp_path / "inputs")  # a copy: a link out of the folder is refused
    return path


def _line_of(path: Path, needle: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return number
    raise AssertionError(needle)


def _problems(path: Path) -> list[str]:
    with pytest.raises(InputError) as info:
        load_job(path)
    return [str(p) for p in info.value.problems]


def test_misspelled_key_points_at_the_key_with_a_suggestion(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "    repeat: 5", "    repaet: 5")
    line = _line_of(path, "repaet")
    assert _problems(path) == [f"{path}:{line}:5: unknown key 'repaet' in gtest check (did you mean 'repeat'?)"]


def test_duplicate_key_is_rejected(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "    timeout: 20m\n", "    timeout: 20m\n    timeout: 21m\n")
    line = _line_of(path, "timeout: 21m")
    assert _problems(path) == [f"{path}:{line}:5: duplicate key 'timeout' (first defined at line {line - 1})"]


def test_wrong_board_for_arch(tmp_path):
    path = _variant(tmp_path, "device-smoke.yaml", "arch: wormhole_b0", "arch: blackhole")
    line = _line_of(path, "arch: blackhole")
    assert _problems(path) == [f"{path}:{line}:9: board n150 is wormhole_b0, not blackhole"]


def test_known_bug_needs_a_reason(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "    repeat: 5\n", "    repeat: 5\n    expect: fail\n")
    problems = _problems(path)
    assert len(problems) == 1 and "`expect: fail` needs a `reason`" in problems[0]


def test_every_problem_is_reported_not_just_the_first(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "board: n150", "board: n151")
    text = path.read_text().replace("    repeat: 5", "    repeat: 0")
    path.write_text(text)
    problems = _problems(path)
    assert any("device.board must be one of" in p and "(did you mean 'n150'?)" in p for p in problems)
    assert any(f":{_line_of(path, 'repeat: 0')}:13: repeat must be at least 1, got 0" in p for p in problems)


def test_literal_secret_in_env_is_refused(tmp_path):
    path = _variant(
        tmp_path, "layernorm-bw.yaml", '      ENABLE_NIGHTLY_TT_TRAIN_TESTS: "1"',
        '      ENABLE_NIGHTLY_TT_TRAIN_TESTS: "1"\n      HF_TOKEN: hf_abcdef123456',
    )
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{_line_of(path, 'HF_TOKEN')}:")
    assert "secret" in problem and "hf_abcdef" not in problem


def test_secret_reference_is_accepted(tmp_path):
    path = _variant(
        tmp_path, "layernorm-bw.yaml", '      ENABLE_NIGHTLY_TT_TRAIN_TESTS: "1"',
        '      ENABLE_NIGHTLY_TT_TRAIN_TESTS: "1"\n      HF_TOKEN: ${HF_TOKEN}',
    )
    assert load_job(path).check("layernorm-bw-nightly").env["HF_TOKEN"] == "${HF_TOKEN}"


def test_image_needs_exactly_one_source(tmp_path):
    path = _variant(tmp_path, "device-smoke.yaml", "  wheel: 0.81.1", "  wheel: 0.81.1\n  path: ../tt-metal")
    (problem,) = _problems(path)
    assert problem == f"{path}:{_line_of(path, 'image:') + 1}:3: image needs exactly one source: `git` (with `ref`), a local checkout `path`, or a ttnn `wheel` version; got path, wheel"


def test_shell_syntax_cannot_reach_the_dockerfile(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "[--debug, --build-all", "[--debug, '--build-all; rm -rf /'")
    (problem,) = _problems(path)
    assert "is not a build_metal.sh option" in problem


def test_conflicting_build_type(tmp_path):
    path = _variant(tmp_path, "layernorm-bw.yaml", "  build_flags:", "  build_type: Release\n  build_flags:")
    (problem,) = _problems(path)
    assert "imply build type Debug but build_type is Release" in problem


def test_mlir_input_must_exist(tmp_path):
    path = _variant(tmp_path, "eraseinverseops-order.yaml", "inputs/resnet50_layer4_indexed.mlir", "inputs/missing.mlir")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{_line_of(path, 'missing.mlir')}:12: input file ") and "does not exist" in problem


def test_unsafe_yaml_tags_are_refused(tmp_path):
    path = tmp_path / "evil.yaml"
    path.write_text("name: !!python/object/apply:os.system ['touch /tmp/pwned']\nimage: {base: x, wheel: '1'}\nchecks: []\n")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:1:7: invalid YAML: ") and "python/object/apply" in problem
    assert not Path("/tmp/pwned").exists()


def test_billion_laughs_is_refused(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text('a: &a ["lol","lol"]\nb: &b [*a,*a]\nc: &c [*b,*b]\nname: x\n')
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:2:8: YAML alias *a is not supported")


def test_inline_profile_gets_lint_warnings(tmp_path):
    path = _variant(tmp_path, "device-smoke.yaml", "hosts:", "profile:\n  name: bare\n  devices: [/dev/tenstorrent]\nhosts:")
    job = load_job(path)
    line = _line_of(path, "profile:")
    texts = [str(w) for w in job.warnings]
    assert len(texts) == 2
    assert texts[0].startswith(f"{path}:{line + 1}:3: warning: profile 'bare' does not mount /dev/hugepages-1G")
    assert "does not bind /sys" in texts[1]


def test_local_checkout_must_exist(tmp_path):
    path = _variant(tmp_path, "device-smoke.yaml", "  wheel: 0.81.1", "  path: ../no-such-checkout")
    (problem,) = _problems(path)
    assert problem.startswith(f"{path}:{_line_of(path, 'no-such-checkout')}:9: image.path ") and "is not a folder" in problem
