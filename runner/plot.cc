#include "runner/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "runner/units.h"

namespace memrun {
namespace {

// XML/HTML text escaping.
std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// A "nice" tick step: 1, 2 or 5 times a power of ten, about `span / 5`.
double tick_step(double span) {
  double raw = span / 5, power = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * power) return m * power;
  return 10 * power;
}

}  // namespace

std::string svg_plot(const nlohmann::ordered_json& t) {
  const double W = 640, H = 260, left = 64, right = 16, top = 28, bottom = 40;
  const auto& tl = t.value("timeline", nlohmann::ordered_json::object());
  std::vector<double> ts = tl.value("t_s", std::vector<double>{});
  std::vector<double> anon, file;
  const double mib = static_cast<double>(MiB);  // plots in MiB, with fractions
  for (auto v : tl.value("anon", std::vector<uint64_t>{})) anon.push_back(v / mib);
  for (auto v : tl.value("file", std::vector<uint64_t>{})) file.push_back(v / mib);
  double limit = t.value("limit_bytes", uint64_t{0}) / mib, peak = t.value("peak_bytes", uint64_t{0}) / mib;
  double duration = std::max(t.value("duration_s", 0.0), ts.empty() ? 0.0 : ts.back());
  double t_max = std::max(duration, 0.001), y_max = std::max({limit, peak, 1.0}) * 1.08;
  auto x = [&](double s) { return left + (W - left - right) * s / t_max; };
  auto y = [&](double mib) { return H - bottom - (H - top - bottom) * mib / y_max; };

  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      W, H, W, H);
  svg += fmt::format("<text x=\"{}\" y=\"16\" font-size=\"13\" font-weight=\"bold\">{} — {}</text>\n", left,
                     esc(t.value("name", "")), esc(t.value("outcome", "")));
  // Grid and axes, labelled in MiB and seconds.
  for (double v = 0, step = tick_step(y_max); v <= y_max; v += step)
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e4e4e4\"/>"
                       "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                       left, W - right, y(v), left - 6, y(v) + 4, v);
  for (double s = 0, step = tick_step(t_max); s <= t_max + 1e-9; s += step)
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{:g}</text>\n", x(s), H - bottom + 16, s);
  svg += fmt::format("<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#333\"/>"
                     "<line x1=\"{0}\" x2=\"{3}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#333\"/>\n",
                     left, top, H - bottom, W - right);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">seconds</text>\n", (left + W - right) / 2,
                     H - 6);
  svg += fmt::format("<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">MiB</text>\n",
                     (top + H - bottom) / 2, (top + H - bottom) / 2);
  // Stacked areas: anon at the bottom, file (page cache) on top of it.
  if (!ts.empty()) {
    auto area = [&](bool upper, const char* colour, const char* label) {
      std::string pts = fmt::format("{:.1f},{:.1f} ", x(ts.front()), y(upper ? anon.front() : 0));
      for (size_t i = 0; i < ts.size(); ++i)
        pts += fmt::format("{:.1f},{:.1f} ", x(ts[i]), y(upper ? anon[i] + file[i] : anon[i]));
      for (size_t i = ts.size(); i-- > 0;) pts += fmt::format("{:.1f},{:.1f} ", x(ts[i]), y(upper ? anon[i] : 0));
      return fmt::format("<polygon points=\"{}\" fill=\"{}\" fill-opacity=\"0.75\"><title>{}</title></polygon>\n",
                         pts, colour, label);
    };
    svg += area(false, "#4e79a7", "anon");
    svg += area(true, "#a0cbe8", "file (page cache)");
  }
  // The limit and memory.high as lines.
  svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#d62728\" stroke-width=\"1.5\" "
                     "stroke-dasharray=\"6 3\"/><text x=\"{1}\" y=\"{3:.1f}\" text-anchor=\"end\" fill=\"#d62728\">"
                     "limit {4}</text>\n",
                     left, W - right, y(limit), y(limit) - 4, format_size(t.value("limit_bytes", uint64_t{0})));
  if (t.contains("memory_high_bytes") && t["memory_high_bytes"].is_number()) {
    double high = t["memory_high_bytes"].get<uint64_t>() / mib;
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#ff7f0e\" "
                       "stroke-dasharray=\"3 3\"/><text x=\"{1}\" y=\"{3:.1f}\" text-anchor=\"end\" fill=\"#ff7f0e\">"
                       "memory.high</text>\n",
                       left, W - right, y(high), y(high) - 4);
  }
  // The kernel's exact peak, even when it fell between two samples.
  double peak_t = tl.value("kernel_peak", nlohmann::ordered_json::object()).value("t_s", duration);
  bool near_right = x(peak_t) > W - 140;  // label on the side with room
  svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"#222\"><title>kernel peak {}</title></circle>"
                     "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">kernel peak {}</text>\n",
                     x(peak_t), y(peak), format_size(t.value("peak_bytes", uint64_t{0})),
                     x(peak_t) + (near_right ? -8 : 8), y(peak) + 16, near_right ? "end" : "start",
                     format_size(t.value("peak_bytes", uint64_t{0})));
  if (t.value("outcome", "") == "oom")
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\" font-size=\"16\" text-anchor=\"middle\">✕"
                       "</text><text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#d62728\" text-anchor=\"end\">OOM kill</text>\n",
                       x(duration), y(limit) + 6, x(duration) - 8, y(limit) + 32);
  // Legend.
  svg += fmt::format("<rect x=\"{0}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"#4e79a7\"/><text x=\"{2}\" y=\"{3}\">anon"
                     "</text><rect x=\"{4}\" y=\"{1}\" width=\"10\" height=\"10\" fill=\"#a0cbe8\"/><text x=\"{5}\" "
                     "y=\"{3}\">file (page cache)</text>\n",
                     W - 230, 8, W - 216, 17, W - 170, W - 156);
  return svg + "</svg>\n";
}

