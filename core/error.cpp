// Out-of-line part of core/error.h.
#include "core/error.h"

namespace pg::detail {
void check_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw InternalError(str("internal check failed: ", expr, " at ", file, ":", line, msg.empty() ? "" : ": ", msg));
}
}  // namespace pg::detail
