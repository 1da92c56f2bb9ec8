// Whole-file reads and writes with errors that name the file.
#pragma once

#include <fstream>
#include <functional>
#include <istream>
#include <string>
#include <vector>

namespace pplab {

// The largest input file pplab reads (schedules, cost models, configs,
// traces, corpus files): 1 GiB.
constexpr long long kMaxInputBytes = 1LL << 30;

// Reads a whole file (at most 1 GiB), without a leading UTF-8 byte-order
// mark. Only regular files: a FIFO or device (which could block or never
// end) is refused. Throws pplab::Error "cannot read PATH: reason".
std::string ReadTextFile(const std::string& path);

// Opens a file for reading with the checks of ReadTextFile (a regular file
// of at most 1 GiB), positioned after a UTF-8 byte-order mark, so a parser
// can stream it instead of holding its text.
std::ifstream OpenInputFile(const std::string& path);

// Skips spaces, tabs and line breaks; returns the next character without
// consuming it, or EOF (from <cstdio>) at the end.
int SkipSpace(std::istream& in);

// Throws pplab::Error naming PATH unless WriteTextFile(path, ...) can write
// there: not a directory, and its folder exists and takes a new file. For a
// command that would otherwise fail only after its work.
void CheckWritable(const std::string& path);

// Whether `a` and `b` name the same regular file: the same file where one
// exists (links followed), else the same name in the same folder. A device
// or FIFO (/dev/stdout) is never the same as anything, as it is written
// through in place. For a command's output flags, so that one output never
// replaces another or an input.
bool SameFile(const std::string& a, const std::string& b);

// `path` made absolute with its links followed: realpath(3) where it
// exists, else its folder's and its name; "" when neither resolves.
std::string ResolvedPath(const std::string& path);

// The name of the entry of `folder` that `path` is, or lies in below it,
// with links followed on both sides; "" when `path` is not inside `folder`
// (or is it). A path that does not exist yet is placed by its folder. For a
// command that must not write (or remove) what another flag names.
std::string EntryWithin(const std::string& folder, const std::string& path);

// Writes a whole file from what `write` puts in the stream. A regular (or
// new) file is written through a temporary beside it and a rename, so a
// reader never sees half a file (nor a file at all when `write` throws); a
// device, FIFO or symlink (e.g. /dev/stdout) is written through in place.
// Throws pplab::Error naming PATH.
void WriteFile(const std::string& path, const std::function<void(std::ostream&)>& write);

// WriteFile of `contents`.
void WriteTextFile(const std::string& path, const std::string& contents);

// Whether `s` ends with `suffix` (a file name's extension, say).
bool EndsWith(const std::string& s, const std::string& suffix);

// Directory listing and removal through POSIX calls, for every process that
// may load LibTorch. The pip torch's libtorch_cpu.so exports its own copy of
// libstdc++'s std::filesystem (pytorch/pytorch#133437); a pplab binary then
// binds the directory iterators and remove_all of std::filesystem to that copy, and
// on LibTorch 2.11 they crash (checkpoint pruning, resume, and the launcher's
// clean-up segfaulted there). Path arithmetic, exists and is_directory ran
// without trouble in the same runs.

// The names in `dir` (not "." or ".."), sorted. Throws pplab::Error naming
// the directory when it cannot be read.
std::vector<std::string> ListDirectory(const std::string& dir);

// Removes `path` and, if it is a directory, everything below it; symbolic
// links are removed, never followed. A missing path is no error. Returns ""
// or the first failure ("PATH: reason"); removal goes on past failures.
std::string RemoveTree(const std::string& path);

}  // namespace pplab
