// libFuzzer target over the spec loader: any bytes must end in a Spec or in
// memrun::Error (a clear message, exit 2), never in a crash, a hang or
// another exception. Suites get a fixed list of cases (nothing is run), with
// a marker, so that rules and markers are fuzzed too.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/base/error.h"
#include "runner/spec/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto cases = [](const memrun::SuiteSource& s) {
    return std::vector<memrun::Case>{
        {"Parquet.ReadsOneColumn", {s.path, "--gtest_filter=Parquet.ReadsOneColumn"}, "x", "", {}, {}},
        {"Inst/Param.Case/3", {s.path}, "y", "/tmp", {{"K", "v"}}, {{"memory", "64MiB"}, {"expect", "oom"}}}};
  };
  try {
    memrun::parse_spec(text, "fuzz.yaml", "/tmp", cases);
  } catch (const memrun::Error& e) {
    if (e.category() != memrun::Category::bad_input) __builtin_trap();
  }
  return 0;
}
