#include "cgroup/libsystemd.h"

#include "cgroup/cgroup.h"

#include <dlfcn.h>

namespace memrun::cgroup {
namespace {

struct Loaded {
  SdBus bus{};
  std::string error;  ///< empty when every function was found
};

template <typename F>
bool find(void* lib, const char* name, F& out, std::string& error) {
  out = reinterpret_cast<F>(::dlsym(lib, name));
  if (!out && error.empty()) error = std::string("libsystemd.so.0 lacks ") + name + " (systemd 246 or later is needed)";
  return out != nullptr;
}

Loaded load() {
  Loaded l;
  // Never unloaded: the functions are used until memrun exits.
  void* lib = ::dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    l.error = "libsystemd.so.0 cannot be loaded (" + std::string(::dlerror()) +
              "): the systemd backend needs systemd's library (Debian and Ubuntu: apt-get install libsystemd0)";
    return l;
  }
  SdBus& b = l.bus;
  std::string& e = l.error;
  find(lib, "sd_bus_open_system", b.open_system, e);
  find(lib, "sd_bus_open_user", b.open_user, e);
  find(lib, "sd_bus_new", b.new_bus, e);
  find(lib, "sd_bus_set_address", b.set_address, e);
  find(lib, "sd_bus_start", b.start, e);
  find(lib, "sd_bus_unref", b.unref, e);
  find(lib, "sd_bus_flush_close_unref", b.flush_close_unref, e);
  find(lib, "sd_bus_process", b.process, e);
  find(lib, "sd_bus_wait", b.wait, e);
  find(lib, "sd_bus_call", b.call, e);
  find(lib, "sd_bus_call_method", b.call_method, e);
  find(lib, "sd_bus_match_signal", b.match_signal, e);
  find(lib, "sd_bus_slot_unref", b.slot_unref, e);
  find(lib, "sd_bus_error_free", b.error_free, e);
  find(lib, "sd_bus_message_new_method_call", b.message_new_method_call, e);
  find(lib, "sd_bus_message_append", b.message_append, e);
  find(lib, "sd_bus_message_read", b.message_read, e);
  find(lib, "sd_bus_message_open_container", b.message_open_container, e);
  find(lib, "sd_bus_message_close_container", b.message_close_container, e);
  find(lib, "sd_bus_message_unref", b.message_unref, e);
  return l;
}

}  // namespace

const SdBus* sd_bus_library(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.error.empty()) {
    if (why) *why = loaded.error;
    return nullptr;
  }
  return &loaded.bus;
}

std::string libsystemd_missing() {
  std::string why;
  return sd_bus_library(&why) ? "" : why;
}

}  // namespace memrun::cgroup
