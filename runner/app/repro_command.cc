// memrun repro: the shell line that reruns one test of a report alone, the
// same way: the same memrun, from the same folder, with the variables the
// specs' ${...} read, the same limit, backend and sealing.
#include <fmt/format.h>

#include <re2/re2.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "runner/app/commands.h"
#include "runner/base/error.h"
#include "runner/base/shell.h"
#include "runner/base/units.h"
#include "runner/base/utf8.h"
#include "runner/report/merge.h"

namespace memrun {
namespace {

// The words of a command as `memrun exec` shows it (app/exec_command.cc): words
// of plain characters, or quoted as shell_quote() quotes, one space apart.
// Anything else is refused: a report's text never reaches a shell as it is.
std::optional<std::vector<std::string>> exec_words(const std::string& command) {
  static const std::string plain =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=/.,:@%";
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (c == ' ') {
      if (!in_word) return std::nullopt;
      words.push_back(word), word.clear(), in_word = false;
    } else if (c == '\'') {
      size_t close = command.find('\'', i + 1);
      if (close == std::string::npos) return std::nullopt;
      word += command.substr(i + 1, close - i - 1), in_word = true;
      i = close;
    } else if (c == '\\' && i + 1 < command.size() && command[i + 1] == '\'') {
      word += '\'', in_word = true;
      ++i;
    } else if (plain.find(c) != std::string::npos) {
      word += c, in_word = true;
    } else {
      return std::nullopt;
    }
  }
  if (!in_word) return std::nullopt;
  words.push_back(word);
  return words;
}

// `memrun exec`'s --expect for a report's `expected` ("exit 3" -> "3").
std::string expect_flag(const std::string& expected) {
  return expected.rfind("exit ", 0) == 0 ? expected.substr(5) : expected.empty() ? "pass" : expected;
}


// `word` quoted for a POSIX shell and shown on a terminal: a character
// that shows as another or as nothing (a name's U+202E, utf8.h), or a
// control character, is written as a `printf` of its bytes in octal, so
// the line reads as what it runs and still runs it.
std::string shell_shown(const std::string& word) {
  std::string out, plain;
  auto flush = [&] {
    if (!plain.empty()) out += shell_quote(plain), plain.clear();
  };
  for (size_t i = 0; i < word.size();) {
    unsigned char c = static_cast<unsigned char>(word[i]);
    size_t len = utf8_length(word, i);
    // (A newline stays quoted: $(...) would drop it at the end.)
    bool hidden = len == 0 || (c < 0x20 && c != '\n') || c == 0x7f || (len > 1 && shows_as_other(code_point(word, i, len)));
    if (!hidden) {
      plain.append(word, i, len);
      i += len;
      continue;
    }
    flush();
    out += "\"$(printf '";
    for (size_t k = 0; k < std::max<size_t>(len, 1); ++k)
      out += fmt::format("\\{:03o}", static_cast<unsigned char>(word[i + k]));
    out += "')\"";
    i += std::max<size_t>(len, 1);
  }
  flush();
  return out.empty() ? "''" : out;
}

// How to rerun one test of a report: from which folder, with which
// variables set and unset, and the argv.
struct Rerun {
  std::string cwd;
  std::vector<std::pair<std::string, std::optional<std::string>>> env;
  std::vector<std::string> argv;
};

// Where a rerun is confined: explain's flags where given, else where the
// report's run was where that still exists (its cgroups' parent, its run
// folder's), never below memrun's own cgroup.
std::vector<std::string> confinement_flags(const RunInfo& info, const Options& confine) {
  namespace fs = std::filesystem;
  auto parent_of = [](const std::string& path) { return fs::path(path).parent_path().string(); };
  std::error_code ec;
  std::string cgroups = confine.cgroup_parent;
  if (cgroups.empty() && info.backend != "systemd" && !info.cgroup_path.empty() &&
      fs::is_directory(parent_of(info.cgroup_path), ec))
    cgroups = parent_of(info.cgroup_path);
  std::string runs = confine.run_dir != Options{}.run_dir ? confine.run_dir : "";
  if (runs.empty() && !info.run_dir.empty() && fs::is_directory(fs::path(info.cwd) / parent_of(info.run_dir), ec))
    runs = parent_of(info.run_dir);
  std::vector<std::string> flags;
  if (!cgroups.empty()) flags.insert(flags.end(), {"--cgroup-parent", cgroups});
  if (!runs.empty()) flags.insert(flags.end(), {"--run-dir", runs});
  return flags;
}

// `confine`: explain's confinement flags; the rerun is made where they
// say, else where the report's run was where that still exists (its
// cgroups' parent, its run folder's), never below memrun's own cgroup.
Rerun rerun_of(const std::string& report_path, const std::string& name, const std::string& spec,
               const Options* confine = nullptr) {
  ReportData report = read_report(report_path);
  std::vector<const TestIdentity*> found;
  for (const auto& t : report.tests)
    if (t.test.name == name && (spec.empty() || t.test.spec == spec)) found.push_back(&t.test);
  if (found.empty())
    throw Error(Category::usage, report_path + " has no test named '" + name + "'" + (spec.empty() ? "" : " in " + spec));
  if (found.size() > 1) {
    std::string specs;
    for (const auto* t : found) specs += "\n  " + t->spec;
    throw Error(Category::usage, "'" + name + "' names a test in several specs of " + report_path + ":" + specs +
                                     "\nsay which with --spec SPEC");
  }
  const auto& t = *found[0];
  const RunInfo& info = report.info;
  Rerun r;
  r.cwd = info.cwd;
  // The specs read these of memrun's environment (a `python:` built from
  // ${POLARS_VERSION}): set, or unset, as they were.
  for (const auto& [k, v] : info.spec_environment) {
    if (!v) r.env.push_back({k, std::nullopt});
    else if (!t.env.count(k)) r.env.push_back({k, *v});
  }
  for (const auto& [k, v] : t.env) r.env.push_back({k, v});
  // The memrun that made the report (an older report does not say: the
  // one on PATH).
  r.argv.push_back(info.memrun_path.empty() ? "memrun" : info.memrun_path);
  std::vector<std::string> flags = {"--backend", info.backend.empty() ? "auto" : info.backend};
  if (info.host_cgroups) flags.push_back("--host-cgroups");
  if (confine) {
    auto more = confinement_flags(info, *confine);
    flags.insert(flags.end(), more.begin(), more.end());
  }
  if (t.spec == "memrun exec") {
    // A report of `memrun exec`: no spec file, the command itself.
    auto words = exec_words(t.command);
    if (!words)
      throw Error(Category::bad_input, report_path + ": test '" + name + "' was run by memrun exec, but its command '" +
                                           t.command + "' is not one memrun exec writes; rerun it by hand");
    for (const std::string& w : {std::string("exec"), std::string("--memory"), format_size_exact(t.requested_limit),
                                 std::string("--name"), name, std::string("--expect"), expect_flag(t.expected)})
      r.argv.push_back(w);
    if (t.timeout_s > 0)
      r.argv.insert(r.argv.end(),
                    {"--timeout", format_duration_exact(std::chrono::milliseconds(std::llround(t.timeout_s * 1e3)))});
    r.argv.insert(r.argv.end(), flags.begin(), flags.end());
    r.argv.push_back("--");
    r.argv.insert(r.argv.end(), words->begin(), words->end());
  } else {
    r.argv.insert(r.argv.end(), {t.spec, "--filter", "^" + RE2::QuoteMeta(name) + "$", "--set",
                                 name + ".memory=" + format_size_exact(t.requested_limit)});
    r.argv.insert(r.argv.end(), flags.begin(), flags.end());
  }
  return r;
}

}  // namespace

