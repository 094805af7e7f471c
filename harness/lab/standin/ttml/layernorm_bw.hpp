// STAND-IN for tt-train's LayerNorm backward op (ttml_tests, LayerNormBackwardOpTest), for the
// simulated lab: there is no Tenstorrent card here, so the op is computed on the CPU.
//
// What it reproduces:
//   * a float64 reference (what tt-train's test computes with xtensor, in double here);
//   * an emulation of the device kernel tt-train/sources/ttml/metal/ops/layernorm_bw/device/
//     kernels/compute/layernorm_bw_kernel.cpp: data in 32x32 tiles, zero padding of partial tiles
//     (as ttnn's tilize pads), the width mask of the last tile (DO_MASK_W), the per-row
//     reductions done tile by tile into "DST registers" and then reduced by a matmul with a 1/N
//     scaler tile, and the choice between the EVERYTHING_FITS_IN_L1 path and the block path;
//   * the accumulation bug of compute_dy_gamma_sum() in the block path, exactly as the seed
//     (shared/seeds/layernorm-bw-accumulation-bug.md) shows the code: every tile's
//     mul_tiles_bcast_rows(..., sum_register) OVERWRITES the sum, and only the masked last tile
//     is added with add_binary_tile, so "only the last 2 tiles contribute" when the feature count
//     is not a multiple of 32, and only the last tile when it is. Compiled with
//     -DTT_SIM_LAYERNORM_FIXED, the block path accumulates instead (the seed's "Option 1").
//
// What it does not reproduce: timing, multi-core work split, circular-buffer flow control, the
// device's data formats by default (see kDeviceBf16 below), and anything else of the real card.
// The EVERYTHING_FITS_IN_L1 path accumulates correctly here, as the seed assumes ("Likely
// correct"); NOTE that the public copy of the kernel shows the same overwrite pattern in that
// path too, so on a real card small-but-multi-tile rows may be affected as well.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ttsim::layernorm_bw {

constexpr uint32_t kTileH = 32;
constexpr uint32_t kTileW = 32;

// eps of tt-train's test reference: layernorm_forward_reference(..., 1e-6f) in
// tt-train/tests/ops/layernorm_bw_fused_op_test.cpp. The device gets mean and rstd = 1/s from that
// reference, so this is also the eps the "device" sees. (With 1e-5, rstd of a constant row would be
// 316 instead of 1000 and the seed's max_diff ~1000 could not come out.)
constexpr double kEps = 1e-6;

// Tiles per block in the block path (the kernel's block_size compile-time arg). The bug does not
// depend on it: the overwrite happens per tile.
constexpr uint32_t kBlockSize = 4;

// Bytes of one tile, as the program factory's fits_in_l1_check() counts them.
constexpr uint64_t kBf16TileBytes = kTileH * kTileW * 2;
constexpr uint64_t kFp32TileBytes = kTileH * kTileW * 4;

// L1 budget of the stand-in. The program factory takes the EVERYTHING_FITS_IN_L1 path when
// 7 rows of Wt bf16 tiles (gamma, x_hat, input, dL_dout, dx, dgamma and dbeta components) plus 6
// single bf16 tiles and 2 fp32 tiles fit in the core's free L1. The seed says the block path
// starts at "approximately >1024 features (depends on other buffer sizes)", so this budget is
// chosen to make rows of up to 32 tiles (1024 features) fit and rows of 33 tiles or more not:
// 32 tiles need 479,232 bytes, 33 tiles 493,568. It is NOT a Wormhole's L1 size (1464 KiB per
// core, most of it free), by which the formula would put the threshold near 90 tiles.
constexpr uint64_t kSimL1BudgetBytes = 480 * 1024;

inline uint64_t l1_bytes_required(uint32_t Wt) {
    const uint64_t row = uint64_t(Wt) * kBf16TileBytes;
    return 7 * row + 6 * kBf16TileBytes + 2 * kFp32TileBytes;
}

inline bool everything_fits_in_l1(uint32_t Wt) { return l1_bytes_required(Wt) <= kSimL1BudgetBytes; }

