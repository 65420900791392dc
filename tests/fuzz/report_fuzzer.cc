// libFuzzer target over the report reader and what reads its records: any
// bytes must end in a report or in memrun::Error (a clear message, exit 2),
// never in a crash, a hang or another exception. A report read is then
// compared with itself and merged, and every output of both is made (the
// HTML plots index the timeline's arrays; the comparison subtracts sizes).
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/base/error.h"
#include "runner/report/ci_outputs.h"
#include "runner/report/compare.h"
#include "runner/report/json.h"
#include "runner/report/merge.h"
#include "runner/report/plot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  memrun::ReportData report;
  try {
    report = memrun::parse_report(text, "fuzz.json");
  } catch (const memrun::Error& e) {
    if (e.category() != memrun::Category::bad_input) __builtin_trap();
    return 0;
  }
  std::string sink;
  auto add = [&](const std::string& part) { sink += part; };
  memrun::Comparison c = memrun::compare_reports(report, report, {});
  add(memrun::comparison_text(c) + memrun::comparison_markdown(c) + memrun::comparison_json(c) +
      memrun::comparison_junit(c) + memrun::comparison_annotations(c));
  try {
    memrun::ReportData merged = memrun::merge_reports({report}, {"fuzz.json"});
    add(memrun::report_text(merged));
    auto records = memrun::each_record(merged);
    add(memrun::junit_xml(merged.info, records) + memrun::markdown_table(merged.info, records) +
        memrun::github_annotations(records));
    memrun::html_report(merged.info, records, add);
    // What memrun writes, it reads back.
    memrun::parse_report(memrun::report_text(merged), "fuzz.json, written again");
  } catch (const memrun::Error& e) {
    if (e.category() != memrun::Category::bad_input) __builtin_trap();
  }
  return 0;
}
