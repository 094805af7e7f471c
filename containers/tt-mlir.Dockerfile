# tt-mlir compiler toolchain for compiler-pipeline jobs: ttmlir-opt and ttmlir-translate on PATH.
# Built from a git ref cloned in the image, or from a local checkout sent as src/.
#
# The base is expected to carry tt-mlir's build dependencies (clang, cmake, ninja, python3-venv),
# as tt-mlir's own CI base image does; PACKAGES adds more. Values come only through build args,
# expanded in quotes (BUILD_FLAGS are extra cmake options and PACKAGES validated names: both
# split with globbing off). Classic-builder compatible (no heredocs/mounts).
ARG BASE
FROM ${BASE}

ARG TT_MLIR_GIT=""
ARG TT_MLIR_REF=""
ARG BUILD_TYPE=Release
ARG BUILD_FLAGS=""
ARG PACKAGES=""

ENV DEBIAN_FRONTEND=noninteractive \
    TTMLIR_TOOLCHAIN_DIR=/opt/ttmlir-toolchain
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN set -f; pkgs="$PACKAGES"; \
    if [ -n "$TT_MLIR_GIT" ]; then pkgs="git ca-certificates $pkgs"; fi; \
    if [ -n "$pkgs" ]; then \
        apt-get update && apt-get install -y --no-install-recommends $pkgs \
        && rm -rf /var/lib/apt/lists/*; \
    fi

COPY src/ /opt/tt-mlir/
RUN if [ -n "$TT_MLIR_GIT" ]; then \
        git clone --filter=blob:none -- "$TT_MLIR_GIT" /opt/tt-mlir \
        && git -C /opt/tt-mlir checkout --detach "$TT_MLIR_REF" \
        && git -C /opt/tt-mlir submodule update --init --recursive; \
    fi
WORKDIR /opt/tt-mlir

# Say what the base lacks up front, instead of failing deep inside an LLVM build.
RUN missing=""; \
    for tool in cmake ninja clang clang++; do command -v "$tool" >/dev/null || missing="$missing $tool"; done; \
    if [ -n "$missing" ]; then \
        echo "tt-mlir needs$missing in the base image: use tt-mlir's CI base image or add them to image.packages" >&2; \
        exit 1; \
    fi

# The LLVM/MLIR toolchain takes hours to build: reuse one the base already has (tt-mlir's CI
# images ship it in TTMLIR_TOOLCHAIN_DIR), build it only when missing, and drop its build tree.
RUN if [ ! -d "$TTMLIR_TOOLCHAIN_DIR/bin" ]; then \
        mkdir -p "$TTMLIR_TOOLCHAIN_DIR" && cmake -B env/build env && cmake --build env/build \
        && rm -rf env/build; \
    fi

RUN set -f; source env/activate \
    && cmake -G Ninja -B build -DCMAKE_BUILD_TYPE="$BUILD_TYPE" $BUILD_FLAGS \
    && cmake --build build --target ttmlir-opt ttmlir-translate

ENV PATH=/opt/tt-mlir/build/bin:$PATH
# The image is only useful if the compiler runs.
RUN ttmlir-opt --version
