// The command line as memrun reads it before CLI11 does (runner/app/cli_scan.h):
// where exec's command starts, and what an unknown word is named as.
#include <gtest/gtest.h>

#include "runner/app/cli_scan.h"
#include "runner/base/error.h"
#include "runner/base/nearest.h"

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
  // A spec that does not exist is CLI11's to name, not a command.
  EXPECT_EQ(l.error({"missing.yaml"}), "");
}

TEST(CommandLine, NearestIsATypoNotAnotherWord) {
  EXPECT_EQ(nearest("--memroy", {"--memory", "--name"}), "--memory");
  EXPECT_EQ(nearest("compre", {"compare", "merge", "gc"}), "compare");
  EXPECT_EQ(nearest("gx", {"gc"}), "");  // half the word is not a typo
  EXPECT_EQ(nearest("--quiet", {"--json", "--tag"}), "");
}

}  // namespace
}  // namespace memrun
