// The init program (runner/launch/init.h): memrun's test init as a process of
// its own, without the C library. This file is what the library would have
// given it: the entry point, the vfork-style clone, memset and memcpy (which
// the compiler may call). x86_64.
#include <stddef.h>

#include "runner/launch/init.h"

extern "C" {

void* memset(void* to, int c, size_t n) {
  auto* p = static_cast<unsigned char*>(to);
  while (n--) *p++ = static_cast<unsigned char>(c);
  return to;
}

void* memcpy(void* to, const void* from, size_t n) {
  auto* p = static_cast<unsigned char*>(to);
  const auto* q = static_cast<const unsigned char*>(from);
  while (n--) *p++ = *q++;
  return to;
}

// The kernel starts a process with argc, argv, NULL, envp, NULL on its stack.
[[noreturn, gnu::used]] void memrun_init_start(long* sp) {
  int argc = static_cast<int>(sp[0]);
  char** argv = reinterpret_cast<char**>(sp + 1);
  memrun::init::main_of(argc, argv, argv + argc + 1);
}
}

// _start: the stack pointer as the kernel left it, aligned for the call.
// memrun_init_spawn(flags, stack_top, fn, arg): clone(2) with `flags` onto
// a stack of its own, where the child calls fn(arg) and exits with what it
// returns; the parent gets the child's pid or -errno. (A vfork-style child
// cannot return through the parent's frames: they are the parent's.)
__asm__(
    ".text\n"
    ".globl _start\n"
    "_start:\n"
    "  xor %ebp, %ebp\n"
    "  mov %rsp, %rdi\n"
    "  and $-16, %rsp\n"
    "  call memrun_init_start\n"
    "  hlt\n"
    ".globl memrun_init_spawn\n"
    "memrun_init_spawn:\n"
    "  and $-16, %rsi\n"
    "  sub $16, %rsi\n"
    "  mov %rcx, (%rsi)\n"   // arg, on the child's stack
    "  mov %rdx, %r9\n"      // fn: the system call keeps r9
    "  xor %edx, %edx\n"
    "  xor %r10d, %r10d\n"
    "  xor %r8d, %r8d\n"
    "  mov $56, %eax\n"      // SYS_clone(flags, stack, 0, 0, 0)
    "  syscall\n"
    "  test %rax, %rax\n"
    "  jnz 1f\n"
    "  xor %ebp, %ebp\n"
    "  mov (%rsp), %rdi\n"
    "  call *%r9\n"
    "  mov %eax, %edi\n"
    "  mov $231, %eax\n"     // SYS_exit_group
    "  syscall\n"
    "  hlt\n"
    "1:\n"
    "  ret\n");
