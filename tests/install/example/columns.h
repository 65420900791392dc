#pragma once
#include <cstddef>

// Loads `mib` MiB of column data (touches every page) and returns a checksum.
unsigned long load_columns(std::size_t mib);
