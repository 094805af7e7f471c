"""Job specs: what to build, where it may run, and which checks to run in it.

A job spec is YAML (see README, "Job spec reference"). :func:`load_job` turns it into small
immutable types or raises :class:`~harness.core.errors.InputError` listing every problem as
``path:line:col: message``.
"""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from harness.core.errors import InputError, Problem
from harness.core.outcomes import KnownBug
from harness.core.secretref import Masker
from harness.core.profiles import Profile, default_boards, default_profiles, lint, parse_profile, widening
from harness.core.yamlnodes import Fields, Node, did_you_mean, load_file, parse_named

ARCHES = ("wormhole_b0", "blackhole")
BOARDS = ("n150", "n300", "t3000", "galaxy", "p150", "p300")
CHECK_KINDS = ("gtest", "pytest", "command", "mlir-order")
# tt-metal-sim: STAND-IN binaries built from a local folder for the simulated lab (harness/lab),
# which has no card: see containers/tt-metal-sim.Dockerfile.
PROJECTS = ("tt-metal", "tt-mlir", "tt-metal-sim")
FANOUTS = ("all", "any")
FUSED_POLICIES = ("min", "max", "skip")
# build_metal.sh --build-type values (tt-metal build_metal.sh)
BUILD_TYPES = ("Release", "Debug", "RelWithDebInfo", "ASan", "TSan", "CodeCoverage", "ASanCoverage")
_BUILD_TYPE_FLAGS = {"--debug": "Debug", "--release": "Release", "--development": "RelWithDebInfo"}
# build_metal.sh flags we know; newer tt-metal accepts more, so an unknown flag is allowed
# but must look like a flag (no shell metacharacters can sneak into the build this way).
_FLAG = re.compile(r"^--?[A-Za-z0-9][A-Za-z0-9_-]*(=[A-Za-z0-9_./:+,=-]*)?$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SECRET_KEY = re.compile(r"(PASSWORD|PASSWD|SECRET|TOKEN|API_KEY|PRIVATE_KEY|CREDENTIAL)", re.IGNORECASE)
MAX_TIMEOUT = 7 * 86400  # a check that needs a week is a mistake, and bigger numbers overflow timers
MAX_ARG_CHARS = 64 * 1024  # one argument; the kernel refuses an argv past ~2 MB (ARG_MAX) at run time
MAX_ARGV_CHARS = 512 * 1024
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")


@dataclass(frozen=True)
class ImageSpec:
    """What goes into the image. Exactly one of ``git`` (+``ref``), ``path`` or ``wheel``."""

    project: str  # tt-metal | tt-mlir
    base: str
    git: str | None = None
    ref: str | None = None
    path: Path | None = None  # a local checkout, resolved against the spec's folder
    wheel: str | None = None  # ttnn version from PyPI, e.g. "0.81.1"
    build_type: str = "Release"
    build_flags: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()

    @property
    def template(self) -> str:
        """Which Dockerfile template in containers/ builds this image."""
        if self.project in ("tt-mlir", "tt-metal-sim"):
            return self.project
        return "tt-metal-wheel" if self.wheel else "tt-metal-source"

    @property
    def home(self) -> str | None:
        """Where the project lives inside the image (TT_METAL_HOME for tt-metal builds)."""
        if self.project == "tt-mlir":
            return "/opt/tt-mlir"
        return None if self.wheel else "/tt-metal"


@dataclass(frozen=True)
class DeviceRequirement:
    arch: str
    board: str
    count: int = 1
    shared: bool = False  # other containers may use the same card at the same time


@dataclass(frozen=True)
class HostSelection:
    labels: tuple[str, ...] = ()
    fanout: str = "all"  # all: every matching host runs every check; any: the pool shares the work


@dataclass(frozen=True)
class CheckSpec:
    name: str
    kind: str
    timeout: float  # seconds
    repeat: int = 1
    env: Mapping[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    known_bug: KnownBug | None = None
    binary: str | None = None  # gtest
    filter: str | None = None  # gtest
    target: str | None = None  # pytest: a test path or node id
    command: tuple[str, ...] = ()  # command, mlir-order: argv run in the container
    input: Path | None = None  # mlir-order: a local .mlir file copied into the container
    ab: bool = False  # mlir-order: rerun with enable-erase-inverse-ops-pass=false on a violation
    fused: str = "min"  # mlir-order: index policy for fused locations
    profile: Profile | None = None  # this check's own device profile; None: the job's
    # Secrets as files, /run/secrets/<NAME> read-only in the container (name -> "${VAR}"): unlike
    # env secrets they do not show in `docker inspect` on the host.
    secret_files: Mapping[str, str] = field(default_factory=dict)


def secret_masker(job: "JobSpec", environ: Mapping[str, str]) -> Masker:
    """The masker for a run of ``job``: every secret its checks reference, as set in ``environ``."""
    return Masker.for_checks(
        [mapping for check in job.checks for mapping in (check.env, check.secret_files)], environ
    )


def check_profile(job: "JobSpec", check: CheckSpec) -> Profile:
    """The device profile a check's container gets: its own, else the job's."""
    return check.profile or job.profile


@dataclass(frozen=True)
class JobSpec:
    name: str
    path: Path
    image: ImageSpec
    device: DeviceRequirement | None  # None: a compiler-only job that needs no card
    profile: Profile
    hosts: HostSelection
    checks: tuple[CheckSpec, ...]
    description: str = ""
    warnings: tuple[Problem, ...] = ()  # what the profile lacks for the board, located in the spec
    smoke: str | None = None  # the check that tells a sick board from a check that hangs it

    def check(self, name: str) -> CheckSpec:
        for check in self.checks:
            if check.name == name:
                return check
        raise KeyError(name)


# ---------------------------------------------------------------------------------------------
# Parsing


def load_job(path: str | Path, profiles: Mapping[str, Profile] | None = None) -> JobSpec:
    """Load and validate one job spec. ``profiles`` is the catalog named profiles come from."""
    root = load_file(path)
    return parse_job(root, Path(path), default_profiles() if profiles is None else profiles)


def parse_job(root: Node, path: Path, profiles: Mapping[str, Profile]) -> JobSpec:
    f = Fields(
        root,
        "job spec",
        required=("name", "image", "checks"),
        optional=("description", "device", "profile", "hosts", "smoke"),
    )
    problems: list[Problem] = []

    def attempt(parse, *args):
        try:
            return parse(*args)
        except InputError as exc:
            problems.extend(exc.problems)
            return None

    name = attempt(_name, f.req("name"), "job name")
    image = attempt(_image, f.req("image"), path.parent)
    device = attempt(_device, f.opt("device")) if f.has("device") else None
    profile = attempt(_profile_ref, f.opt("profile"), profiles, device is not None or f.has("device"))
    hosts = attempt(_hosts, f.opt("hosts"))
    checks = attempt(_checks, f.req("checks"), path.parent, problems, profiles)
    description = f.opt("description")
    smoke = f.opt("smoke").as_str("smoke") if f.has("smoke") else None
    if smoke is not None and checks is not None and smoke not in {c.name for c in checks}:
        problems.append(f.req("smoke").problem(
            f"smoke names no check of this job{did_you_mean(smoke, tuple(c.name for c in checks))}"
        ))
    if problems:
        raise InputError(problems)
    warnings: tuple[Problem, ...] = tuple(
        f.req("checks").problem(f"warning: check {check.name} reads its input from outside the job's folder: {check.input}")
        for check in checks
        if check.input is not None and not check.input.is_relative_to(path.parent.resolve())
    )
    for named, where_key in ((profile, "profile"), *((c.profile, "checks") for c in checks if c.profile is not None)):
        node = f.key_node(where_key) if f.has(where_key) else f.req("checks")
        warnings += tuple(node.problem(f"warning: {text}") for text in widening(named))
    if device is not None:
        where = f.key_node("profile") if f.has("profile") else f.key_node("device")
        board = default_boards()[device.board]
        warnings += tuple(where.problem(f"warning: {text}") for text in lint(profile, board, device.shared))
        for check in checks:
            if check.profile is not None and not check.profile.cardless:
                warnings += tuple(
                    f.req("checks").problem(f"warning: check {check.name}: {text}")
                    for text in lint(check.profile, board, device.shared)
                )
    return JobSpec(
        name=name,
        path=path,
        image=image,
        device=device,
        profile=profile,
        hosts=hosts,
        checks=checks,
        description=" ".join(description.as_str("description").split()) if description else "",
        warnings=warnings,
        smoke=smoke,
    )


def _name(node: Node, what: str) -> str:
    text = node.as_str(what)
    if not _NAME.fullmatch(text):
        raise node.fail(f"{what} {text!r} must be 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return text


def _image(node: Node, spec_dir: Path) -> ImageSpec:
    f = Fields(
        node,
        "image",
        required=("base",),
        optional=("project", "git", "ref", "path", "wheel", "build_type", "build_flags", "packages"),
    )
    project = f.opt("project").as_choice("image.project", PROJECTS) if f.has("project") else "tt-metal"
    sources = [key for key in ("git", "path", "wheel") if f.has(key)]
    if len(sources) != 1:
        raise node.fail(
            "image needs exactly one source: `git` (with `ref`), a local checkout `path`, or a ttnn `wheel` version"
            + (f"; got {', '.join(sources)}" if sources else "")
        )
    git = ref = wheel = None
    checkout = None
    if f.has("git"):
        git = f.req("git").as_str("image.git")
        if not f.has("ref"):
            raise f.req("git").fail("image.git needs a `ref` (a commit, tag or branch) so builds are reproducible")
        ref = _safe_token(f.req("ref"), "image.ref")
    elif f.has("ref"):
        raise f.req("ref").fail("image.ref only goes with image.git")
    if f.has("path"):
        checkout = _local_path(f.req("path"), spec_dir, "image.path")
        if not checkout.is_dir():
            raise f.req("path").fail(f"image.path {checkout} is not a folder: point it at a tt-metal or tt-mlir checkout")
    if project == "tt-metal-sim" and not f.has("path"):
        raise node.fail("a tt-metal-sim image builds its stand-ins from a local `path` (harness/lab/standin)")
    if f.has("wheel"):
        if project != "tt-metal":
            raise f.req("wheel").fail("a ttnn wheel only provides tt-metal; tt-mlir images build from git or path")
        wheel = _safe_token(f.req("wheel"), "image.wheel")
    flags = f.opt("build_flags").as_str_list("image.build_flags") if f.has("build_flags") else ()
    for i, flag in enumerate(flags):
        if not _FLAG.fullmatch(flag):
            raise f.req("build_flags").as_list("image.build_flags")[i].fail(
                f"build flag {flag!r} is not a build_metal.sh option (like --build-all or --enable-ccache)"
            )
    build_type = f.opt("build_type").as_choice("image.build_type", BUILD_TYPES) if f.has("build_type") else None
    implied = {_BUILD_TYPE_FLAGS[flag] for flag in flags if flag in _BUILD_TYPE_FLAGS}
    if len(implied) > 1 or (build_type and implied and implied != {build_type}):
        raise f.key_node("build_flags").fail(
            f"build flags imply build type {', '.join(sorted(implied))} but build_type is {build_type or 'unset'}: pick one"
        )
    if wheel and (flags or build_type):
        raise f.key_node("build_flags").fail("a ttnn wheel is prebuilt: build_type and build_flags do not apply")
    packages = f.opt("packages").as_str_list("image.packages") if f.has("packages") else ()
    for i, package in enumerate(packages):
        if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+~:-]+)?", package):
            raise f.req("packages").as_list("image.packages")[i].fail(f"{package!r} is not a Debian/Ubuntu package name")
    return ImageSpec(
        project=project,
        base=_safe_token(f.req("base"), "image.base"),
        git=git,
        ref=ref,
        path=checkout,
        wheel=wheel,
        build_type=build_type or (implied.pop() if implied else "Release"),
        build_flags=flags,
        packages=packages,
    )


def _safe_token(node: Node, what: str) -> str:
    """Values that end up in Dockerfiles and image refs: no whitespace or shell syntax."""
    text = node.as_str(what)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_./:@+=-]*", text):
        raise node.fail(f"{what} {text!r} may only contain letters, digits and _ . / : @ + = -")
    return text


