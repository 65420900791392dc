// Pictures of a run, made from its records: an SVG per test (memory
// over time, anon and file stacked, the limit and memory.high as lines, the
// kernel's peak and an OOM kill marked) and one self-contained HTML page.
#pragma once

#include <string>

#include "runner/report/json.h"

namespace memrun {

/// An SVG plot of one test: MiB against seconds.
std::string svg_plot(const TestRecord& test);

/// A self-contained HTML report: the table, each test's plot, and for each
/// test that did not pass its reason, breakdown and log tail.
void html_report(const RunInfo& info, const EachRecord& records, const Sink& sink);

}  // namespace memrun
