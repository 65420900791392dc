#include <cstdio>
#include <cstdlib>

#include "columns.h"

int main(int argc, char** argv) {
  std::printf("%lu\n", load_columns(argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1));
}
