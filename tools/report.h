// Turning simulation results into JSON and tables for the CLI.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "schedules/schedule.h"
#include "sim/cost_model.h"
#include "sim/simulator.h"
#include "traces/timeline.h"

namespace pplab::cli {

// The `pplab simulate --json` object: schedule, ranks, stages, microbatches,
// makespan, bubble_fraction, span_bubble_fraction, analytic_bubble_fraction
// (null without a closed form), per_rank[...], p2p and critical-path
// figures; times in ms.
// {activations, weight_grads, messages, casts, params, workspace}: what a
// peak is made of (simulate's per_rank[].peak_parts, plan's peak_memory_parts).
nlohmann::json MemoryPartsJson(const MemoryParts& parts);

nlohmann::json SimulationJson(const Schedule& schedule, const CostModel& costs, const SimResult& result);

// A few aligned lines for people: the same figures as SimulationJson.
std::string SimulationText(const nlohmann::json& summary);

// Formats a double with `digits` decimals, locale-independent.
std::string Fixed(double x, int digits);
// `b` in binary units for people: "512 B", "1.50 KiB", "2.00 GiB".
std::string HumanBytes(Bytes b);

// One simulated plan as a CSV row, the same columns in `compare --csv` and
// `sweep` and the same names as SimulationJson: schedule, ranks, virtual
// (S/K, 0 when uneven), stages, microbatches, makespan_ms, bubble_fraction
// (makespan convention), span_bubble_fraction (span convention),
// analytic_bubble_fraction (empty without a closed form),
// analytic_convention, peak_inflight, peak_activation_bytes, p2p_messages,
// p2p_bytes. The header line ends in a newline, and so does each row.
std::string SimulationCsvHeader();
std::string SimulationCsvRow(const nlohmann::json& summary);

// Prints `rows` (the first one the header) as columns aligned for people,
// two spaces apart: the first `left_columns` left-aligned (names), the others
// right-aligned (numbers).
void PrintTable(const std::vector<std::vector<std::string>>& rows, size_t left_columns = 1);

// How the ranks of each shared device used it (SharedDeviceUse): as
// `shared_devices` in stats and explain --json ({device, ranks, slots, busy,
// over_slots, compute}, ms), and as one line each for people, the busy time
// also as a share of `makespan`.
nlohmann::json SharedDevicesJson(const std::vector<DeviceUse>& shared);
std::string SharedDevicesText(const std::vector<DeviceUse>& shared, TimeNs makespan);

}  // namespace pplab::cli