def _device(node: Node) -> DeviceRequirement:
    f = Fields(node, "device", required=("arch", "board"), optional=("count", "shared"))
    arch = f.req("arch").as_choice("device.arch", ARCHES)
    board = f.req("board").as_choice("device.board", BOARDS)
    board_arch = default_boards()[board].arch
    if board_arch != arch:
        raise f.req("arch").fail(f"board {board} is {board_arch}, not {arch}")
    count = f.opt("count").as_int("device.count", minimum=1) if f.has("count") else 1
    shared = f.opt("shared").as_bool("device.shared") if f.has("shared") else False
    return DeviceRequirement(arch=arch, board=board, count=count, shared=shared)


def _profile_ref(node: Node | None, profiles: Mapping[str, Profile], needs_card: bool) -> Profile:
    if node is None:
        return profiles["full" if needs_card else "none"]
    if node.is_map:
        return parse_profile(node, name=None)
    name = node.as_str("profile")
    if name not in profiles:
        raise node.fail(
            f"unknown device profile {name!r}{did_you_mean(name, tuple(profiles))}; "
            f"known: {', '.join(sorted(profiles))} (or define one inline as a mapping)"
        )
    return profiles[name]


def _hosts(node: Node | None) -> HostSelection:
    if node is None:
        return HostSelection()
    f = Fields(node, "hosts", optional=("labels", "fanout"))
    labels = f.opt("labels").as_str_list("hosts.labels") if f.has("labels") else ()
    fanout = f.opt("fanout").as_choice("hosts.fanout", FANOUTS) if f.has("fanout") else "all"
    return HostSelection(labels=labels, fanout=fanout)


