# tt-metal built from source: a git ref cloned in the image, or a local checkout sent as src/.
#
# The harness fills every value through build args (never by editing this text), so nothing from
# a job spec is parsed as Dockerfile or shell syntax: RUN lines only expand them in quotes, except
# the space-separated lists BUILD_FLAGS and PACKAGES, which are split with globbing off (set -f)
# and hold only validated flag and package names. Classic-builder compatible (no heredocs/mounts):
# lab hosts may run engines without BuildKit.
ARG BASE
FROM ${BASE}

ARG TT_METAL_GIT=""
ARG TT_METAL_REF=""
ARG BUILD_TYPE=Release
ARG BUILD_FLAGS=""
ARG PACKAGES=""

ENV DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Cloning needs git; a local checkout needs nothing installed first.
RUN if [ -n "$TT_METAL_GIT" ]; then \
        apt-get update && apt-get install -y --no-install-recommends git ca-certificates \
        && rm -rf /var/lib/apt/lists/*; \
    fi

# src/ holds the local checkout (minus .git and build dirs), or nothing for a git source.
COPY src/ /tt-metal/
RUN if [ -n "$TT_METAL_GIT" ]; then \
        git clone --filter=blob:none -- "$TT_METAL_GIT" /tt-metal \
        && git -C /tt-metal checkout --detach "$TT_METAL_REF" \
        && git -C /tt-metal submodule update --init --recursive; \
    fi
WORKDIR /tt-metal

# tt-metal's own dependency installer, as its dockerfile/Dockerfile runs it. Skipped when the
# checkout has none (a trimmed or test checkout), so that an image still builds on a plain base.
RUN if [ -f install_dependencies.sh ]; then bash ./install_dependencies.sh --docker; fi

RUN set -f; if [ -n "$PACKAGES" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $PACKAGES \
        && rm -rf /var/lib/apt/lists/*; \
    fi

RUN set -f; ./build_metal.sh --build-type "$BUILD_TYPE" $BUILD_FLAGS

ENV TT_METAL_HOME=/tt-metal \
    TT_METAL_RUNTIME_ROOT=/tt-metal \
    LD_LIBRARY_PATH=/tt-metal/build/lib \
    PYTHONPATH=/tt-metal
