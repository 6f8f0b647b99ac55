// Error types for user and I/O errors (caught once in main: one line, exit 2) and the always-on
// invariant check PG_CHECK (a programming error: file:line, abort-free throw of InternalError).
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace pg {

// A user-facing error: bad config, bad CLI argument, bad input file. The message is one line:
// what, where (file / key path / offset) and a hint.
class UserError : public std::runtime_error {
 public:
  // The message is kept on one line whatever it quotes (a path or value holding a newline is shown with \n).
  explicit UserError(const std::string& what) : std::runtime_error(one_line(what)) {}
  static std::string one_line(std::string s) {
    for (size_t i = 0; (i = s.find_first_of("\n\r", i)) != std::string::npos;) s.replace(i, 1, "\\n");
    return s;
  }
};
class ConfigError : public UserError {
 public:
  using UserError::UserError;
};
class IoError : public UserError {
 public:
  using UserError::UserError;
};
// A resource ran out or failed while writing (disk full, file size limit, I/O error): not the user's input.
// The command line exits with code 4 for it (2 = bad input, 3 = bug), and the previous file stays in place.
class ResourceError : public IoError {
 public:
  using IoError::IoError;
};
// A violated invariant: a bug in this program, not in its input.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

namespace detail {
[[noreturn]] void check_failed(const char* expr, const char* file, int line, const std::string& msg);
template <class... A>
std::string cat(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}
}  // namespace detail

// Concatenates its arguments with operator<< into a string.
template <class... A>
std::string str(const A&... a) {
  return detail::cat(a...);
}

}  // namespace pg

// Always-on invariant check (also in Release). Never use it for user input: throw a UserError.
#define PG_CHECK(cond, ...)                                                                                       \
  do {                                                                                                            \
    if (!(cond)) ::pg::detail::check_failed(#cond, __FILE__, __LINE__, ::pg::str("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
