# tt-metal from PyPI: the ttnn wheel (runtime with libtt_metal.so and tt-umd inside) plus tt-smi.
#
# Values come only through build args, expanded in quotes (PACKAGES: validated names, split with
# globbing off). ttnn publishes CPython 3.10 and 3.12 wheels only, so the base must be Ubuntu
# 22.04 or 24.04 (Debian bookworm's 3.11 has no ttnn wheel).
ARG BASE
FROM ${BASE}

ARG TTNN_VERSION
ARG PACKAGES=""
# Pinned so the image (and its content-hash tag) does not drift with tt-smi releases.
ARG TT_SMI_VERSION=6.8.0

ENV DEBIAN_FRONTEND=noninteractive
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

RUN set -f; apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv python3-pip ca-certificates $PACKAGES \
    && rm -rf /var/lib/apt/lists/*

# Fail with the reason instead of pip's "no matching distribution found".
RUN version="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
    case "$version" in \
        3.10|3.12) ;; \
        *) echo "ttnn wheels exist for CPython 3.10 and 3.12 only; this base has Python $version" >&2; exit 1 ;; \
    esac

RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv

# --no-deps: ttnn's declared dependencies pull torch (gigabytes); these are what it needs at run time.
RUN pip install --no-cache-dir --no-deps "ttnn==$TTNN_VERSION" \
    && pip install --no-cache-dir "numpy<2" loguru networkx graphviz pyyaml click pandas seaborn ml_dtypes \
       "tt-smi==$TT_SMI_VERSION"
