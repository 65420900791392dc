// The helpers of an explanation, and what explain's rooms share (helpers.h).
#include "runner/explain/helpers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runner/base/units.h"

extern char** environ;

namespace memrun::explain {

Plan plan_of_one(PlannedTest test, const std::string& run_dir) {
  test.run = test.runs = 1;
  test.first = 0;
  test.waits.reset();
  Plan plan;
  plan.run_dir = run_dir;
  plan.tests.push_back(std::move(test));
  return plan;
}

namespace fs = std::filesystem;

// At most `cap` bytes of the file at `path` ("" when there is none); sets
// *more when the file holds more.
std::string read_at_most(const std::string& path, uint64_t cap, bool* more) {
  // In pieces: memrun's own memory grows with what was written, never by
  // the cap.
  std::ifstream in(path, std::ios::binary);
  std::string text;
  char piece[65536];
  while (in && text.size() <= cap) {
    in.read(piece, sizeof piece);
    text.append(piece, static_cast<size_t>(in.gcount()));
  }
  *more = text.size() > cap;
  if (*more) text.resize(cap);
  return text;
}

std::vector<std::string> helper_env(const TestSpec& t) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (!t.env.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
  }
  for (const auto& [k, v] : t.env) env.push_back(k + "=" + v);
  return env;
}

// A command line as the explanation keeps it: a pytest case's is memrun's
// whole plugin (python -c), which says nothing.
std::string shortened(const std::string& command) {
  constexpr size_t kMax = 240;
  if (command.size() <= kMax) return command;
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(command[cut]) & 0xc0) == 0x80) --cut;  // whole UTF-8 characters
  return command.substr(0, cut) + "...";
}

// The frame a site is shown by: the first in the test's own code. With
// Python frames, a Python one (the interpreter's C frames are no test's
// code); else the first native frame of the program's own module.
size_t where_of(const std::vector<StackFrame>& stack, const std::vector<bool>& library_module) {
  bool python = std::any_of(stack.begin(), stack.end(), [](const StackFrame& f) { return !f.native; });
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].native && !library_file(stack[i].file)) return i;
  for (size_t i = 0; i < stack.size(); ++i)
    if (!stack[i].native) return i;
  if (python) return 0;
  for (size_t i = 0; i < stack.size(); ++i)
    if (stack[i].line > 0 && !library_file(stack[i].file) && (i >= library_module.size() || !library_module[i]))
      return i;
  return 0;
}

bool python_file(const std::string& file) {
  return file.size() > 3 && file.compare(file.size() - 3, 3, ".py") == 0;
}

// Long: one run's steps (plan, loop, what ended it, its output) in order, each short.
Ran Helpers::run(const std::string& what, const std::vector<std::string>& argv, uint64_t limit, std::chrono::seconds bound) {
  Ran ran;
  TestSpec spec;
  spec.name = planned_.test->name + " (explain's " + what + ")";
  spec.argv = argv;
  for (size_t i = 0; i < argv.size(); ++i) spec.command += (i ? " " : "") + argv[i];
  spec.command = shortened(spec.command);
  spec.memory = limit;
  spec.timeout = bound;
  spec.env = planned_.test->env;
  spec.cwd = dir_;
  spec.pids = kDefaultPids;
  PlannedTest p = planned_;
  p.test = &spec;
  ++count_;
  p.named(fmt::format("explain-{}-{}{}", planned_.group(), what, count_), fmt::format("{}/{}{}.out", dir_, what, count_),
          fmt::format("{}/{}{}.err", dir_, what, count_));
  Plan plan = plan_of_one(p, run_dir_);
  Catch caught;
  RunResults results = run_plan(plan, backend_, options_, caught);
  ran.interrupted_by = results.interrupted_by;
  std::string name = fs::path(argv[0]).filename().string();
  bool more_out = false, more_err = false;
  ran.out = read_at_most(p.stdout_path(), kHelperOutput, &more_out);
  ran.err = read_at_most(p.stderr_path(), 2000, &more_err);
  if (!caught.record) {
    ran.failure = fmt::format("{} did not run", name);
    return ran;
  }
  const TestRecord& r = *caught.record;
  const Observation& o = r.observed;
  switch (r.verdict.outcome) {
    case Outcome::pass:
      ran.exited = true;
      ran.ok = !more_out;
      if (more_out) ran.failure = fmt::format("{} wrote more than {}, which is no profile's reading", name,
                                              format_size(kHelperOutput));
      return ran;
    case Outcome::oom:
    case Outcome::thrash:
      ran.failure = fmt::format("{} was {} at its memory limit of {} (the capture is too large to read within it; "
                                "its files are in {})",
                                name, r.verdict.outcome == Outcome::oom ? "OOM-killed" : "ended thrashing",
                                format_size(limit), dir_);
      return ran;
    case Outcome::timeout:
      ran.failure = fmt::format("{} took longer than {} s and was stopped", name, bound.count());
      return ran;
    case Outcome::interrupted:
      ran.failure = fmt::format("{} was stopped: memrun was interrupted", name);
      return ran;
    case Outcome::error:
      ran.failure = fmt::format("{} could not start: {}", name, o.start_error);
      return ran;
    default:
      ran.exited = o.signal == 0;
      ran.failure = o.signal ? fmt::format("{} was killed by {}", name, strsignal(o.signal))
                             : fmt::format("{} exited with {}", name, o.exit_code);
      if (!ran.err.empty()) ran.failure += ": " + ran.err;
      return ran;
  }
}

}  // namespace memrun::explain
