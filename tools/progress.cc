#include "tools/progress.h"

#include <algorithm>
#include <string>

namespace pplab::cli {
namespace {

std::string Duration(double seconds) {
  const long s = static_cast<long>(seconds + 0.5);
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, s / 60 % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  }
  return buf;
}

}  // namespace

std::string MfuText(const std::vector<double>& mfu) {
  if (mfu.empty()) return "";
  char buf[32];
  std::string text = "MFU";
  if (mfu.size() <= 4) {
    for (double m : mfu) {
      std::snprintf(buf, sizeof buf, " %.1f%%", 100 * m);
      text += buf;
    }
    return text;
  }
  double sum = 0;
  for (double m : mfu) sum += m;
  std::snprintf(buf, sizeof buf, " %.1f%% mean of %zu", 100 * sum / mfu.size(), mfu.size());
  return text + buf;
}

Progress::Progress(int first, int total, FILE* out, bool terminal)
    : first_(first), total_(total), every_(std::max(1, (total - first) / 20)), out_(out), terminal_(terminal) {}

void Progress::Update(const ProgressLine& p) {
  if (out_ == nullptr) return;
  const bool val = p.val_loss >= 0;
  if (!terminal_ && !val && p.done != total_ && (p.done - first_) % every_ != 0) return;
  constexpr int kWidth = 20;
  const int filled = total_ > 0 ? kWidth * p.done / total_ : kWidth;
  const std::string bar = std::string(filled, '#') + std::string(kWidth - filled, '.');
  char val_text[32] = "";
  if (val) std::snprintf(val_text, sizeof val_text, "  val %.4f", p.val_loss);
  const std::string mfu = p.mfu.empty() ? "" : "  " + MfuText(p.mfu);
  std::fprintf(out_, "%sstep %d/%d [%s] loss %.4f%s  lr %.2e  %.0f tok/s  bubble %.1f%%%s  %s left%s",
               terminal_ ? "\r\033[K" : "", p.done, total_, bar.c_str(), p.loss, val_text, p.lr, p.tokens_per_s,
               100 * p.bubble, mfu.c_str(), Duration(p.seconds_left).c_str(), terminal_ && !val ? "" : "\n");
  open_line_ = terminal_ && !val;
  std::fflush(out_);
}

void Progress::Finish() {
  if (out_ != nullptr && open_line_) std::fprintf(out_, "\n");
  open_line_ = false;
}

}  // namespace pplab::cli
