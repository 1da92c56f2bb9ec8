// The folder through which a local launch's workers rendezvous (a c10d
// FileStore's file in it), and the removal of those a killed launcher left.
#pragma once

#include <sys/types.h>

#include <string>

namespace pplab {

// Makes a fresh folder `pplab-store-XXXXXX` in `temp`, readable by this user
// only, whose file `owner` holds this process's ProcessStamp; first removes
// the stale ones there (RemoveStaleStores). The caller removes the folder
// when its launch ends. Throws pplab::Error naming `temp` when it cannot.
std::string MakeStoreDir(const std::string& temp);

// Names process `pid` for as long as it lives, and never another process:
// "PID START PIDNS" with its start time in clock ticks after boot and its
// PID namespace, from /proc; "" when there is no such process (or /proc
// does not say). A reused PID has another start time.
std::string ProcessStamp(pid_t pid);

// Removes the folders MakeStoreDir made in `dir` whose launcher is gone: one
// killed by SIGKILL cannot remove its own. A folder is kept when its
// launcher still runs, when it is in another PID namespace (it cannot be
// told from here), when its owner file is not yet written whole, and when
// it is not this user's. Returns how many it removed.
int RemoveStaleStores(const std::string& dir);

}  // namespace pplab
