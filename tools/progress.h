// The training progress line of rank 0: step, loss, lr, tokens/s, measured
// bubble, model FLOPs utilisation per rank (where a peak is known),
// validation loss and time left. On a terminal one line is redrawn
// in place; otherwise a line is printed every `every` steps and at each
// validation.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

namespace pplab::cli {

struct ProgressLine {
  int done = 0;  // steps done, counting from 0 of the whole run
  double loss = 0, lr = 0, tokens_per_s = 0, bubble = 0;
  double val_loss = -1;  // -1: no validation at this step
  double seconds_left = 0;
  // MFU of each pipeline rank in this step (0.25 = 25 %); empty when the
  // device's peak is not known (nothing is printed then).
  std::vector<double> mfu;
};

// "MFU 41.2%" for one rank, "MFU 41.2% 38.0%" for up to 4, "MFU 40.1% mean
// of 8" beyond; "" for none.
std::string MfuText(const std::vector<double>& mfu);

class Progress {
 public:
  // `first` is the step the run starts at (after a resume), `total` the
  // last. `out` null: prints nothing.
  Progress(int first, int total, FILE* out, bool terminal);
  void Update(const ProgressLine& line);
  void Finish();  // ends the in-place line

 private:
  int first_, total_, every_;
  FILE* out_;
  bool terminal_;
  bool open_line_ = false;
};

}  // namespace pplab::cli
