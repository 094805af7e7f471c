// STAND-IN for a tt-metal device smoke test (open a device, run one thing on it, close it), built as
// `sim_device_smoke` for the simulated lab: there is no Tenstorrent card here. It runs the same
// device open/close as the stand-in ttml_tests (sim_device.cpp: tt-metal's and tt-umd's real
// failures for what this process sees, UMD's card lock) and one device use, so a hung simulated
// board shows (blocks, or with TT_METAL_OPERATION_TIMEOUT_SECONDS, tt-metal's dispatch TIMEOUT).
// It computes nothing and checks no kernel.
#include <gtest/gtest.h>

#include "sim_device.hpp"

TEST(DeviceSmoke, OpenCloseDevice) {
    ttsim::device().open();
    ttsim::device().enqueue("tt::tt_metal::EnqueueProgram(...)");
    ttsim::device().close();
}
