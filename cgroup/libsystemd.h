// libsystemd's sd-bus, loaded at run time (dlopen), as systemd's own tools
// load their optional libraries: memrun is one binary that starts where
// libsystemd is missing (a minimal root, a container) and uses the systemd
// backend where it is present. The header (libsystemd-dev) gives the types
// at build time; nothing links against the library.
#pragma once

#include <systemd/sd-bus.h>

#include <string>

namespace memrun::cgroup {

/// The sd-bus functions the systemd backend calls, from libsystemd.so.0.
struct SdBus {
  decltype(&::sd_bus_open_system) open_system;
  decltype(&::sd_bus_open_user) open_user;
  decltype(&::sd_bus_new) new_bus;
  decltype(&::sd_bus_set_address) set_address;
  decltype(&::sd_bus_start) start;
  decltype(&::sd_bus_unref) unref;
  decltype(&::sd_bus_flush_close_unref) flush_close_unref;
  decltype(&::sd_bus_process) process;
  decltype(&::sd_bus_wait) wait;
  decltype(&::sd_bus_call) call;
  decltype(&::sd_bus_call_method) call_method;
  decltype(&::sd_bus_match_signal) match_signal;
  decltype(&::sd_bus_slot_unref) slot_unref;
  decltype(&::sd_bus_error_free) error_free;
  decltype(&::sd_bus_message_new_method_call) message_new_method_call;
  decltype(&::sd_bus_message_append) message_append;
  decltype(&::sd_bus_message_read) message_read;
  decltype(&::sd_bus_message_open_container) message_open_container;
  decltype(&::sd_bus_message_close_container) message_close_container;
  decltype(&::sd_bus_message_unref) message_unref;
};

/// libsystemd's functions, loaded once; nullptr when the library (or one of
/// its functions) is missing, with `why` saying so and what to install.
const SdBus* sd_bus_library(std::string* why);

}  // namespace memrun::cgroup
