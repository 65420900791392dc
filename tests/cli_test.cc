// The command line as memrun reads it before CLI11 does (runner/app/cli_scan.h):
// where exec's command starts, and what an unknown word is named as.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "runner/app/cli.h"
#include "runner/app/cli_scan.h"
#include "runner/base/error.h"
#include "runner/base/nearest.h"
#include "runner/base/units.h"
#include "runner/plan/plan.h"

namespace memrun {
namespace {

// A command line shaped as memrun's: flags with and without values, a
// subcommand that falls through, one that takes a command.
struct Line {
  CLI::App app{"test"};
  std::string json, backend, memory;
  std::vector<std::string> specs, tags, words;
  bool verbose = false;
  Line() {
    app.add_option("spec", specs);
    app.add_option("--json", json);
    app.add_option("--tag", tags);
    app.add_option("--backend", backend);
    app.add_flag("-v,--verbose", verbose);
    auto* exec = app.add_subcommand("exec");
    exec->add_option("command", words);
    exec->add_option("--memory", memory);
    exec->add_option("--json", json);
    exec->fallthrough();
    app.add_subcommand("compare")->add_option("base", words);
  }
  ScannedLine scan(const std::vector<std::string>& args) { return scan_command_line(app, args, "exec"); }
  std::string error(const std::vector<std::string>& args) {
    try {
      scan(args);
    } catch (const Error& e) {
      EXPECT_EQ(e.category(), Category::usage);
      return e.what();
    }
    return "";
  }
};

using Words = std::vector<std::string>;

TEST(CommandLine, ExecsCommandStartsAtItsFirstWordThatIsNoFlagOfExecs) {
  Line l;
  auto s = l.scan({"exec", "--memory", "64MiB", "sort", "--version"});
  EXPECT_EQ(s.args, (Words{"exec", "--memory", "64MiB"}));
  EXPECT_EQ(s.command, (Words{"sort", "--version"}));
  s = l.scan({"--backend", "v1", "exec", "--memory=64MiB", "-v", "echo", "--json", "x.json", "--", "y"});
  EXPECT_EQ(s.args, (Words{"--backend", "v1", "exec", "--memory=64MiB", "-v"}));
  EXPECT_EQ(s.command, (Words{"echo", "--json", "x.json", "--", "y"}));
  // "--" still works, and what follows it is the command whatever it is.
  s = l.scan({"exec", "--memory", "64MiB", "--json", "r.json", "--", "--weird", "a"});
  EXPECT_EQ(s.args, (Words{"exec", "--memory", "64MiB", "--json", "r.json"}));
  EXPECT_EQ(s.command, (Words{"--weird", "a"}));
  // Without a command, none: exec says what it needs.
  EXPECT_TRUE(l.scan({"exec", "--memory", "64MiB"}).command.empty());
}

TEST(CommandLine, OtherLinesPassThroughWhole) {
  Line l;
  Words line = {"--tag", "a", "b", "--json", "r.json", "specs/x.yaml", "--", "-odd"};
  auto s = l.scan(line);
  EXPECT_EQ(s.args, line);
  EXPECT_TRUE(s.command.empty());
}

TEST(CommandLine, AnUnknownFlagIsNamedWithTheNearestKnownOne) {
  Line l;
  EXPECT_EQ(l.error({"--jsn", "out.json", "s.yaml"}),
            "unknown flag --jsn; did you mean --json? (memrun --help lists the flags)");
  EXPECT_EQ(l.error({"exec", "--memroy", "64MiB", "--", "true"}),
            "exec: unknown flag --memroy; did you mean --memory? (memrun exec --help lists the flags)");
  // A flag of the parent's reaches exec (fallthrough), and is suggested there.
  EXPECT_NE(l.error({"exec", "--backnd", "v1"}).find("did you mean --backend?"), std::string::npos);
  // Nothing near: named alone.
  EXPECT_EQ(l.error({"--frobnicate"}), "unknown flag --frobnicate (memrun --help lists the flags)");
  EXPECT_EQ(l.error({"--json=r.json", "--verbos"}).find("unknown flag --verbos; did you mean --verbose?"), 0u);
}

TEST(CommandLine, AWordNearACommandIsATypoOfIt) {
  Line l;
  EXPECT_EQ(l.error({"compre", "a.json", "b.json"}).find("unknown command 'compre'; did you mean 'compare'?"), 0u);
  EXPECT_EQ(l.error({"exce", "true"}).find("unknown command 'exce'; did you mean 'exec'?"), 0u);
  // A spec that does not exist is named by the spec's own check when CLI11 parses, not as a command.
  EXPECT_EQ(l.error({"missing.yaml"}), "");
}

TEST(CommandLine, NearestIsATypoNotAnotherWord) {
  EXPECT_EQ(nearest("--memroy", {"--memory", "--name"}), "--memory");
  EXPECT_EQ(nearest("compre", {"compare", "merge", "gc"}), "compare");
  EXPECT_EQ(nearest("gx", {"gc"}), "");  // half the word is not a typo
  EXPECT_EQ(nearest("--quiet", {"--json", "--tag"}), "");
}

// memrun's own command line, as main() declares it.
struct Memrun {
  CLI::App app{"memrun", "memrun"};
  Cli cli;
  Memrun() { declare_command_line(app, cli); }
  // Every command that --help lists, and memrun itself (the run: `memrun SPEC`).
  std::vector<const CLI::App*> commands() const {
    std::vector<const CLI::App*> out = {&app};
    for (const auto* sub : app.get_subcommands([](const CLI::App* s) { return !s->get_group().empty(); }))
      out.push_back(sub);
    return out;
  }
  static std::string help_of(const CLI::App* command) { return command->help("memrun"); }
  std::string error(const std::vector<std::string>& args) {
    try {
      scan_command_line(app, args, "exec");
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

std::string name_of(const CLI::App* command) { return command->get_parent() ? command->get_name() : "memrun"; }

// Whether `help` lists `flag` as a flag (not inside a longer one's name).
bool lists(const std::string& help, const std::string& flag) {
  return std::regex_search(help, std::regex("(^|[\n ,(])" + flag + "([ ,=\\[\n\"]|$)"));
}

TEST(CommandLine, SpeaksMemrunsWordsNotCli11s) {
  Memrun m;
  ASSERT_GE(m.commands().size(), 10u);
  for (const auto* command : m.commands()) {
    std::string help = Memrun::help_of(command);
    for (const char* notation : {"TEXT", "INT", "FLOAT", ":{", "PATH(existing)", "FILE(existing)", " in [",
                                 "REQUIRED", "{on-failure}", "Positionals:", "Subcommands:", "[OPTIONS]"})
      EXPECT_EQ(help.find(notation), std::string::npos) << "memrun " << name_of(command) << " --help has CLI11's "
                                                        << notation << ":\n" << help;
    // Every flag that takes a value names it (SIZE, DURATION, FILE, N, a|b).
    for (const auto* opt : command->get_options())
      if (!opt->get_positional() && opt->get_items_expected_max() > 0) {
        EXPECT_FALSE(opt->get_option_text().empty()) << name_of(command) << " " << opt->get_name() << " names no value";
      }
  }
}

TEST(CommandLine, ListsEveryFlagACommandTakes) {
  Memrun m;
  for (const auto* command : m.commands()) {
    std::string help = Memrun::help_of(command);
    std::vector<std::string> flags = flags_in_reach(command);
    EXPECT_FALSE(flags.empty());
    for (const auto& flag : flags)
      EXPECT_TRUE(lists(help, flag)) << "memrun " << name_of(command) << " takes " << flag
                                     << " but its --help does not list it:\n" << help;
  }
  // exec takes memrun's flags for where it runs and what it writes, and
  // lists them; not a spec run's selection.
  std::string exec = Memrun::help_of(m.cli.exec);
  for (const char* flag : {"--memory", "--backend", "--cgroup-parent", "--json", "--junit", "--run-dir",
                           "--unenforceable", "--sample-interval"})
    EXPECT_TRUE(lists(exec, flag)) << flag;
  EXPECT_NE(m.error({"exec", "--memory", "64MiB", "--filter", "x", "true"}).find("exec: unknown flag --filter"),
            std::string::npos);
}

TEST(CommandLine, AFlagWithoutItsValueIsNamedWithAnExample) {
  Memrun m;
  EXPECT_EQ(m.error({"-j"}), "-j needs a value (N), e.g. -j 4 (memrun --help lists the flags)");
  EXPECT_EQ(m.error({"-j", "--fail-fast", "s.yaml"}), "-j needs a value (N), e.g. -j 4 (memrun --help lists the flags)");
  EXPECT_EQ(m.error({"exec", "--memory"}),
            "exec: --memory needs a value (SIZE), e.g. --memory 64MiB (memrun exec --help lists the flags)");
  EXPECT_EQ(m.error({"--backend"}).find("--backend needs a value (auto|v2|v1|systemd), e.g. --backend auto"), 0u);
  // A value that looks like a number is a value.
  EXPECT_EQ(m.error({"--scale", "-1"}), "");
}

// The man page (docs/memrun.1) and --help come from one source: its
// synopsis is synopsis(), and it names every flag memrun has, and no other.
TEST(CommandLine, TheManPageSaysWhatHelpSays) {
  std::ifstream in(std::string(SOURCE_DIR) + "/docs/memrun.1");
  std::stringstream text;
  text << in.rdbuf();
  std::string man = text.str();
  auto plain = [](std::string roff) {
    roff = std::regex_replace(roff, std::regex("^\\.B[IR]? ", std::regex::multiline), "");
    roff = std::regex_replace(roff, std::regex("\\\\f[BIR]"), "");
    return std::regex_replace(roff, std::regex("\\\\-"), "-");
  };
  size_t from = man.find(".SH SYNOPSIS\n"), to = man.find(".SH DESCRIPTION");
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  std::vector<std::string> lines;
  std::stringstream synopsis_text(man.substr(from + 13, to - from - 13) + ".br\n");
  std::string line;
  for (std::string l; std::getline(synopsis_text, l);) {
    if (l == ".br") {
      lines.push_back(plain(line));
      line.clear();
    } else {
      line += (line.empty() ? "" : " ") + l;
    }
  }
  EXPECT_EQ(lines, synopsis());
  std::string words = plain(man);
  Memrun m;
  std::set<std::string> flags;
  for (const auto* command : m.commands())
    for (const auto& flag : flags_in_reach(command)) flags.insert(flag);
  flags.insert("--version");
  for (const auto& flag : flags)
    EXPECT_TRUE(lists(words, flag)) << "docs/memrun.1 does not name " << flag;
  std::smatch found;
  for (auto at = words.cbegin(); std::regex_search(at, words.cend(), found, std::regex("(^|[\n ,(])(--?[a-z][a-z-]*)"));
       at = found[0].second) {
    std::string flag = found[2];
    if (flag == "-c") continue;  // /bin/sh -c
    EXPECT_TRUE(flags.count(flag)) << "docs/memrun.1 names " << flag << ", which memrun does not have";
  }
}

// A line parsed as main() parses it: memrun's usage error's words, or
// CLI11's own error's (which memrun never lets through).
struct Parsed {
  std::string memrun, cli11;
  bool required = false;  // CLI11's RequiredError, which main rewords
};
Parsed parse(CLI::App& app, const std::vector<std::string>& args) {
  Parsed out;
  try {
    auto scanned = scan_command_line(app, args, "exec");
    std::reverse(scanned.args.begin(), scanned.args.end());
    app.parse(scanned.args);
  } catch (const Error& e) {
    EXPECT_EQ(e.category(), Category::usage) << e.what();
    out.memrun = e.what();
  } catch (const CLI::RequiredError& e) {
    out.required = true;
    out.cli11 = e.what();
  } catch (const CLI::ParseError& e) {
    out.cli11 = e.what();
  }
  return out;
}

// CLI11's ways of saying a value is wrong or missing.
const char* const kCli11Notation[] = {"not in {", "not in range", "Value ", "Could not convert", "does not exist",
                                      "is required", "Run with --help", ":{", " in [", "TEXT", "INT", "FLOAT",
                                      "PATH(", "FILE("};

// Every option that CLI11 checks (one with a validator), on every command,
// given values it does not take: memrun's usage error, which names it, says
// what was wrong with the value and gives an example, with no CLI11
// notation ("--live: sometimes not in {auto,on,off}", "--repeat: Value 0
// not in range 1 to 100", "Path does not exist"). The options are read from
// the CLI11 object, so a new check is held to it too.
TEST(CommandLine, AValueAnOptionDoesNotTakeIsSaidInMemrunsWords) {
  Memrun all;
  size_t checked = 0;
  std::string existing_file = std::string(SOURCE_DIR) + "/README.md";
  for (const auto* command : all.commands()) {
    std::vector<std::string> before;  // the positionals before this one, given a file that exists
    for (const auto* opt : command->get_options()) {
      bool has_check = true;
      try {
        const_cast<CLI::Option*>(opt)->get_validator();
      } catch (const CLI::OptionNotFound&) {
        has_check = false;
      }
      if (has_check) {
        ++checked;
        std::string name = opt->get_positional() ? opt->get_option_text() : opt->get_name();
        name = name.substr(0, name.find("..."));
        for (const std::string bad : {"sometimes", "0"}) {
          Memrun m;
          std::vector<std::string> args;
          if (command->get_parent()) args.push_back(command->get_name());
          if (opt->get_positional()) args.insert(args.end(), before.begin(), before.end());
          args.push_back(opt->get_positional() ? bad : opt->get_name() + "=" + bad);
          Parsed p = parse(m.app, args);
          std::string line = "memrun " + ::testing::PrintToString(args);
          EXPECT_EQ(p.cli11, "") << line << ": CLI11's own error";
          ASSERT_NE(p.memrun, "") << line << " was taken";
          EXPECT_NE(p.memrun.find(name), std::string::npos) << line << ": " << p.memrun;
          EXPECT_NE(p.memrun.find("'" + bad + "'"), std::string::npos) << line << ": " << p.memrun;
          EXPECT_NE(p.memrun.find("; e.g. "), std::string::npos) << line << ": " << p.memrun;
          EXPECT_NE(p.memrun.find(" --help"), std::string::npos) << line << ": " << p.memrun;
          for (const char* notation : kCli11Notation)
            EXPECT_EQ(p.memrun.find(notation), std::string::npos) << line << ": " << p.memrun;
        }
      }
      if (opt->get_positional()) before.push_back(existing_file);
    }
  }
  // --live, --repeat, --backend, ... and the files: each command's.
  EXPECT_GE(checked, 25u);
  Memrun m;
  EXPECT_EQ(parse(m.app, {"--live", "sometimes"}).memrun,
            "--live takes auto, on or off, not 'sometimes'; e.g. --live on (memrun --help lists the flags)");
  Memrun r;
  EXPECT_EQ(parse(r.app, {"--repeat", "0"}).memrun,
            "--repeat takes a whole number from 1 to 100, not '0'; e.g. --repeat 3 (memrun --help lists the flags)");
}

// A command given nothing answers as bare `memrun` does without a spec:
// what is missing, in --help's names, and how the command is written; not
// CLI11's "base is required" (main rewords its RequiredError with
// missing_arguments()). Every command that needs an argument is held to it.
TEST(CommandLine, ACommandWithoutItsArgumentsAnswersAsBareMemrun) {
  Memrun bare;
  EXPECT_EQ(missing_arguments(bare.app), "no SPEC given. Usage: memrun [FLAGS] SPEC... (see memrun --help)");
  std::set<std::string> needing;
  for (const auto* command : bare.commands()) {
    if (!command->get_parent()) continue;
    Memrun m;
    Parsed p = parse(m.app, {command->get_name()});
    EXPECT_EQ(p.memrun, "") << command->get_name();
    if (!p.required) {
      EXPECT_EQ(p.cli11, "") << command->get_name();
      continue;
    }
    needing.insert(command->get_name());
    std::string said = missing_arguments(*m.app.get_subcommands().front());
    EXPECT_TRUE(std::regex_match(said, std::regex("no [A-Z-][A-Za-z -]* given\\. Usage: memrun " + command->get_name() +
                                                  " .* \\(see memrun " + command->get_name() + " --help\\)")))
        << said;
    for (const char* notation : kCli11Notation) EXPECT_EQ(said.find(notation), std::string::npos) << said;
  }
  for (const char* command : {"compare", "merge", "list", "exec", "bisect", "repro", "explain"})
    EXPECT_TRUE(needing.count(command)) << "memrun " << command << " ran with no arguments";
  Memrun compare;
  parse(compare.app, {"compare"});
  EXPECT_EQ(missing_arguments(*compare.cli.compare),
            "no BASE or HEAD given. Usage: memrun compare [FLAGS] BASE HEAD (see memrun compare --help)");
  // exec's command, which CLI11 never fills (scan_command_line takes it).
  Memrun exec;
  parse(exec.app, {"exec", "--memory", "64MiB"});
  EXPECT_EQ(missing_arguments(*exec.cli.exec, {"command"}),
            "no COMMAND given. Usage: memrun exec --memory SIZE [FLAGS] [--] COMMAND [ARGS...] (see memrun exec "
            "--help)");
}

// Words a command has no place for: not CLI11's "The following argument
// was not expected" (main rewords its ExtrasError with extra_arguments()).
TEST(CommandLine, WordsACommandDoesNotTakeAreSaidWithItsUsage) {
  std::string file = std::string(SOURCE_DIR) + "/README.md";
  Memrun compare;
  Parsed p = parse(compare.app, {"compare", file, file, "extra"});
  EXPECT_NE(p.cli11.find("not expected"), std::string::npos) << p.cli11;
  EXPECT_EQ(extra_arguments(*compare.cli.compare),
            "compare: more arguments than it takes: 'extra'. Usage: memrun compare [FLAGS] BASE HEAD (see memrun "
            "compare --help)");
  Memrun doctor;
  parse(doctor.app, {"doctor", "now"});
  EXPECT_EQ(extra_arguments(*doctor.cli.doctor),
            "doctor: more arguments than it takes: 'now'. Usage: memrun doctor [FLAGS] (see memrun doctor --help)");
}

// A flag given a value ("--fail-fast=maybe") is said in memrun's words,
// for every flag memrun itself has (read from the CLI11 object).
TEST(CommandLine, AFlagGivenAValueIsSaidInMemrunsWords) {
  Memrun memrun;
  size_t flags = 0;
  for (const CLI::Option* opt : memrun.app.get_options()) {
    if (opt->get_expected_max() != 0 || opt->get_lnames().empty()) continue;
    std::string name = "--" + opt->get_lnames().front();
    if (name == "--help" || name == "--version") continue;
    ++flags;
    Memrun fresh;
    EXPECT_EQ(flag_given_a_value(fresh.app, {"spec.yaml", name + "=maybe"}),
              name + " takes no value, not 'maybe'; e.g. " + name + " (see memrun --help)");
  }
  EXPECT_GE(flags, 3u) << "memrun's own flags (--fail-fast, --allow-oversubscribe, --host-cgroups...)";
  Memrun exec;
  EXPECT_EQ(flag_given_a_value(exec.app, {"exec", "--memory", "1MiB", "--", "true"}), "");
}

// `memrun list`'s columns line up, whatever the lengths of names, limits
// and tags, and a name of several-byte characters takes its own width.
TEST(CommandLine, ListColumnsLineUp) {
  TestSpec a, b, c;
  a.name = "a";
  a.line = 3;
  a.memory = 64 * MiB;
  b.name = "a-much-longer-name";
  b.line = 12;
  b.memory = 1000000000;
  b.expect.kind = Expectation::oom;
  b.tags = {"slow", "io"};
  c.name = "déjà-vu";
  c.line = 100;
  c.memory = 512 * KiB;
  c.origin = "suite py (line 2); marker";
  Spec spec{"specs/x.yaml", std::nullopt, {a, b, c}};
  std::string table = list_table(make_plan({spec}, Selection{}, ""));
  std::vector<std::string> lines;
  std::stringstream in(table);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 4u) << table;
  auto width_to = [](const std::string& line, size_t bytes) {  // characters before byte `bytes`
    size_t n = 0;
    for (size_t i = 0; i < bytes; ++i) n += (static_cast<unsigned char>(line[i]) & 0xc0) != 0x80;
    return n;
  };
  // Each column starts where its heading does.
  for (const char* heading : {"TEST", "MEMORY", "EXPECT", "TAGS", "LIMIT FROM"}) {
    size_t at = lines[0].find(heading);
    ASSERT_NE(at, std::string::npos) << heading << "\n" << table;
    for (size_t i = 1; i < lines.size(); ++i) {
      size_t byte = 0;
      while (byte < lines[i].size() && width_to(lines[i], byte) < at) ++byte;
      if (byte >= lines[i].size()) continue;  // an empty last column
      EXPECT_EQ(lines[i][byte - 1], ' ') << heading << " in line " << i << ":\n" << table;
      // Only tags and where a limit came from may be empty.
      bool may_be_empty = std::string(heading) == "TAGS" || std::string(heading) == "LIMIT FROM";
      if (!may_be_empty) {
        EXPECT_NE(lines[i][byte], ' ') << heading << " in line " << i << ":\n" << table;
      }
    }
  }
  EXPECT_NE(lines[2].find("1 GB (953.7 MiB)"), std::string::npos) << table;
  EXPECT_NE(lines[3].find("suite py (line 2); marker"), std::string::npos) << table;
}

}  // namespace
}  // namespace memrun