enum class Variant { Buggy, Fixed };

#ifdef TT_SIM_LAYERNORM_FIXED
constexpr Variant kCompiledVariant = Variant::Fixed;
#else
constexpr Variant kCompiledVariant = Variant::Buggy;
#endif

// Device-side number format. Default (what build.sh builds): the "device" computes in float32
// and keeps every value in float32, and the 1/N scaler is exact float32. Simple, and a fixed
// kernel then matches the float64 reference to ~1e-5, so only the accumulation bug shows.
// With -DTT_SIM_BF16 (not built by build.sh; a measurement aid), values that the real op keeps in
// bfloat16 circular buffers are rounded to bfloat16 (round to nearest even): the inputs as
// uploaded, x_hat, the 1/N scaler (the program factory packs it with pack_two_bfloat16_to_uint32),
// dx, the dgamma/dbeta components and the reduced dgamma/dbeta; the two row sums stay float32
// (their circular buffers are Float32). With it, even the fixed kernel misses atol 0.01 where the
// 1/N scaler is inexact in bfloat16 (8462 features) -- see the table in layernorm_bw_test.cpp.
#ifdef TT_SIM_BF16
constexpr bool kDeviceBf16 = true;
#else
constexpr bool kDeviceBf16 = false;
#endif

inline float to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    if ((bits & 0x7f800000u) == 0x7f800000u) {  // inf or NaN: keep (quiet a NaN)
        if (bits & 0x007fffffu) bits |= 0x00400000u;
        bits &= 0xffff0000u;
    } else {
        bits += 0x7fffu + ((bits >> 16) & 1u);  // round to nearest even
        bits &= 0xffff0000u;
    }
    float out;
    std::memcpy(&out, &bits, sizeof out);
    return out;
}

inline float dev(float v) { return kDeviceBf16 ? to_bf16(v) : v; }

// ------------------------------------------------------------------------------------------------
// float64 reference (tt-train's layernorm_forward_reference + layernorm_backward_reference)

struct Reference {
    std::vector<double> dx;      // rows * features
    std::vector<double> dgamma;  // features
    std::vector<double> dbeta;   // features
    std::vector<float> mean;     // rows: what the test uploads as the mean tensor
    std::vector<float> rstd;     // rows: 1/s, what the test uploads as the rstd tensor
};

inline Reference reference(const std::vector<float>& x, const std::vector<float>& dy, const std::vector<float>& gamma,
                           uint32_t rows, uint32_t features, double eps = kEps) {
    Reference ref;
    ref.dx.resize(size_t(rows) * features);
    ref.dgamma.assign(features, 0.0);
    ref.dbeta.assign(features, 0.0);
    ref.mean.resize(rows);
    ref.rstd.resize(rows);
    std::vector<double> x_hat(features), dxhat(features);
    for (uint32_t r = 0; r < rows; ++r) {
        const float* xr = &x[size_t(r) * features];
        const float* dyr = &dy[size_t(r) * features];
        double mu = 0.0;
        for (uint32_t j = 0; j < features; ++j) mu += xr[j];
        mu /= features;
        double var = 0.0;
        for (uint32_t j = 0; j < features; ++j) var += (xr[j] - mu) * (xr[j] - mu);
        var /= features;
        const double s = std::sqrt(var + eps);
        double mean_dxhat = 0.0, mean_dxhat_xhat = 0.0;
        for (uint32_t j = 0; j < features; ++j) {
            x_hat[j] = (xr[j] - mu) / s;
            dxhat[j] = double(dyr[j]) * gamma[j];
            mean_dxhat += dxhat[j];
            mean_dxhat_xhat += dxhat[j] * x_hat[j];
            ref.dgamma[j] += double(dyr[j]) * x_hat[j];
            ref.dbeta[j] += dyr[j];
        }
        mean_dxhat /= features;
        mean_dxhat_xhat /= features;
        double* dxr = &ref.dx[size_t(r) * features];
        for (uint32_t j = 0; j < features; ++j) dxr[j] = (dxhat[j] - mean_dxhat - x_hat[j] * mean_dxhat_xhat) / s;
        ref.mean[r] = float(mu);
        ref.rstd[r] = 1.0f / float(s);
    }
    return ref;
}

