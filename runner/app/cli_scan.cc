#include "runner/app/cli_scan.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>

#include "runner/base/error.h"
#include "runner/base/nearest.h"

namespace memrun {
namespace {

// The flag `name` ("--json", "-j") as `app` reads it: its own, or, where it
// falls through, its parent's (as CLI11 resolves it).
const CLI::Option* find_flag(const CLI::App* app, const std::string& name) {
  for (; app; app = app->get_fallthrough() ? app->get_parent() : nullptr)
    if (const auto* opt = app->get_option_no_throw(name); opt && !opt->get_positional()) return opt;
  return nullptr;
}

const CLI::App* subcommand_named(const CLI::App& root, const std::string& name) {
  auto found = root.get_subcommands([&](const CLI::App* s) { return s->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

bool is_flag(const std::string& word) {
  // "-1" and "-0.5" are values (a negative number), "-" is a word (stdin).
  return word.size() > 1 && word[0] == '-' && !std::isdigit(static_cast<unsigned char>(word[1])) && word[1] != '.';
}

std::string where(const CLI::App* app, const CLI::App& root) {
  return app == &root ? "memrun" : "memrun " + app->get_name();
}

// A value for `flag`, whose value --help names `value` (SIZE, a|b), as a
// person would write it.
std::string example_of(const std::string& flag, const std::string& value) {
  static const std::map<std::string, std::string> examples = {
      {"SIZE", "64MiB"}, {"DURATION", "30s"}, {"N", "4"}, {"K/N", "1/4"}, {"REPORT", "report.json"},
      {"REGEX", "'^parquet'"}, {"TAG...", "slow"}, {"DIR", ".memrun"}, {"FACTOR", "0.8"},
      {"NAME.memory=SIZE", "big_join.memory=2GiB"}, {"N%|SIZE", "5%"}, {"SIZE|N%", "20%"},
      {"LO:HI", "64MiB:4GiB"}, {"SPEC", "specs/parquet.yaml"}, {"NAME", "big_join"}};
  if (value == "FILE")
    return flag == "--junit" ? "junit.xml" : flag == "--markdown" ? "report.md" : flag == "--html" ? "report.html"
                                                                                                  : "report.json";
  if (auto it = examples.find(value); it != examples.end()) return it->second;
  if (value.find('|') != std::string::npos) return value.substr(0, value.find('|'));  // a|b: the first
  return "";
}

}  // namespace

std::vector<std::string> flags_in_reach(const CLI::App* app) {
  std::vector<std::string> names;
  for (; app; app = app->get_fallthrough() ? app->get_parent() : nullptr)
    for (const auto* opt : app->get_options()) {
      for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
      for (const auto& s : opt->get_snames()) names.push_back("-" + s);
    }
  return names;
}

// Long: one pass over the words; each kind (--, a flag and its values, a
// command, a spec, exec's command) beside the rule that reads it.
ScannedLine scan_command_line(const CLI::App& root, const std::vector<std::string>& args,
                              const std::string& command_taker) {
  ScannedLine out;
  const CLI::App* app = &root;
  bool positional_seen = false, in_values = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") {
      if (app->get_name() == command_taker && app != &root) {
        out.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
        return out;
      }
      out.args.insert(out.args.end(), args.begin() + static_cast<long>(i), args.end());
      return out;
    }
    if (is_flag(word)) {
      in_values = false;
      bool long_flag = word.rfind("--", 0) == 0;
      std::string name = long_flag ? word.substr(0, word.find('=')) : word.substr(0, 2);
      const CLI::Option* opt = find_flag(app, name);
      if (!opt) {
        std::string near = nearest(name, flags_in_reach(app));
        throw Error(Category::usage, (app == &root ? "" : app->get_name() + ": ") + "unknown flag " + name +
                                         (near.empty() ? "" : "; did you mean " + near + "?") + " (" + where(app, root) +
                                         " --help lists the flags)");
      }
      out.args.push_back(word);
      bool inline_value = long_flag ? word.find('=') != std::string::npos : word.size() > 2;
      if (opt->get_items_expected_max() > 0 && !inline_value) {
        // CLI11 would say "--jobs: 1 required INT missing".
        if (i + 1 == args.size() || is_flag(args[i + 1])) {
          const std::string& value = opt->get_option_text();
          std::string example = example_of(name, value);
          throw Error(Category::usage, (app == &root ? "" : app->get_name() + ": ") + name + " needs a value" +
                                           (value.empty() ? "" : " (" + value + ")") +
                                           (example.empty() ? "" : ", e.g. " + name + " " + example) + " (" +
                                           where(app, root) + " --help lists the flags)");
        }
        out.args.push_back(args[++i]);
        // A flag that takes several values (--tag a b) goes on taking words.
        in_values = opt->get_items_expected_max() > 1;
      }
      continue;
    }
    if (in_values) {
      out.args.push_back(word);
      continue;
    }
    if (app == &root && !positional_seen) {
      if (const CLI::App* sub = subcommand_named(root, word)) {
        app = sub;
        out.args.push_back(word);
        continue;
      }
      positional_seen = true;
      std::error_code ec;
      if (!std::filesystem::exists(word, ec)) {
        std::vector<std::string> names;
        for (const auto* s : root.get_subcommands([](const CLI::App*) { return true; })) names.push_back(s->get_name());
        std::string near = nearest(word, names);
        // A word near a command's name is a typo of it, not a spec that is
        // missing (a spec's name would have said "Path does not exist").
        if (!near.empty())
          throw Error(Category::usage, "unknown command '" + word + "'; did you mean '" + near +
                                           "'? (memrun --help lists the commands; a spec is a file that exists)");
      }
    }
    if (app != &root && app->get_name() == command_taker) {
      out.command.assign(args.begin() + static_cast<long>(i), args.end());
      return out;
    }
    out.args.push_back(word);
  }
  return out;
}

}  // namespace memrun
