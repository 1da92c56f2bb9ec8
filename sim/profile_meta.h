// The `meta` of a cost file that `pplab profile` wrote: what its measured
// costs are valid for, read with a check of every field and written back.
#pragma once

#include <optional>
#include <string>

#include "sim/precision.h"

namespace pplab {

// The `meta` of a cost file written by `pplab profile` (meta.source ==
// "pplab profile"): what the measured stage costs are valid for. The model
// config stays JSON text so that sim/ needs nothing from models/.
struct ProfileMeta {
  std::string model;        // preset name or config path, as given to the profiler
  std::string config_json;  // the LlamaConfig as LlamaConfig::ToJson writes it (compact dump)
  std::string partition;    // layers per stage, e.g. "2,2"; one entry per stage of the file
  int microbatch_size = 0;  // sequences per microbatch
  int seq_len = 0;          // tokens per sequence
  std::string device;       // e.g. "cpu"
  int threads_per_rank = 0;
  int ranks = 0;
  // The precision the stages ran in (`precision`, optional: files written
  // before it was recorded are fp32). Its activation bytes per element are
  // what the planner's byte formulas use for this profile.
  Precision precision = Precision::kFp32;
  // The attention the stages ran (`attention`, optional): "sdpa" or
  // "explicit", as `pplab train --attention` resolved it. Files written
  // before it was recorded ran the explicit path.
  std::string attention = "explicit";
  // The tensor-parallel ranks T each pipeline rank's stages ran over
  // (`tensor_parallel`, optional: 1 before it was recorded), and whether
  // the positions outside the split regions were split over them too
  // (`sequence_parallel`). With T > 1 every stage's times hold the group's
  // collectives, and its bytes are one rank's.
  int tensor_parallel = 1;
  bool sequence_parallel = false;
  // How ranks that shared a device past its slots were timed
  // (`shared_device`, optional): "none" (no device was shared, or a file
  // from before it was recorded), "turns" (each alone: a device's own
  // costs) or "together" (at once: each time holds the others' time slices
  // of the device, as a run on it does; plan refuses such a file).
  std::string shared_device = "none";
  // Whether the stages ran as CUDA graphs (`cuda_graphs`, optional: false
  // before it was recorded; `pplab profile --cuda-graphs`): their F and B
  // are graph replays, each stage has graph_slot_bytes, and I and W were
  // not timed.
  bool cuda_graphs = false;
};

constexpr const char* kProfileSource = "pplab profile";

// Parses `meta_json` as a profile meta when its `source` is kProfileSource
// (std::nullopt for any other meta, which stays free-form). Throws
// pplab::Error naming `origin` and the field when a field is missing, of the
// wrong type, unknown, or (partition) disagrees with `num_stages`.
std::optional<ProfileMeta> ParseProfileMeta(const std::string& meta_json, int num_stages, const std::string& origin);
// The meta object of `profile` as the profiler writes it (JSON text).
std::string ProfileMetaToJson(const ProfileMeta& profile);

}  // namespace pplab
