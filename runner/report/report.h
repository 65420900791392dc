// Stage 4: the report. The console lines as tests finish, and the JSON
// report (schema in docs/report.md, serialization in report/json.cc)
// written atomically at the end.
#pragma once

#include <cstdio>
#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

#include "runner/base/files.h"
#include "runner/report/json.h"
#include "runner/verdict/record.h"

namespace memrun {

/// What every output says of a test (the console, Markdown, HTML, JUnit,
/// workflow annotations): one source, so that no output says another thing
/// than the rest. Shown text: names and reasons escaped (escape_controls).
struct Said {
  const char* verdict;  ///< "PASS", "FAIL" or "SKIP"
  /// What happened, in the verdict's terms: "pass", "oom (expected)",
  /// "oom (expected pass)", "pass: below min_headroom", "pass: figures do
  /// not hold" (a failed test never reads as a bare "pass").
  std::string outcome;
  std::string reason;  ///< why it failed or was skipped, on one line; empty when it passed
  /// "23.4 MiB (37%)", with " excl. page cache" where the headroom is of the
  /// working set (the kernel's peak was page cache); "-" without figures.
  std::string headroom;
};
Said said_of(const TestRecord& r);

/// The group's memory at the highest sample, and how far that sample was
/// below the kernel's peak (what came between two samples): "memory at the
/// highest sample (52.1 MiB, 11.9 MiB below the kernel's peak: ...): anon ...";
/// or that no sample was taken.
std::string at_peak_text(const TestRecord& r);

/// Console output; colour only when enabled.
class Console {
 public:
  /// `color`: use ANSI colours (a TTY without NO_COLOR). `name_width`: the
  /// width of the name column, so that lines align.
  Console(std::FILE* out, bool color, size_t name_width);
  /// One aligned line per test; for a test that did not pass, the reason,
  /// the memory breakdown (for an OOM) and the tail of its log.
  void test(const TestRecord& r) const;
  /// One line for a spec's setup: skipped (up to date), or how it ran, and
  /// the reason and log tail when it failed.
  void setup(const SetupRecord& s) const;
  /// A test's explanation (verdict/explanation.h), under its name: the top 5 sites,
  /// one line each.
  void explanation(const TestRecord& r) const;
  /// The closing line: "N passed, N failed", the tests not run, and the
  /// signal that interrupted the run (its name; empty if none).
  void summary(const Tally& tally, size_t planned, const std::string& interrupted_by) const;
  /// No log tail under a failed test: its whole output follows
  /// (`memrun exec --output after`), and would show it twice.
  void omit_log_tails() { log_tails_ = false; }

 private:
  std::string paint(const char* code, const std::string& text) const;
  void details(const TestRecord& r) const;  // reason, OOM breakdown, log tail
  std::FILE* out_;
  bool color_;
  size_t width_;
  bool log_tails_ = true;
};

/// True when stdout is a TTY and NO_COLOR is unset.
bool want_color(std::FILE* out);

/// The JSON report, built as the run goes: each record is rendered as it
/// ends and spooled to an unlinked file in the run folder, so that memrun's
/// memory does not grow with the number of tests or the length of their
/// timelines. write() assembles the report in the plan's order.
class Report {
 public:
  /// `dir`: where the spool lives (the run folder).
  explicit Report(const std::string& dir);
  ~Report();
  Report(const Report&) = delete;
  Report& operator=(const Report&) = delete;
  void add_setup(const SetupRecord& s);
  /// The record of the plan's `index`-th test; tests never added (never
  /// started under --fail-fast) are absent from the report.
  void add_test(size_t index, const TestRecord& r);
  /// Replaces the record of a test added before (its explanation came).
  void replace_test(size_t index, const TestRecord& r);
  /// Hands the whole report, in pieces, to `sink`.
  void render(const RunInfo& info, const Sink& sink) const;
  /// Writes the whole report to `path` with write_atomically.
  void write(const std::string& path, const RunInfo& info) const;
  /// The records added, one at a time in the plan's order, read back from
  /// the spool: what the CI outputs are made from, so that they depend on
  /// no file a test could remove and memrun's memory stays flat.
  EachRecord records() const;
  /// How many records were found rewritten in the spool (see entry()).
  size_t lost() const { return lost_.size(); }

 private:
  struct Spooled {
    uint64_t offset = 0;
    uint32_t length = 0;  // 0: not added
    bool held = false;    // in held_, not in the spool
    uint64_t digest = 0;  // of the text, keyed by key_: checked when read back
    // For the tally (what Tally::add reads of its verdict), and a stand-in's
    // identity.
    Outcome outcome = Outcome::error;
    bool passed = false, disabled = false;
    std::string name, spec;
    int line = 0;
    uint64_t requested_limit = 0;
  };
  /// The text of an added test; a stand-in (outcome error) when the spool
  /// no longer holds what memrun wrote there.
  std::string entry(size_t index) const;
  /// Reads every entry back once: the tally with the stand-ins counted.
  Tally verified() const;
  mutable std::set<size_t> lost_;  // entries found rewritten
  int spool_ = -1;
  uint64_t key_ = 0;  // random, per run
  uint64_t spooled_ = 0;
  std::vector<Spooled> tests_;
  std::vector<size_t> added_;  // indices added, in the plan's order (sorted at render)
  std::map<size_t, std::string> held_;  // entries the spool could not take
  std::vector<std::string> setups_;
};

/// Whether a finished run passed: all `planned` tests ran, and none failed.
bool all_passed(const Tally& tally, size_t planned);

}  // namespace memrun
