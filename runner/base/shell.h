// Words for a POSIX shell: what memrun shows as a command a user may paste
// (a case's command, `memrun exec`, `repro`) is quoted here.
#pragma once

#include <string>

namespace memrun {

/// `text` as one word for a POSIX shell: in single quotes, each ' as '\''.
std::string shell_quote(const std::string& text);

}  // namespace memrun
