// Turning simulation results into JSON and tables for the CLI.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "schedules/schedule.h"
#include "sim/cost_model.h"
#include "sim/simulator.h"

namespace pplab::cli {

// The `pplab simulate --json` object: schedule, ranks, stages, microbatches,
// makespan, bubble_fraction, span_bubble_fraction, analytic_bubble_fraction
// (null without a closed form), per_rank[...], p2p and critical-path
// figures; times in ms.
nlohmann::json SimulationJson(const Schedule& schedule, const CostModel& costs, const SimResult& result);

// A few aligned lines for people: the same figures as SimulationJson.
std::string SimulationText(const nlohmann::json& summary);

// Formats a double with `digits` decimals, locale-independent.
std::string Fixed(double x, int digits);

}  // namespace pplab::cli
