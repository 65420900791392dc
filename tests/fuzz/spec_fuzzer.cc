// libFuzzer target over the spec loader: any bytes must end in a Spec or in
// memrun::Error (a clear message, exit 2), never in a crash, a hang or
// another exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runner/error.h"
#include "runner/spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    memrun::parse_spec(text, "fuzz.yaml", "/tmp");
  } catch (const memrun::Error& e) {
    if (e.exit_code() != memrun::kExitUsage) __builtin_trap();
  }
  return 0;
}