// ------------------------------------------------------------------------------------------------
// Tile-level emulation of layernorm_bw_kernel.cpp

struct Tile {
    float v[kTileH][kTileW];
};

// The handful of compute-kernel API calls the kernel uses, on "DST registers" (Tiles).
namespace llk {
// mul_tiles_bcast_rows: a * b, where row 0 of b is broadcast over all rows (gamma is [1, C]).
inline void mul_tiles_bcast_rows(const Tile& a, const Tile& b, Tile& dst) {
    for (uint32_t r = 0; r < kTileH; ++r)
        for (uint32_t c = 0; c < kTileW; ++c) dst.v[r][c] = a.v[r][c] * b.v[0][c];
}
inline void mul_binary_tile(const Tile& a, const Tile& b, Tile& dst) {
    for (uint32_t r = 0; r < kTileH; ++r)
        for (uint32_t c = 0; c < kTileW; ++c) dst.v[r][c] = a.v[r][c] * b.v[r][c];
}
inline void add_binary_tile(const Tile& a, const Tile& b, Tile& dst) {
    for (uint32_t r = 0; r < kTileH; ++r)
        for (uint32_t c = 0; c < kTileW; ++c) dst.v[r][c] = a.v[r][c] + b.v[r][c];
}
inline void copy_tile(const Tile& src, Tile& dst) { dst = src; }
// mask_tile: zero where the mask tile is 0 (the columns past the logical width).
inline void mask_tile(Tile& dst, const Tile& mask) {
    for (uint32_t r = 0; r < kTileH; ++r)
        for (uint32_t c = 0; c < kTileW; ++c)
            if (mask.v[r][c] == 0.0f) dst.v[r][c] = 0.0f;
}
// matmul_tiles with a scaler tile whose every element is 1/N: each row's sum times 1/N, the same
// value in every column (the result is "broadcast across rows", as the kernel's comments say).
inline void matmul_by_scaler(const Tile& a, float scaler, Tile& dst) {
    for (uint32_t r = 0; r < kTileH; ++r) {
        float acc = 0.0f;
        for (uint32_t k = 0; k < kTileW; ++k) acc += a.v[r][k] * scaler;
        for (uint32_t c = 0; c < kTileW; ++c) dst.v[r][c] = acc;
    }
}
}  // namespace llk

struct DeviceOutputs {
    std::vector<float> dx;      // rows * features
    std::vector<float> dgamma;  // features
    std::vector<float> dbeta;   // features
    uint32_t Wt = 0;
    bool block_path = false;  // false: EVERYTHING_FITS_IN_L1
};

