// A spec's tests in little memory (CompactTests, spec.h). A case is held
// as its name only when its template, made again under that name, equals
// the test the suite stage made of it: made() is that same making, so a
// case runs exactly as the spec made it.
#include <stdexcept>

#include "runner/spec/spec.h"

namespace memrun {
namespace {

// `text` with every `from` in it (never empty) replaced by `to`.
std::string replaced(const std::string& text, const std::string& from, std::string_view to) {
  std::string out;
  size_t at = 0;
  for (size_t hit; (hit = text.find(from, at)) != std::string::npos; at = hit + from.size())
    out.append(text, at, hit - at).append(to);
  return out.append(text, at);
}

}  // namespace

void CompactTests::add(TestSpec t) {
  if (whole_.size() >= kByName) throw std::length_error("more than 2 billion tests in one spec");
  entries_.push_back(static_cast<uint32_t>(whole_.size()));
  whole_.push_back(std::move(t));
}

// A case's test is named SUITE/CASE: its template's name ends with its
// case's name, and what comes before is every case's of the suite.
TestSpec CompactTests::made_of(const Template& tpl, std::string_view name) const {
  std::string_view case_name = name.substr(tpl.test.name.size() - tpl.case_name.size());
  TestSpec t = tpl.test;
  t.name = name;
  for (auto& word : t.argv) word = replaced(word, tpl.case_name, case_name);
  t.command = replaced(t.command, tpl.case_name, case_name);
  return t;
}

void CompactTests::add_case(TestSpec t, const std::string& case_name, size_t suite) {
  auto fits = [&](const Template& tpl) {
    size_t prefix = tpl.test.name.size() - tpl.case_name.size();
    return tpl.suite == suite && t.name.size() > prefix && t.name.compare(0, prefix, tpl.test.name, 0, prefix) == 0 &&
           made_of(tpl, t.name) == t;
  };
  if (templates_.empty() || !fits(templates_.back())) {
    // Its own template, when its name ends with its case's (a name
    // storable() changed, or one made unique with #2, is held whole).
    bool named = !case_name.empty() && t.name.size() > case_name.size() &&
                 t.name.compare(t.name.size() - case_name.size(), case_name.size(), case_name) == 0;
    if (!named || templates_.size() >= UINT32_MAX) return add(std::move(t));
    templates_.push_back({t, case_name, suite});
  }
  if (ends_.size() >= kByName) return add(std::move(t));
  entries_.push_back(kByName | static_cast<uint32_t>(ends_.size()));
  arena_ += t.name;
  ends_.push_back(arena_.size());
  template_of_.push_back(static_cast<uint32_t>(templates_.size() - 1));
}

std::string_view CompactTests::name(size_t i) const {
  if (whole(i)) return whole_[entries_[i]].name;
  size_t n = entries_[i] & ~kByName, start = n == 0 ? 0 : ends_[n - 1];
  return std::string_view(arena_).substr(start, ends_[n] - start);
}

const TestSpec& CompactTests::shared(size_t i) const {
  return whole(i) ? whole_[entries_[i]] : templates_[template_of_[entries_[i] & ~kByName]].test;
}

TestSpec CompactTests::made(size_t i) const {
  if (whole(i)) return whole_[entries_[i]];
  return made_of(templates_[template_of_[entries_[i] & ~kByName]], name(i));
}

TestSpec& CompactTests::own(size_t i) {
  if (!whole(i)) {
    TestSpec t = made(i);
    entries_[i] = static_cast<uint32_t>(whole_.size());
    whole_.push_back(std::move(t));
  }
  return whole_[entries_[i]];
}

std::vector<TestSpec*> CompactTests::held() {
  // In file order, as the tests were when each was held whole: --scale and
  // --set name the first test they break. A template comes where its
  // first case is; one no case uses any more (--set made them whole), last.
  std::vector<TestSpec*> out;
  std::vector<bool> seen(templates_.size());
  for (uint32_t e : entries_) {
    if (!(e & kByName)) {
      out.push_back(&whole_[e]);
    } else if (uint32_t t = template_of_[e & ~kByName]; !seen[t]) {
      seen[t] = true;
      out.push_back(&templates_[t].test);
    }
  }
  for (size_t t = 0; t < templates_.size(); ++t)
    if (!seen[t]) out.push_back(&templates_[t].test);
  return out;
}

size_t CompactTests::bytes() const {
  return arena_.capacity() + ends_.capacity() * sizeof(uint64_t) + template_of_.capacity() * sizeof(uint32_t) +
         entries_.capacity() * sizeof(uint32_t);
}

}  // namespace memrun
