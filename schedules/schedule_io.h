// Reading and writing schedules: pplab's JSON format and PyTorch
// pipelining's CSV. The JSON format is specified in docs/schedule-format.md.
#pragma once

#include <string>

#include "schedules/schedule.h"

namespace pplab {

constexpr int kScheduleFormatVersion = 1;

// Serialises a schedule as JSON (format "pplab.schedule", version 1).
std::string ScheduleToJson(const Schedule& schedule);
// Parses the JSON format. `origin` (a file name) prefixes every error, which
// names the field at fault. Checks the shape (CheckShape()) too.
Schedule ScheduleFromJson(const std::string& text, const std::string& origin);

// PyTorch pipelining CSV: one row per rank, comma-separated action strings
// such as 0F0 or 1SEND_F3, an empty cell for an idle step. K is the number of
// rows; S and M are one more than the largest stage and microbatch seen; the
// placement is where each stage's actions appear. `name` becomes the
// schedule's name.
Schedule ScheduleFromPytorchCsv(const std::string& text, const std::string& origin, const std::string& name);
std::string ScheduleToPytorchCsv(const Schedule& schedule);

// Loads a schedule from a .json or .csv file (by extension; other files are
// tried as JSON when they start with '{', else as CSV).
Schedule LoadScheduleFile(const std::string& path);

}  // namespace pplab
