#!/usr/bin/env bash
# Builds the local base images that tests and the simulated lab run on. Nothing can be pulled
# from a registry here, so both come from Debian packages:
#   tt-harness/debian:bookworm  a debootstrap --variant=minbase root filesystem, imported
#   tt-harness/busybox:latest   busybox-static on scratch: a few MB, for tests that only need sh
# Usage: build-base.sh [debian|busybox|all]   (default: all). An image that exists is kept.
# DEBIAN_MIRROR overrides the mirror; by default it is the one apt uses on this machine.
set -euo pipefail

DEBIAN_IMAGE=tt-harness/debian:bookworm
BUSYBOX_IMAGE=tt-harness/busybox:latest

log() { printf 'build-base: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# The bookworm mirror apt is configured with (deb822 .sources first, then one-line lists).
apt_mirror() {
    local uri
    uri=$(awk '/^URIs:/ && $2 !~ /security/ {print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
    if [[ -z "$uri" ]]; then
        uri=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null || true)
    fi
    printf '%s\n' "${uri:-http://deb.debian.org/debian}"
}

# apt-get install, refreshing the package lists once if they are missing or stale.
apt_install() {
    if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1; then
        apt-get update -qq >/dev/null
        apt-get install -y -qq --no-install-recommends "$@" >/dev/null
    fi
}

build_debian() {
    if have_image "$DEBIAN_IMAGE"; then
        log "$DEBIAN_IMAGE exists"
        return
    fi
    command -v debootstrap >/dev/null || apt_install debootstrap
    local mirror root
    mirror=${DEBIAN_MIRROR:-$(apt_mirror)}
    root=$(mktemp -d /tmp/tt-harness-rootfs.XXXXXX)
    trap 'rm -rf "$root"' RETURN
    log "debootstrap bookworm from $mirror (a few minutes, once)"
    if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1; then
        tail -n 30 "$root.log" >&2
        rm -f "$root.log"
        die "debootstrap failed"
    fi
    rm -f "$root.log"
    # Keep the image small and its apt usable: no cached .debs, and the same mirror.
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    printf 'deb %s bookworm main\n' "$mirror" >"$root/etc/apt/sources.list"
    tar --numeric-owner -C "$root" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'CMD ["/bin/bash"]' - "$DEBIAN_IMAGE" >/dev/null
    have_image "$DEBIAN_IMAGE" || die "docker import did not create $DEBIAN_IMAGE"
    log "built $DEBIAN_IMAGE"
}

build_busybox() {
    if have_image "$BUSYBOX_IMAGE"; then
        log "$BUSYBOX_IMAGE exists"
        return
    fi
    local ctx
    ctx=$(mktemp -d /tmp/tt-harness-busybox.XXXXXX)
    trap 'rm -rf "$ctx"' RETURN
    # Download rather than install: busybox-static conflicts with the host's busybox package.
    if ! (cd "$ctx" && apt-get download -qq busybox-static >/dev/null 2>&1); then
        apt-get update -qq >/dev/null
        (cd "$ctx" && apt-get download -qq busybox-static >/dev/null)
    fi
    dpkg-deb -x "$ctx"/busybox-static_*.deb "$ctx/pkg"
    install -m 0755 "$ctx/pkg/bin/busybox" "$ctx/busybox"
    cat >"$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
ENV PATH=/bin
CMD ["/bin/sh"]
DOCKERFILE
    # The classic builder: this engine (20.10) may have no BuildKit/buildx on the client side.
    if ! DOCKER_BUILDKIT=0 docker build -q -t "$BUSYBOX_IMAGE" "$ctx" >"$ctx/build.log" 2>&1; then
        cat "$ctx/build.log" >&2
        die "docker build of $BUSYBOX_IMAGE failed"
    fi
    have_image "$BUSYBOX_IMAGE" || die "docker build did not create $BUSYBOX_IMAGE"
    log "built $BUSYBOX_IMAGE"
}

docker version --format '{{.Server.Version}}' >/dev/null 2>&1 || die "Docker engine unreachable (DOCKER_HOST=${DOCKER_HOST:-unset})"

case "${1:-all}" in
    debian) build_debian ;;
    busybox) build_busybox ;;
    all) build_busybox; build_debian ;;
    *) die "usage: $0 [debian|busybox|all]" ;;
esac
