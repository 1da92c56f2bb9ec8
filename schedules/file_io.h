// Whole-file reads and writes with errors that name the file.
#pragma once

#include <string>

namespace pplab {

// Reads a whole file (at most 1 GiB), without a leading UTF-8 byte-order
// mark. Throws pplab::Error "cannot read PATH: reason".
std::string ReadTextFile(const std::string& path);

// Writes a whole file. A regular (or new) file is written through a
// temporary beside it and a rename, so a reader never sees half a file; a
// device, FIFO or symlink (e.g. /dev/stdout) is written through in place.
// Throws pplab::Error naming PATH.
void WriteTextFile(const std::string& path, const std::string& contents);

}  // namespace pplab
