// Stand-in for tt-train/tests/ops/layernorm_bw_fused_op_test.cpp: reproduces the seed's console
// and XML shapes (SetUp env fault; allclose failures; device hang) without a card.
#include <gtest/gtest.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

namespace xt { inline bool allclose(double a, double b, float, float) { return a == b; } }

static const char* mode() { const char* m = std::getenv("FAKE_MODE"); return m ? m : "ok"; }
static void log(const char* level, const char* cat, const char* msg, const char* where) {
    std::printf("2025-12-17 10:15:%02d.%03d | %-8s | %15s | %s (%s)\n", 3, 141, level, cat, msg, where);
    std::fflush(stdout);
}

class LayerNormBackwardOpTest : public ::testing::Test {
protected:
    void SetUp() override {
        log("info", "UMD", "Opening local chip ids/PCIe ids: {}/[] and remote chip ids {}", "cluster.cpp:173");
        if (std::strcmp(mode(), "nodev") == 0) {
            log("critical", "Always", "TT_FATAL: No chips detected in the cluster", "assert.hpp:104");
            throw std::runtime_error(
                "TT_FATAL @ /work/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0\ninfo:\nNo chips detected in the cluster\n"
                "backtrace:\n --- tt::Cluster::get_cluster_type_from_cluster_desc(...)\n --- ttml::autograd::AutoContext::open_device()\n");
        }
        log("warning", "UMD", "---- ttSiliconDevice::init_hugepage: bind_area_to_memory_nodeset() failed (physical_device_id: 0 ch: 0). Hugepage allocation is not on NumaNode matching TT Device. Side-Effect is decreased Device->Host perf (Issue #893).", "silicon_sysmem_manager.cpp:281");
        log("warning", "UMD", "Insufficient NumHugepages: 0 should be at least NumMMIODevices: 1 for device_id: 0x401e revision: 1. NumHostMemChannels would be 0, bumping to 1.", "hugepage.cpp:112");
        log("info", "Device", "Opening user mode device driver", "tt_cluster.cpp:197");
    }
    void TearDown() override { log("info", "Metal", "Closing device 0", "device.cpp:1420"); }
};

static void check(double metal_dx_flat, double dx_ref) {
#line 183 "/work/tt-train/tests/ops/layernorm_bw_fused_op_test.cpp"
    EXPECT_TRUE(xt::allclose(metal_dx_flat, dx_ref, 1.0e-3F, 5e-1F));
}

TEST_F(LayerNormBackwardOpTest, MetalLayerNormBw_OneTile) { check(1.0, 1.0); }
TEST_F(LayerNormBackwardOpTest, MetalLayerNormBw_TwoIncompleteTiles) { check(1.0, 1.0); }
TEST_F(LayerNormBackwardOpTest, NIGHTLY_MetalLayerNormBw_LargeFeatures_NoL1Fit) {
    if (std::strcmp(mode(), "hang") == 0) {
        log("info", "Metal", "Enqueueing program for LayerNormBackwardDeviceOperation", "command_queue.cpp:455");
        std::thread([] { throw std::runtime_error("Read 0xffffffff from PCIE: you should reset the board."); }).join();
    }
    check(1.0, 1.0);
}
TEST_F(LayerNormBackwardOpTest, MetalLayerNormBw_DoesNotFitInL1_WtNotDivisibleBy4) { check(1.0, 1.0); }
TEST_F(LayerNormBackwardOpTest, MetalLayerNormBw_OneTilePerRow) { check(1.0, 1.0); }
TEST_F(LayerNormBackwardOpTest, BugRepro_Deterministic_256Tiles) {
    std::printf("dx FAILED: max_diff=1000, mean_diff=1004.21\n");
    check(8192.0, 64.0);
}
TEST_F(LayerNormBackwardOpTest, BugRepro_Deterministic_128Tiles) {
    std::printf("dx FAILED: max_diff=995, mean_diff=998.02\n");
    check(4096.0, 64.0);
}
