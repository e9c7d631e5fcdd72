// What a timeline file (core/timeline.hpp, parallel/communication/timeline_gather.hpp)
// must be, checked from the file alone: the tests of the timeline and the
// check_trace tool that the command-line tests run on ddl-train's output.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ddl::test {

// Every way `trace` falls short, one line each; empty when it passes:
//  - a Chrome trace-event document: an object whose "traceEvents" is an
//    array of complete ("X"), instant ("i") and metadata ("M") events with
//    the fields of their kind, times >= 0;
//  - every span closed: complete events only, each with a duration >= 0;
//  - spans nested per thread: two spans of one row are disjoint, or one
//    holds the other;
//  - every rank 0 .. ranks-1 present with a name and spans, every thread row
//    named;
//  - allreduce spans ("allreduce", with "step" and "bucket" args) of the
//    same step and bucket on every rank, overlapping in time across the
//    ranks to within the clock uncertainty the file states (an allreduce
//    cannot end on one rank before it began on another).
std::vector<std::string> trace_problems(const nlohmann::json& trace, int ranks);

// The names of the spans of rank `rank`, each once.
std::vector<std::string> span_names(const nlohmann::json& trace, int rank);

}  // namespace ddl::test
