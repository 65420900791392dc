// memrun's command line, read once before CLI11 parses it: what CLI11
// alone gets wrong for memrun. A flag it does not know would otherwise
// surface as a later word's error ("Path does not exist: out.json"), and
// `exec`'s command would lose its own flags to memrun (`exec sort
// --version` printed memrun's version).
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace memrun {

/// The command line split in two.
struct ScannedLine {
  std::vector<std::string> args;     ///< for CLI11 (without the program's name)
  std::vector<std::string> command;  ///< `exec`'s command: from its first word that is not one of its flags
};

/// Reads `args` against `root`'s flags and subcommands. The first word of
/// `command_taker` (a subcommand of root) that is neither one of its flags
/// nor a flag's value starts the command, and every word from there on is
/// the command's ("--" before it is optional). Throws Error(usage) for
/// a flag no command in reach knows, or a first word that is neither a
/// subcommand nor an existing path but is close to a subcommand's name,
/// naming it and the nearest known name, and for a flag whose value is
/// missing, naming the flag with an example.
ScannedLine scan_command_line(const CLI::App& root, const std::vector<std::string>& args,
                              const std::string& command_taker);

/// The names of the flags `app` takes ("--json", "-j"): its own, and its
/// parent's where it falls through (as CLI11 resolves them).
std::vector<std::string> flags_in_reach(const CLI::App* app);

}  // namespace memrun
