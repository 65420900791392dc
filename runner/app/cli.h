// memrun's command line as CLI11 holds it: every flag and command, declared
// once, and the formatter that prints them in memrun's words (value names
// such as SIZE and DURATION, flags in groups, each command with the flags
// of memrun's it takes). main.cc parses with it; the tests read --help and
// the flags each command takes from the same object.
#pragma once

#include <CLI/CLI.hpp>
#include <set>
#include <string>
#include <vector>

#include "runner/app/commands.h"

namespace memrun {

/// The parsed command line: memrun's flags, which command was given, and
/// the arguments of each.
struct Cli {
  Options o;
  CLI::App *doctor = nullptr, *gc = nullptr, *list = nullptr, *merge = nullptr, *bisect = nullptr, *repro = nullptr,
           *compare = nullptr, *exec = nullptr, *explain = nullptr, *serve = nullptr;
  std::vector<std::string> list_specs, merge_inputs, bisect_words;
  std::string merge_output, bisect_test, bisect_range, bisect_tolerance;
  int bisect_trials = 1;
  std::string repro_report, repro_name, repro_spec;
  std::string explain_report, explain_name, explain_spec;
  std::string compare_base, compare_head;
  Comparing comparing;  ///< of `memrun compare`
  ExecOptions exec_options;
};

/// Declares memrun's flags and commands on `app` (bound to `c`) and sets
/// memrun's help formatter.
void declare_command_line(CLI::App& app, Cli& c);

/// How each command is written, one line each ("memrun exec --memory SIZE
/// [FLAGS] [--] COMMAND [ARGS...]"): --help's usage and the man page's
/// synopsis (a test holds them equal).
std::vector<std::string> synopsis();

/// What memrun says when `command` (memrun itself or a command, as parsed)
/// lacks an argument it needs, as bare `memrun` says it: "no SPEC given.
/// Usage: memrun [FLAGS] SPEC... (see memrun --help)"; "" when none.
/// `unfilled`: arguments CLI11 never fills, given empty (exec's "command",
/// which scan_command_line() takes off the line).
std::string missing_arguments(const CLI::App& command, const std::set<std::string>& unfilled = {});

/// What memrun says of words `command` (as parsed) has no place for, in
/// the same form: CLI11's ExtrasError reworded; "" when none.
std::string extra_arguments(const CLI::App& command);

/// What memrun says of a flag that takes no value given one on `args`
/// ("--fail-fast=maybe"), in the same form: CLI11's ConversionError
/// reworded; "" when no such flag is on the line.
std::string flag_given_a_value(const CLI::App& app, const std::vector<std::string>& args);

/// CLI11's parse error `e` on `args`, in memrun's words: a missing
/// argument, a word too many, a flag given a value; "" for any other.
std::string reworded(const CLI::App& app, const CLI::ParseError& e, const std::vector<std::string>& args);

}  // namespace memrun
