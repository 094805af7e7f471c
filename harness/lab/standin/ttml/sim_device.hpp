// STAND-IN for tt-metal's device open (ttml::autograd::ctx().open_device() -> tt::Cluster -> tt-umd),
// for the simulated lab: there is no Tenstorrent card here. It looks at what this process REALLY
// sees (/dev/tenstorrent, /sys/module/tenstorrent/version, /sys/class/tenstorrent, /proc/mounts,
// the 1G hugepage count, /dev/shm, its own capabilities) in the order tt-umd meets them, and fails
// or warns with tt-metal's and tt-umd's own messages (verbatim from shared/reference/ttmetal.md §4,
// checked against tenstorrent/tt-umd 3ed9cb6d) in tt-logger's line format.
//
// It does not open the device node, map BARs, talk to firmware or allocate hugepages: a node made
// with mknod is enough, and the hugepage check stops at the mount (UMD's own regex on /proc/mounts)
// and the nr_hugepages count. The board's hang state is the simulated host's file
// /sys/class/tenstorrent/tenstorrent!<N>/tt_sim_state (ok | hang-armed | hung).
#pragma once

#include <string>

namespace ttsim {

// tt-logger's line: "YYYY-MM-DD HH:MM:SS.mmm | level | Category | message (file:line)", now.
void log_line(const char* level, const char* category, const std::string& message, const char* where);

// A line of the stand-in itself (not a tt-metal or tt-umd message), marked as such.
void standin_note(const std::string& message);

class SimDevice {
public:
    // SetUp(): opens the device the way tt-metal/UMD do; throws std::runtime_error with the real
    // message (gtest: 'C++ exception with description "..." thrown in SetUp().').
    void open();
    // TearDown(): closes the device, releasing the card lock. Safe to call when not open.
    void close();
    // A device use (an op enqueue): a hung board blocks here, and with
    // TT_METAL_OPERATION_TIMEOUT_SECONDS set, throws tt-metal's dispatch TIMEOUT after that long.
    // `op` names the enqueuing call for the exception's backtrace.
    void enqueue(const char* op = nullptr);

    bool is_open() const { return open_; }

private:
    void acquire_chip_lock();
    void release_chip_lock();

    bool open_ = false;
    int device_num_ = -1;
    int lock_fd_ = -1;
    bool sysfs_visible_ = false;
};

// The process-wide device context (as ttml::autograd::ctx()).
SimDevice& device();

}  // namespace ttsim
