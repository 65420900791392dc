// Pictures of a run, made from its JSON report: an SVG per test (memory
// over time, anon and file stacked, the limit and memory.high as lines, the
// kernel's peak and an OOM kill marked) and one self-contained HTML page.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace memrun {

/// An SVG plot of one test of a report: MiB against seconds.
std::string svg_plot(const nlohmann::ordered_json& test);

/// A self-contained HTML report: the table, each test's plot, and for each
/// test that did not pass its reason, breakdown and log tail.
std::string html_report(const nlohmann::ordered_json& report);

}  // namespace memrun
