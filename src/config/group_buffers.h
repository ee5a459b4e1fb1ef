// Per-group communication buffer sizes: port of MindSpeed's mindspeed/core/hccl_buffer
// (hccl_adaptive_func.py). MindSpeed creates each process group with its own HCCL buffer instead of
// the global HCCL_BUFFSIZE (200 MB): set by hand with --hccl-group-buffer "dp:200;tp:300" (MB per
// group key, ';' or ',' separated), or derived from the model with --hccl-group-buffer-adaptive
// as the largest message each group moves (--hccl-ep-group-buffer-adaptive-factor scales the
// expert groups' share by the expected load imbalance; <= 0 keeps their 200 MB). Sizes are in MB
// (2^20 bytes), MindSpeed's 2 * ceil(x / 2^20) for x elements of the formula.
//
// This engine applies a size to the process group of that key (ProcessGroup::set_buffer_bytes):
// an MPI collective larger than the buffer runs as several calls of at most its size
// (parallel/mpi_process_group.cpp), as HCCL moves a collective through the communicator's buffer
// in pieces. Keys that MindSpeed allows but that name no group of this engine are reported.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/configs.h"
#include "core/status.h"

namespace mindspeed {

/// MindSpeed's allowed group keys (its _parse_key_value_string list).
const std::vector<std::string>& group_buffer_keys();

/// --hccl-group-buffer: "key:MB" pairs separated by ';' (or ',' when the text holds one, as
/// MindSpeed); unknown keys, malformed pairs and sizes <= 0 are refused by name.
StatusOr<std::map<std::string, int64_t>> parse_group_buffers(const std::string& text);

/// --hccl-group-buffer-adaptive: MindSpeed's formula table, per key, in MB.
std::map<std::string, int64_t> adaptive_group_buffers(const ModelConfig& m, const ParallelConfig& p,
                                                      int64_t micro_batch_size);

/// The sizes a run applies: the adaptive table (with --hccl-group-buffer-adaptive), then the
/// --hccl-group-buffer entries over it; empty when neither flag is given.
StatusOr<std::map<std::string, int64_t>> group_buffers(const Configs& c);

}  // namespace mindspeed
