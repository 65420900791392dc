// The live view on a terminal: while tests run, a status line (done/total,
// elapsed, ETA, memory promised against the budget) and a line per running
// test with a bar of its memory against its limit, redrawn in place below
// the lines of the tests that finished. Only on a TTY: CI logs get one
// plain line per finished test from Console, and no control characters.
#pragma once

#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runner/run/run.h"

namespace memrun {

class LiveView {
 public:
  /// `total`: tests in the run; `jobs`: how many run at once; `timings`: a
  /// previous report's durations (for the ETA), may be empty.
  LiveView(std::FILE* out, size_t total, int jobs, std::optional<uint64_t> budget,
           std::map<std::string, double> timings);
  /// Erases the view, whatever ended the run (an error included).
  ~LiveView() { clear(); }
  LiveView(const LiveView&) = delete;
  LiveView& operator=(const LiveView&) = delete;
  /// Redraws the view with the tests running now.
  void update(const std::vector<Progress>& running);
  /// Erases the view, leaving the cursor where it began: call before
  /// printing anything else, and at the end.
  void clear();
  /// Counts a finished test, for done/total and the ETA.
  void finished(const TestRecord& r);

  /// The view's text for `running` at `width` columns, one string per line
  /// (no control characters); the seam for tests.
  std::vector<std::string> render(const std::vector<Progress>& running, size_t width) const;

 private:
  std::FILE* out_;
  size_t total_;
  int jobs_;
  std::optional<uint64_t> budget_;
  std::map<std::string, double> timings_;
  size_t done_ = 0, drawn_ = 0;
  double done_seconds_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// A text bar `width` cells wide, filled by `fraction` (0..1): "#####.....".
std::string bar(double fraction, size_t width);

}  // namespace memrun