_CHECK_KEYS = {
    "gtest": ("binary", "filter", "args"),
    "pytest": ("target", "args"),
    "command": ("command",),
    "mlir-order": ("command", "input", "input_anywhere", "ab", "fused"),
}
_COMMON_KEYS = ("timeout", "repeat", "env", "expect", "reason", "link", "profile", "secret_files")
_REQUIRED_BY_KIND = {"gtest": ("binary",), "pytest": ("target",), "command": ("command",), "mlir-order": ("command",)}


def _checks(node: Node, spec_dir: Path, problems: list[Problem], profiles: Mapping[str, Profile]) -> tuple[CheckSpec, ...]:
    items = node.as_list("checks")
    if not items:
        raise node.fail("a job needs at least one check")
    checks, _, found = parse_named(items, lambda item: _check(item, spec_dir, profiles), lambda c: c.name, "check name")
    problems.extend(found)
    return tuple(checks)


def _check(node: Node, spec_dir: Path, profiles: Mapping[str, Profile]) -> CheckSpec:
    kind_node = node.as_map("check").get("kind")
    if kind_node is None:
        raise node.fail("check is missing required key 'kind'")
    kind = kind_node.as_choice("check kind", CHECK_KINDS)
    f = Fields(
        node,
        f"{kind} check",
        required=("name", "kind") + _REQUIRED_BY_KIND[kind],
        optional=tuple(k for k in _CHECK_KEYS[kind] if k not in _REQUIRED_BY_KIND[kind]) + _COMMON_KEYS,
    )
    name = _name(f.req("name"), "check name")
    known_bug = None
    expect = f.opt("expect").as_choice("expect", ("pass", "fail")) if f.has("expect") else "pass"
    if expect == "fail":
        if not f.has("reason"):
            raise f.req("expect").fail("`expect: fail` needs a `reason` (what the known bug is), and ideally a `link`")
        known_bug = KnownBug(
            reason=f.req("reason").as_str("reason"), link=f.opt("link").as_str("link") if f.has("link") else None
        )
    elif f.has("reason") or f.has("link"):
        raise f.key_node("reason" if f.has("reason") else "link").fail("`reason` and `link` go with `expect: fail`")
    input_path = None
    if f.has("input"):
        node = f.req("input")
        input_path = _local_path(node, spec_dir, "input")  # symlinks followed: where it really is
        anywhere = f.opt("input_anywhere").as_bool("input_anywhere") if f.has("input_anywhere") else False
        if not anywhere and not input_path.is_relative_to(spec_dir.resolve()):
            # An input is copied to the host and its content can reach the report: a path out of
            # the job's folder (../../etc/shadow, or a link to it) must be asked for explicitly.
            raise node.fail(
                f"input {input_path} is outside the job's folder {spec_dir.resolve()}; "
                "move it there, or set `input_anywhere: true` on the check if that is really meant"
            )
        if input_path.is_dir():
            raise node.fail(f"input {input_path} is a folder: give a file")
        if not input_path.exists():
            raise node.fail(f"input file {input_path} does not exist")
        if not input_path.is_file():
            raise node.fail(f"input {input_path} is not a regular file")
    return CheckSpec(
        name=name,
        kind=kind,
        timeout=_duration(f.opt("timeout"), "timeout") if f.has("timeout") else 1800.0,
        repeat=f.opt("repeat").as_int("repeat", minimum=1) if f.has("repeat") else 1,
        env=_env(f.opt("env")),
        args=_bounded_argv(f.req("args"), f.req("args").as_str_list("args"), "args") if f.has("args") else (),
        known_bug=known_bug,
        binary=f.opt("binary").as_str("binary") if f.has("binary") else None,
        filter=f.opt("filter").as_str("filter") if f.has("filter") else None,
        target=f.opt("target").as_str("target") if f.has("target") else None,
        command=_argv(f.opt("command")) if f.has("command") else (),
        input=input_path,
        ab=f.opt("ab").as_bool("ab") if f.has("ab") else False,
        fused=f.opt("fused").as_choice("fused", FUSED_POLICIES) if f.has("fused") else "min",
        profile=_profile_ref(f.opt("profile"), profiles, True) if f.has("profile") else None,
        secret_files=_secret_files(f.opt("secret_files")) if f.has("secret_files") else {},
    )


