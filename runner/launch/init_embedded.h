// The init of a sealed test's pid namespace as a program of its own
// (runner/launch/init.h), where memrun was built with it (x86_64).
#pragma once

#include <string_view>

namespace memrun {

/// The program's bytes, an ELF executable; empty where it was not built.
std::string_view init_program();

}  // namespace memrun
