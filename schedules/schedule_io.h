// Reading and writing schedules: pplab's JSON format and PyTorch
// pipelining's CSV. The JSON format is specified in docs/schedule-format.md.
#pragma once

#include <cstdint>
#include <string>

#include "schedules/schedule.h"

namespace pplab {

constexpr int kScheduleFormatVersion = 1;

// The most actions a schedule file may hold (every kind counted): about
// 630 bytes each while read and validated, so a file at the limit takes
// some 10 GiB; one past it is refused as it is read, before the memory is.
constexpr int64_t kMaxFileActions = int64_t{1} << 24;

// Serialises a schedule as JSON (format "pplab.schedule", version 1).
// `planned`, when not empty, is a JSON object written as the optional field
// "planned": the train flags `pplab plan` costed the schedule with, which
// `train --plan` takes where they are not given (docs/schedule-format.md).
// The schedule readers accept the field and leave it to train.
std::string ScheduleToJson(const Schedule& schedule, const std::string& planned = "");
// Parses the JSON format. `origin` (a file name) prefixes every error, which
// names the field at fault. Checks the shape (CheckShape()) too.
Schedule ScheduleFromJson(const std::string& text, const std::string& origin);

// PyTorch pipelining CSV (what torch.distributed.pipelining's _dump_csv
// writes and _load_csv reads): one row per rank, comma-separated action
// strings such as 0F0, 1SEND_F3, 2REDUCE_GRAD, 0UNSHARD or
// (0F7;7B3)OVERLAP_F_B, an empty cell for an idle step. K is the number of
// rows; S and M are one more than the largest stage and microbatch seen; the
// placement is where each stage's F/B/I/W run (composites, messages and
// per-stage actions must agree with it). `name` becomes the schedule's name.
// Errors name origin:row: column N.
Schedule ScheduleFromPytorchCsv(const std::string& text, const std::string& origin, const std::string& name);
// Every action of every program: PyTorch's "compute_comms" form
// (_load_csv(path, format="compute_comms") runs it as written). Throws
// pplab::Error for a schedule of several pipelines (dualpipe), which the CSV
// cannot express.
std::string ScheduleToPytorchCsv(const Schedule& schedule);
// The compute actions (F, B, I, W, OVERLAP_F_B) and REDUCE_GRAD: PyTorch's
// "compute_only" form, the default of _load_csv (its own GPipe and 1F1B
// files hold REDUCE_GRAD), which adds the communication and UNSHARD/RESHARD
// itself when it loads it.
std::string ScheduleToPytorchComputeCsv(const Schedule& schedule);

// Loads a schedule from a .json or .csv file (by extension; other files are
// tried as JSON when they start with '{', else as CSV).
Schedule LoadScheduleFile(const std::string& path);

}  // namespace pplab