Result repro_command(const std::string& report_path, const std::string& name, const std::string& spec) {
  // Every word is quoted for the shell, and the filter matches the name
  // literally and whole: the line reruns exactly this test, whatever its
  // name, paths or environment hold.
  Rerun r = rerun_of(report_path, name, spec);
  // Words of plain characters stay bare, so that the line reads as typed.
  auto word = [](const std::string& w) {
    bool plain = !w.empty() && w.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                    "0123456789_./:=@%+-") == std::string::npos;
    return plain ? w : shell_shown(w);
  };
  std::string env;
  for (const auto& [k, v] : r.env) env += v ? shell_shown(k + "=" + *v) + " " : "-u " + shell_shown(k) + " ";
  std::string command;
  // The memrun that made the report is always quoted: a path, copied whole.
  for (const auto& w : r.argv) command += command.empty() ? shell_shown(w) : " " + word(w);
  fmt::print("cd {} && {}{}{}\n", shell_shown(r.cwd), env.empty() ? "" : "env ", env, command);
  return Result::passed();
}

Result explain_command(const std::string& report_path, const std::string& name, const std::string& spec,
                       const Options& o) {
  // The repro line's run, with the test explained whatever its verdict:
  // exec'd, so that its exit code and outputs are the run's.
  Rerun r = rerun_of(report_path, name, spec, &o);
  // Before `exec`'s own words (its options fall through to memrun's).
  r.argv.insert(r.argv.begin() + 1, "--explain=always");
  // A report is data, perhaps from someone else's CI: this memrun runs it
  // (never the program a report names), and variables that would load code
  // into memrun itself are refused, not set.
  for (const auto& [k, v] : r.env)
    if (v && k.rfind("LD_", 0) == 0)
      throw Error(Category::bad_input, "the report's test sets " + k + ", which would load code into memrun itself: "
                                       "run `memrun repro` to see its command and run that yourself if you trust it");
  std::fprintf(stderr, "memrun explain: running in %s:", r.cwd.c_str());
  for (const auto& a : r.argv) std::fprintf(stderr, " %s", shell_quote(a).c_str());
  std::fprintf(stderr, "\n");
  r.argv[0] = "/proc/self/exe";
  if (::chdir(r.cwd.c_str()) != 0)
    throw Error(Category::bad_input, "cannot enter " + r.cwd + ", the folder the report's run was made in: " +
                                         std::strerror(errno));
  for (const auto& [k, v] : r.env) {
    if (v) ::setenv(k.c_str(), v->c_str(), 1);
    else ::unsetenv(k.c_str());
  }
  std::vector<char*> args;
  for (auto& a : r.argv) args.push_back(a.data());
  args.push_back(nullptr);
  ::execv(args[0], args.data());
  throw Error(Category::system, std::string("cannot run memrun again: ") + std::strerror(errno));
}

}  // namespace memrun