namespace detail {

// One row of tiles (32 rows of the tensor), tilized with zero padding.
struct TileRow {
    std::vector<Tile> x, dy, x_hat;
    Tile mean_bcast{}, rstd_bcast{};
};

// compute_dy_gamma_sum(): sum over the row's tiles of dy * gamma (bcast rows), masked last tile.
// Returns the DST tile before the 1/N matmul.
inline Tile dy_gamma_sum(const TileRow& tr, const std::vector<Tile>& gamma, const Tile& mask, bool do_mask_w,
                         uint32_t Wt, bool fits_in_l1, Variant variant) {
    Tile dst[3];
    Tile& sum_register = dst[0];
    Tile& working_register = dst[1];
    std::memset(dst, 0, sizeof dst);
    if (!fits_in_l1 && variant == Variant::Buggy) {
        // The block path as the seed shows it: each iteration OVERWRITES sum_register; only the
        // masked last tile goes through working_register and add_binary_tile.
        for (uint32_t col = 0; col < Wt; col += kBlockSize) {
            const uint32_t current_block_size = std::min(kBlockSize, Wt - col);
            for (uint32_t block_idx = 0; block_idx < current_block_size; ++block_idx) {
                const uint32_t global_col = col + block_idx;
                if (do_mask_w && global_col + 1 == Wt) {
                    Tile& target_register = (global_col == 0) ? sum_register : working_register;
                    llk::mul_tiles_bcast_rows(tr.dy[global_col], gamma[global_col], target_register);
                    llk::mask_tile(target_register, mask);
                    if (global_col > 0) llk::add_binary_tile(sum_register, target_register, sum_register);
                } else {
                    llk::mul_tiles_bcast_rows(tr.dy[global_col], gamma[global_col], sum_register);  // OVERWRITES!
                }
            }
        }
        return sum_register;
    }
    // EVERYTHING_FITS_IN_L1 (taken to be correct, as the seed does), and the fixed block path
    // (the seed's Option 1): every tile into working_register, then copy (first) or add.
    for (uint32_t col = 0; col < Wt; ++col) {
        llk::mul_tiles_bcast_rows(tr.dy[col], gamma[col], working_register);
        if (do_mask_w && col + 1 == Wt) llk::mask_tile(working_register, mask);
        if (col == 0)
            llk::copy_tile(working_register, sum_register);
        else
            llk::add_binary_tile(sum_register, working_register, sum_register);
    }
    return sum_register;
}

// compute_dy_gamma_xnorm_sum(): sum of dy * gamma * x_hat; accumulates correctly in both paths.
inline Tile dy_gamma_xnorm_sum(const TileRow& tr, const std::vector<Tile>& gamma, const Tile& mask, bool do_mask_w,
                               uint32_t Wt) {
    Tile dst[3];
    Tile& sum_register = dst[0];
    Tile& working_register = dst[1];
    Tile& x_norm_register = dst[2];
    std::memset(dst, 0, sizeof dst);
    for (uint32_t col = 0; col < Wt; ++col) {
        Tile& target_register = (col == 0) ? sum_register : working_register;
        llk::copy_tile(tr.x_hat[col], x_norm_register);
        llk::mul_tiles_bcast_rows(tr.dy[col], gamma[col], target_register);
        llk::mul_binary_tile(target_register, x_norm_register, target_register);
        if (do_mask_w && col + 1 == Wt) llk::mask_tile(target_register, mask);
        if (col > 0) llk::add_binary_tile(sum_register, working_register, sum_register);
    }
    return sum_register;
}

}  // namespace detail

