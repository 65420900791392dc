#include "columns.h"

#include <vector>

unsigned long load_columns(std::size_t mib) {
  std::vector<char> data(mib << 20);
  unsigned long sum = 0;
  for (std::size_t i = 0; i < data.size(); i += 4096) {
    data[i] = static_cast<char>(i >> 12);
    sum += static_cast<unsigned char>(data[i]);
  }
  return sum;
}
