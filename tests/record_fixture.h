// A planned test of one spec and records made from it as the loop would
// make them: what the verdict's and the report's unit tests start from.
#pragma once

#include <cxxabi.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "runner/plan/plan.h"
#include "runner/report/codec_fields.h"
#include "runner/spec/spec.h"
#include "runner/verdict/record.h"

namespace memrun::fixture {


// Where the tests' files go: $TMPDIR, else /tmp.
inline std::string tmp() { return std::filesystem::temp_directory_path().string(); }

struct Fixture {
  Spec spec;
  PlannedTest planned;
  Fixture() {
    spec = parse_spec("tests:\n  - {name: big, run: x, memory: 64MiB, min_headroom: 8MiB}\n", "s.yaml", tmp());
    planned = {&spec, &spec.tests[0]};
    planned.named("001-big", "/nonexistent/o", "/nonexistent/e");
  }
  /// The record of a test that exited with `exit_code` (an OOM kill: the
  /// kernel killed it, signal 9) with this kernel peak.
  TestRecord result(Outcome outcome, int exit_code, uint64_t peak) {
    Observation o = exited(exit_code, peak);
    if (outcome == Outcome::oom) {
      o.exit_code = -1;
      o.signal = 9;
      o.kernel.oom_kills = 1;
      o.kernel.limit_reached = true;
    }
    return make_record(planned, o);
  }
  /// A test that exited 0 with this kernel peak and these samples (MiB).
  TestRecord sampled(uint64_t peak, int samples, uint64_t sampled_peak, uint64_t cache_at_sampled_peak,
                     uint64_t sampled_working_set, bool limit_reached = false) {
    Observation o = exited(0, peak << 20);
    o.kernel.limit_reached = limit_reached;
    o.samples = samples;
    o.sampled_peak = sampled_peak << 20;
    o.reclaimable_at_sampled_peak = cache_at_sampled_peak << 20;
    o.sampled_working_set = sampled_working_set << 20;
    return make_record(planned, o);
  }
  static Observation exited(int exit_code, uint64_t peak) {
    Observation o;
    o.ending = Ending::exited;
    o.exit_code = exit_code;
    o.kernel.peak = peak;
    o.kernel.effective_limit = UINT64_MAX;
    return o;
  }
};

// The fields of the report's record types, walked through their lists
// (report/codec_fields.h, which the build checks complete): what the
// round trip checks field by field.
template <class T>
concept Listed = requires { codec::fields(codec::Of<T>{}); };
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
std::string type_name() {
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, nullptr), std::free);
  return name ? name.get() : typeid(T).name();
}

/// The fields of `xs` (all of one type) that none of them sets to other
/// than its default: "Type field #3". A field of a listed type counts as set when each of its own
/// fields is set in one of them at least (a list's elements, an
/// optional's value, taken together).
template <class T>
void unset_fields(const std::vector<const T*>& xs, std::vector<std::string>& out) {
  size_t i = 0;
  auto one = [&](auto member) {
    using M = std::remove_cvref_t<decltype(xs[0]->*member)>;
    std::string name = type_name<T>() + " field #" + std::to_string(i++);
    if constexpr (Listed<M>) {
      std::vector<const M*> in;
      for (const T* x : xs) in.push_back(&(x->*member));
      unset_fields(in, out);
    } else if constexpr (is_vector<M>::value || codec::is_optional<M>::value) {
      using E = typename M::value_type;
      std::vector<const E*> in;
      for (const T* x : xs) {
        if constexpr (is_vector<M>::value) for (const E& e : x->*member) in.push_back(&e);
        else if (x->*member) in.push_back(&*(x->*member));
      }
      if (in.empty()) out.push_back(name + " (empty everywhere)");
      else if constexpr (Listed<E>) unset_fields(in, out);
    } else {
      static const T fresh{};  // its default is the one its type gives it
      bool set = false;
      for (const T* x : xs) set = set || !(x->*member == fresh.*member);
      if (!set) out.push_back(name);
    }
  };
  std::apply([&](auto... member) { (one(member), ...); }, codec::fields(codec::Of<T>{}));
}
template <class T>
std::vector<std::string> unset_fields(const T& x) {
  std::vector<std::string> out;
  unset_fields(std::vector<const T*>{&x}, out);
  return out;
}

}  // namespace memrun::fixture
