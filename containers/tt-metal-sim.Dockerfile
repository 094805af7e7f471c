# A SIMULATED tt-metal image for the simulated lab (harness/lab): there is no card here, so
# instead of tt-metal it carries STAND-INS built from a local folder (image.path, normally
# harness/lab/standin) at the paths the real image has them:
#   /tt-metal/build/tt-train/tests/ttml_tests        LayerNormBackwardOpTest computed on the CPU,
#                                                    with the seed's accumulation bug
#   /tt-metal/build/tt-train/tests/ttml_tests_fixed  the same with the seed's fix
#   /tt-metal/build/test/tt_metal/sim_device_smoke   opens and closes the simulated device
#   /usr/local/bin/ttmlir-opt                        moves one op as EraseInverseOps does
# Their device open looks at what the container really sees (nodes, hugetlbfs, tt-kmd, card
# lock, board state) and fails with tt-metal's own messages. Classic-builder compatible.
ARG BASE
FROM ${BASE} AS build
RUN apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++ libgtest-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*
COPY src/ /src/
RUN sh /src/ttml/build.sh /out

FROM ${BASE}
ARG PACKAGES=""
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN set -f; if [ -n "$PACKAGES" ]; then \
        apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES \
        && rm -rf /var/lib/apt/lists/*; \
    fi
COPY --from=build /out/ttml_tests /out/ttml_tests_fixed /tt-metal/build/tt-train/tests/
COPY --from=build /out/sim_device_smoke /tt-metal/build/test/tt_metal/
COPY src/ttmlir-opt /usr/local/bin/ttmlir-opt
RUN chmod 0755 /usr/local/bin/ttmlir-opt
ENV TT_METAL_HOME=/tt-metal \
    TT_METAL_RUNTIME_ROOT=/tt-metal \
    LD_LIBRARY_PATH=/tt-metal/build/lib
WORKDIR /tt-metal
