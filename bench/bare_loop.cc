// The baseline for memrun's per-test overhead: fork, exec and wait for a
// command N times, nothing else.  Usage: bare-loop N COMMAND [ARGS...]
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bare-loop N COMMAND [ARGS...]\n");
    return 2;
  }
  int n = std::atoi(argv[1]);
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      execv(argv[2], argv + 2);
      _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  return 0;
}