std::string html_report(const nlohmann::ordered_json& report) {
  const auto& host = report["host"];
  const auto& sum = report["summary"];
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>memrun report {}</title>\n"
      "<style>body{{font-family:sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}"
      "td,th{{padding:4px 10px;border-bottom:1px solid #ddd;text-align:left}}td.num{{text-align:right}}"
      ".fail{{color:#c00;font-weight:bold}}.pass{{color:#080}}section{{margin:2em 0}}"
      "pre{{background:#f6f6f6;padding:8px;overflow:auto}}</style></head><body>\n"
      "<h1>memrun report</h1>\n<p>{} passed, {} failed &middot; backend {} ({} cgroups), kernel {} &middot; {}</p>\n",
      esc(report.value("run_id", "")), sum.value("passed", 0), sum.value("failed", 0), esc(host.value("backend", "")),
      esc(host.value("cgroup_mode", "")), esc(host.value("kernel", "")), esc(report.value("started", "")));
  html += "<table id=\"verdicts\"><tr><th>verdict</th><th>test</th><th>outcome</th><th>peak</th><th>limit</th>"
          "<th>headroom</th><th>duration</th></tr>\n";
  for (const auto& t : report["tests"]) {
    bool passed = t.value("passed", false);
    html += fmt::format("<tr><td class=\"{}\">{}</td><td><a href=\"#t-{}\">{}</a></td><td>{}</td><td class=\"num\">{}"
                        "</td><td class=\"num\">{}</td><td class=\"num\">{} ({:.0f}%)</td><td class=\"num\">{}</td></tr>\n",
                        passed ? "pass" : "fail", passed ? "PASS" : "FAIL", esc(t.value("name", "")),
                        esc(t.value("name", "")), esc(t.value("outcome", "")),
                        format_size(t.value("peak_bytes", uint64_t{0})), format_size(t.value("limit_bytes", uint64_t{0})),
                        format_signed_size(t.value("headroom_bytes", int64_t{0})), t.value("headroom_pct", 0.0),
                        format_duration(t.value("duration_s", 0.0)));
  }
  html += "</table>\n";
  for (const auto& t : report["tests"]) {
    html += fmt::format("<section class=\"test\" id=\"t-{}\"><h2>{}</h2>\n", esc(t.value("name", "")),
                        esc(t.value("name", "")));
    html += svg_plot(t);
    if (!t.value("passed", false)) {
      const auto& b = t.value("breakdown_at_peak", nlohmann::ordered_json::object());
      html += fmt::format("<p class=\"fail\">{}</p><p>memory at the highest sample: anon {}, file {}, kernel {}, "
                          "shmem {}, sock {}</p>\n",
                          esc(t.value("reason", "")), format_size(b.value("anon", uint64_t{0})),
                          format_size(b.value("file", uint64_t{0})), format_size(b.value("kernel", uint64_t{0})),
                          format_size(b.value("shmem", uint64_t{0})), format_size(b.value("sock", uint64_t{0})));
      for (const auto& k : t.value("oom_victims", nlohmann::ordered_json::array()))
        html += fmt::format("<p>the kernel killed <b>{}</b> (pid {}): anon-rss {}, file-rss {}, shmem-rss {}</p>\n",
                            esc(k.value("name", "")), k.value("pid", 0), format_size(k.value("anon_rss_bytes", uint64_t{0})),
                            format_size(k.value("file_rss_bytes", uint64_t{0})),
                            format_size(k.value("shmem_rss_bytes", uint64_t{0})));
      if (!t.value("log_tail", "").empty()) html += "<pre>" + esc(t.value("log_tail", "")) + "</pre>\n";
    }
    html += "</section>\n";
  }
  return html + "</body></html>\n";
}

}  // namespace memrun