def _local_path(node: Node, spec_dir: Path, what: str) -> Path:
    """A path of the spec, resolved against its folder (symlinks followed); one the system
    cannot even look at (too long, a loop of links) is the spec's problem."""
    path = spec_dir / node.as_str(what)
    try:
        path = path.resolve()
        path.stat()
    except FileNotFoundError:
        return path
    except (OSError, RuntimeError) as exc:  # ENAMETOOLONG, ELOOP, EACCES...
        raise node.fail(f"{what} {str(path)[:200]} cannot be used: {getattr(exc, 'strerror', None) or exc}") from None
    return path


def _argv(node: Node) -> tuple[str, ...]:
    """A command is an argv list; a string is split like a shell would, but never run by one."""
    if isinstance(node.value, str):
        try:
            argv = tuple(shlex.split(node.value))
        except ValueError as exc:
            raise node.fail(f"cannot split command: {exc}") from None
    else:
        argv = node.as_str_list("command")
    if not argv:
        raise node.fail("command is empty")
    return _bounded_argv(node, argv, "command")


def _bounded_argv(node: Node, argv: tuple[str, ...], what: str) -> tuple[str, ...]:
    """An argv the kernel will take: refused here, not as 'Argument list too long' mid-run."""
    longest = max((len(arg) for arg in argv), default=0)
    if longest > MAX_ARG_CHARS:
        raise node.fail(f"{what} has an argument of {longest} characters; at most {MAX_ARG_CHARS} are allowed")
    if sum(len(arg) + 1 for arg in argv) > MAX_ARGV_CHARS:
        raise node.fail(f"{what} is longer than {MAX_ARGV_CHARS} characters in all")
    return argv


