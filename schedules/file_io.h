// Whole-file reads and writes with errors that name the file.
#pragma once

#include <string>

namespace pplab {

// Reads a whole file. Throws pplab::Error "cannot read PATH: reason".
std::string ReadTextFile(const std::string& path);

// Writes a whole file through a temporary beside it and a rename, so a
// reader never sees half a file. Throws pplab::Error naming PATH.
void WriteTextFile(const std::string& path, const std::string& contents);

}  // namespace pplab
