// ddl-train under mpiexec: before any rank trains, all agree that every
// rank's start-up went well (its command line parsed, its data read) and
// that they train the same thing (every option that must match, and the data
// sets' sizes and checksums). A failure or a difference on one rank becomes
// the same error on every rank at once, quoting that rank's own message,
// instead of a stall timeout. (Without MPI there is never a job of several
// ranks, so nothing calls it.)
#pragma once

#include <string>
#include <vector>

#include <ddl/parallel/communication/communicator.hpp>

namespace ddl::apps {

// Throws AgreedError on every rank when any rank's `problem` is not empty,
// quoting each failing rank's message; exit code 2 when any of them was a
// usage error (`usage`), 1 otherwise.
void agree_start_up(const parallel::Communicator& world, const std::string& problem, bool usage);

// Throws AgreedError (exit 2) on every rank when the ranks' `settings`
// ("--lr 0.1", "training data: ...") differ, naming the first that does and
// each rank's value of it.
void agree_settings(const parallel::Communicator& world, const std::vector<std::string>& settings);

}  // namespace ddl::apps