def _duration(node: Node, what: str) -> float:
    value = node.value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.fullmatch(str(value))
        if not match:
            raise node.fail(f"{what} must be seconds or a duration like 90s, 30m, 2h; got {value!r}")
        seconds = float(match.group(1)) * {"s": 1, None: 1, "m": 60, "h": 3600}[match.group(2)]
    if not math.isfinite(seconds) or seconds <= 0:
        raise node.fail(f"{what} must be a positive, finite number of seconds; got {value!r}")
    if seconds > MAX_TIMEOUT:
        raise node.fail(f"{what} of {seconds:g} s is more than {MAX_TIMEOUT // 86400} days: say what you mean")
    return seconds


def _secret_files(node: Node) -> Mapping[str, str]:
    files: dict[str, str] = {}
    for key, value in node.as_map("secret_files").items():
        if not _NAME.fullmatch(key):
            raise InputError([value.key_problem(f"secret file name {key!r} must be letters, digits, '.', '_' or '-'")])
        files[key] = value.as_secret_ref(f"secret_files {key}")
    return files


def _env(node: Node | None) -> Mapping[str, str]:
    if node is None:
        return {}
    env: dict[str, str] = {}
    for key, value in node.as_map("env").items():
        if not _ENV_KEY.fullmatch(key):
            raise InputError([value.key_problem(f"env name {key!r} is not a valid variable name")])
        if isinstance(value.value, (int, float)) and not isinstance(value.value, bool):
            text = str(value.value)
        else:
            text = value.as_str(f"env {key}")
        if _SECRET_KEY.search(key):
            text = value.as_secret_ref(f"env {key}")
        if len(text) > MAX_ARG_CHARS:
            raise InputError([value.problem(f"env {key} is {len(text)} characters; at most {MAX_ARG_CHARS} are allowed")])
        env[key] = text
    return env
