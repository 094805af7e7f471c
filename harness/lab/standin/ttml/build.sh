#!/bin/sh
# build.sh OUTDIR: builds the simulated lab's STAND-INS for tt-train's ttml_tests and a tt-metal
# device smoke test (there is no Tenstorrent card here; see the comments at the top of each source):
#   OUTDIR/ttml_tests        LayerNormBackwardOpTest with the seed's accumulation bug
#   OUTDIR/ttml_tests_fixed  the same with the bug fixed (-DTT_SIM_LAYERNORM_FIXED)
#   OUTDIR/sim_device_smoke  DeviceSmoke.OpenCloseDevice
# Static binaries (g++, googletest from Debian's libgtest-dev), so they run in any Linux image.
set -eu

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
out=$1
src=$(cd "$(dirname "$0")" && pwd)
CXX=${CXX:-g++}
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM

flags="-std=c++17 -O2 -Wall -Wextra -pthread"

# googletest: Debian's prebuilt archives, else its sources (/usr/src/googletest).
multiarch=$($CXX -print-multiarch 2>/dev/null || true)
gtest_lib=
for dir in "/usr/lib/$multiarch" /usr/lib /usr/local/lib; do
    if [ -f "$dir/libgtest.a" ] && [ -f "$dir/libgtest_main.a" ]; then
        gtest_lib=$dir
        break
    fi
done
if [ -n "$gtest_lib" ]; then
    gtest="$gtest_lib/libgtest_main.a $gtest_lib/libgtest.a"
    gtest_inc=
elif [ -f /usr/src/googletest/googletest/src/gtest-all.cc ]; then
    g=/usr/src/googletest/googletest
    $CXX $flags -I"$g/include" -I"$g" -c "$g/src/gtest-all.cc" -o "$work/gtest-all.o"
    $CXX $flags -I"$g/include" -I"$g" -c "$g/src/gtest_main.cc" -o "$work/gtest_main.o"
    gtest="$work/gtest_main.o $work/gtest-all.o"
    gtest_inc="-I$g/include"
else
    echo "$0: googletest not found (apt-get install -y libgtest-dev)" >&2
    exit 1
fi

# shellcheck disable=SC2086 # flags and library lists are word lists
$CXX $flags $gtest_inc -c "$src/sim_device.cpp" -o "$work/sim_device.o"
# shellcheck disable=SC2086
$CXX $flags $gtest_inc -c "$src/layernorm_bw_test.cpp" -o "$work/layernorm_bw_test.o"
# shellcheck disable=SC2086
$CXX $flags $gtest_inc -DTT_SIM_LAYERNORM_FIXED -c "$src/layernorm_bw_test.cpp" -o "$work/layernorm_bw_test_fixed.o"
# shellcheck disable=SC2086
$CXX $flags $gtest_inc -c "$src/device_smoke_test.cpp" -o "$work/device_smoke_test.o"

# shellcheck disable=SC2086
$CXX -static -pthread -o "$out/ttml_tests" "$work/layernorm_bw_test.o" "$work/sim_device.o" $gtest
# shellcheck disable=SC2086
$CXX -static -pthread -o "$out/ttml_tests_fixed" "$work/layernorm_bw_test_fixed.o" "$work/sim_device.o" $gtest
# shellcheck disable=SC2086
$CXX -static -pthread -o "$out/sim_device_smoke" "$work/device_smoke_test.o" "$work/sim_device.o" $gtest
