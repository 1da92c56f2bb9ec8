// pplab plan's --cost files: checked against the flags and against each
// other, and fitted together into the search's costs (docs/planning.md,
// "Costs fitted to a profile" and "Several profiles"). No LibTorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/cost_model.h"
#include "tools/plan_search.h"

namespace pplab::cli {

// The flags a profile must agree with (each unset: whatever it holds).
struct PlanProfileFlags {
  std::vector<std::string> cost_files;  // --cost, in the order given
  std::string model;                    // --model as given
  std::optional<int> seq_len;
  std::optional<std::string> precision;
  std::optional<std::string> attention;
  std::optional<int> tp;
  std::string sequence_parallel = "auto";  // on, off or auto
};

// The --cost profiles, checked against the flags and against each other,
// fitted together (FitProfiles) into `search`; `profiled` keeps them for
// the candidates that are their own configurations. Returns how the costs
// were had, for the summary line.
std::string FitCostFiles(const PlanProfileFlags& o, PlanSearchOptions& search, std::vector<CostModel>& profiled,
                         std::string& train_device);

}  // namespace pplab::cli
