// The init program's bytes (runner/launch/init_start.cc), built into memrun as the
// pytest plugin is: an installed memrun needs no file beside it.
#include "runner/launch/init_embedded.h"

#if defined(MEMRUN_INIT_PROGRAM)
__asm__(
    ".section .rodata\n"
    ".balign 16\n"
    ".globl memrun_init_program, memrun_init_program_end\n"  // global (hidden): found by the code
    ".hidden memrun_init_program, memrun_init_program_end\n"  // below wherever LTO puts it
    "memrun_init_program:\n"
    ".incbin \"" MEMRUN_INIT_PROGRAM "\"\n"
    "memrun_init_program_end:\n"
    ".previous\n");
extern "C" const char memrun_init_program[], memrun_init_program_end[];
#endif

namespace memrun {

std::string_view init_program() {
#if defined(MEMRUN_INIT_PROGRAM)
  return {memrun_init_program, static_cast<size_t>(memrun_init_program_end - memrun_init_program)};
#else
  return {};
#endif
}

}  // namespace memrun