// The op: dx, dgamma, dbeta from x, gamma, mean, rstd, dy (all row-major, rows x features).
inline DeviceOutputs run_device(const std::vector<float>& x_in, const std::vector<float>& dy_in,
                                const std::vector<float>& gamma_in, const std::vector<float>& mean_in,
                                const std::vector<float>& rstd_in, uint32_t rows, uint32_t features,
                                Variant variant = kCompiledVariant) {
    const uint32_t Wt = (features + kTileW - 1) / kTileW;
    const uint32_t Ht = (rows + kTileH - 1) / kTileH;
    const uint32_t mask_w = features % kTileW;
    const bool do_mask_w = mask_w != 0;
    const bool fits_in_l1 = everything_fits_in_l1(Wt);
    // pack_two_bfloat16_to_uint32(1.F / num_inner) on the real device; see kDeviceBf16.
    const float scaler = dev(1.0f / float(features));

    DeviceOutputs out;
    out.Wt = Wt;
    out.block_path = !fits_in_l1;
    out.dx.assign(size_t(rows) * features, 0.0f);
    std::vector<float> dgamma_acc(features, 0.0f), dbeta_acc(features, 0.0f);

    // gamma [1, 1, 1, C]: row 0 of each tile, zero padded.
    std::vector<Tile> gamma(Wt);
    for (uint32_t t = 0; t < Wt; ++t) {
        std::memset(&gamma[t], 0, sizeof(Tile));
        for (uint32_t c = 0; c < kTileW; ++c) {
            const uint32_t j = t * kTileW + c;
            if (j < features) gamma[t].v[0][c] = dev(gamma_in[j]);
        }
    }
    Tile mask{};
    for (uint32_t r = 0; r < kTileH; ++r)
        for (uint32_t c = 0; c < kTileW; ++c) mask.v[r][c] = (!do_mask_w || c < mask_w) ? 1.0f : 0.0f;

    detail::TileRow tr;
    tr.x.resize(Wt);
    tr.dy.resize(Wt);
    tr.x_hat.resize(Wt);
    for (uint32_t ht = 0; ht < Ht; ++ht) {
        const uint32_t r0 = ht * kTileH;
        // Reader: tilize the row of tiles (zero padding past the logical rows and columns).
        for (uint32_t t = 0; t < Wt; ++t) {
            for (uint32_t r = 0; r < kTileH; ++r) {
                const uint32_t i = r0 + r;
                for (uint32_t c = 0; c < kTileW; ++c) {
                    const uint32_t j = t * kTileW + c;
                    const bool in = i < rows && j < features;
                    tr.x[t].v[r][c] = in ? dev(x_in[size_t(i) * features + j]) : 0.0f;
                    tr.dy[t].v[r][c] = in ? dev(dy_in[size_t(i) * features + j]) : 0.0f;
                }
            }
        }
        // unary_bcast<COL> of the mean and rstd tiles: one value per row, across all columns.
        for (uint32_t r = 0; r < kTileH; ++r) {
            const uint32_t i = r0 + r;
            const float m = i < rows ? dev(mean_in[i]) : 0.0f;
            const float s = i < rows ? dev(rstd_in[i]) : 0.0f;
            for (uint32_t c = 0; c < kTileW; ++c) {
                tr.mean_bcast.v[r][c] = m;
                tr.rstd_bcast.v[r][c] = s;
            }
        }
        // compute_x_hat_preprocessing(): x_hat = (input - mean) * rstd, packed to a bf16 CB.
        for (uint32_t t = 0; t < Wt; ++t)
            for (uint32_t r = 0; r < kTileH; ++r)
                for (uint32_t c = 0; c < kTileW; ++c)
                    tr.x_hat[t].v[r][c] = dev((tr.x[t].v[r][c] - tr.mean_bcast.v[r][c]) * tr.rstd_bcast.v[r][c]);

        Tile scaled_dy_gamma_sum, scaled_dy_gamma_xnorm_sum;
        llk::matmul_by_scaler(detail::dy_gamma_sum(tr, gamma, mask, do_mask_w, Wt, fits_in_l1, variant), scaler,
                              scaled_dy_gamma_sum);
        llk::matmul_by_scaler(detail::dy_gamma_xnorm_sum(tr, gamma, mask, do_mask_w, Wt), scaler,
                              scaled_dy_gamma_xnorm_sum);

        // compute_dx(), compute_dgamma_components(), compute_dbeta_components(), then the writer
        // (untilize: only the logical rows and columns come back).
        for (uint32_t t = 0; t < Wt; ++t) {
            for (uint32_t r = 0; r < kTileH; ++r) {
                const uint32_t i = r0 + r;
                if (i >= rows) break;
                for (uint32_t c = 0; c < kTileW; ++c) {
                    const uint32_t j = t * kTileW + c;
                    if (j >= features) break;
                    const float dy_gamma = tr.dy[t].v[r][c] * gamma[t].v[0][c];
                    const float centered = dy_gamma - scaled_dy_gamma_sum.v[r][c];
                    const float dx = (centered - tr.x_hat[t].v[r][c] * scaled_dy_gamma_xnorm_sum.v[r][c]) *
                                     tr.rstd_bcast.v[r][c];
                    out.dx[size_t(i) * features + j] = dev(dx);
                    dgamma_acc[j] += dev(tr.dy[t].v[r][c] * tr.x_hat[t].v[r][c]);
                    dbeta_acc[j] += dev(tr.dy[t].v[r][c]);
                }
            }
        }
    }
    // The op sums the dgamma/dbeta components over all rows.
    out.dgamma.resize(features);
    out.dbeta.resize(features);
    for (uint32_t j = 0; j < features; ++j) {
        out.dgamma[j] = dev(dgamma_acc[j]);
        out.dbeta[j] = dev(dbeta_acc[j]);
    }
    return out;
}

}  // namespace ttsim::layernorm_bw
