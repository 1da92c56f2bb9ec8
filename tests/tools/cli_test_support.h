// What the CLI tests share (cli_test.cpp, plan_cli_test.cpp,
// plan_cli_profiles_test.cpp): the paths of the test data and of the scratch
// folder, and a cost file as `pplab profile` writes it for the tiny model, for
// commands run as a user would.
#pragma once

#include <string>

#include "schedules/file_io.h"

namespace pplab {

inline std::string Data(const std::string& name) { return std::string(PPLAB_TEST_DATA_DIR) + "/" + name; }

inline std::string TempPath(const std::string& name) { return std::string(PPLAB_TEST_TMP_DIR) + "/" + name; }

// A cost file as `pplab profile` writes it for the tiny model on 2 stages.
inline std::string WriteProfiledCost(const std::string& name) {
  const std::string path = TempPath(name);
  WriteTextFile(path, R"({"format": "pplab.cost", "version": 1,
    "stages": [{"forward_ms": 1.0, "backward_ms": 2.0, "activation_bytes": 4096, "message_bytes": 8192},
               {"forward_ms": 1.5, "backward_ms": 3.0, "activation_bytes": 8192, "message_bytes": 8192}],
    "link": {"latency_ms": 0.01, "bandwidth_gbps": 1},
    "meta": {"source": "pplab profile", "model": "tiny",
             "config": {"vocab_size": 256, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 4,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
                        "rope_theta": 10000.0, "rms_norm_eps": 1e-05},
             "partition": "2,2", "microbatch_size": 2, "seq_len": 32, "device": "cpu",
             "threads_per_rank": 1, "ranks": 2}})");
  return path;
}

}  // namespace pplab
