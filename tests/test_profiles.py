"""Device profiles render to the exact docker options the issue names, and lint says what's missing."""

from __future__ import annotations

from harness.core.profiles import Mount, Profile, default_boards, default_profiles, lint


def test_full_profile_is_the_seed_reports_correct_configuration():
    full = default_profiles()["full"]
    assert full.docker_run_options("/tt-metal") == [
        "--device", "/dev/tenstorrent",
        "-v", "/dev:/dev",
        "-v", "/sys:/sys",
        "-v", "/dev/hugepages-1G:/dev/hugepages-1G",
        "-v", "/dev/hugepages:/dev/hugepages",
        "-e", "TT_METAL_HOME=/tt-metal",
        "-e", "TT_METAL_RUNTIME_ROOT=/tt-metal",
        "-e", "LD_LIBRARY_PATH=/tt-metal/build/lib",
    ]


def test_optional_hugepages_mount_only_where_the_host_has_it():
    full = default_profiles()["full"]
    options = full.docker_run_options("/tt-metal", has_path=lambda p: p != "/dev/hugepages")
    assert "/dev/hugepages:/dev/hugepages" not in options
    assert "/dev/hugepages-1G:/dev/hugepages-1G" in options


def test_ci_profile_is_what_tt_metal_ci_passes():
    ci = default_profiles()["ci"]
    assert ci.docker_run_options(None) == [
        "--device", "/dev/tenstorrent", "-v", "/dev/hugepages-1G:/dev/hugepages-1G", "--network=host",
    ]


def test_lint_full_profile_is_clean_for_every_board():
    boards = default_boards()
    assert all(lint(default_profiles()["full"], board) == [] for board in boards.values())


def test_lint_names_each_missing_piece_with_its_reason():
    bare = Profile(name="bare", devices=(), mounts=(Mount("/dev/shm", "/dev/shm"),))
    warnings = lint(bare, default_boards()["n300"], shared=True)
    assert len(warnings) == 4
    assert "No chips detected in the cluster" in warnings[0]
    assert "hugetlbfs at exactly /dev/hugepages-1G" in warnings[1] and "2 host-memory channel(s)" in warnings[1]
    assert "does not bind /sys" in warnings[2]
    assert "TT_UMD_LOCK" in warnings[3]


def test_dev_bind_covers_the_hugepage_mount_but_not_the_device_cgroup():
    # -v /dev:/dev is a recursive bind, so the 1G hugetlbfs is visible; the device cgroup still
    # refuses opens without --device or --privileged.
    profile = Profile(name="devbind", mounts=(Mount("/dev", "/dev"), Mount("/sys", "/sys")))
    warnings = lint(profile, default_boards()["n150"])
    assert len(warnings) == 1 and "--device /dev/tenstorrent" in warnings[0]


def test_boards_match_the_reference_table():
    boards = default_boards()
    assert {name: (b.arch, b.chips, b.mmio_devices) for name, b in boards.items()} == {
        "n150": ("wormhole_b0", 1, 1),
        "n300": ("wormhole_b0", 2, 1),
        "t3000": ("wormhole_b0", 8, 4),
        "galaxy": ("wormhole_b0", 32, 32),
        "p150": ("blackhole", 1, 1),
        "p300": ("blackhole", 2, 2),
    }
