// The flags of `pplab train` (docs/cli.md, "pplab train"): each bound to its
// field of TrainOptions, with its check and its help.
#pragma once

namespace CLI {
class App;
}

namespace pplab::cli {

struct TrainOptions;

// Adds every train flag to `sub`, a flag given twice taking its last value.
// `o` must outlive `sub`'s parse.
void AddTrainFlags(CLI::App& sub, TrainOptions& o);

}  // namespace pplab::cli
