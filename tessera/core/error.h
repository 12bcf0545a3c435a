#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace tessera {

// Every user-facing failure is a tessera::Error whose message starts with
// "[op_name]" and says what was received and what would be valid.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {
inline void append_all(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_all(std::ostringstream& out, const T& first, const Rest&... rest) {
  out << first;
  append_all(out, rest...);
}
}  // namespace detail

// Builds a message from streamable pieces.
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream out;
  detail::append_all(out, args...);
  return out.str();
}

}  // namespace tessera

namespace tessera::detail {
// The failure path of TESSERA_CHECK, out of line and marked cold, so a
// check costs the function it guards one compare and a call it never
// makes: small accessors stay small enough to inline. The pieces come by
// value so every string literal shares one instantiation.
template <typename... Args>
[[noreturn, gnu::cold, gnu::noinline]] void throw_error(Args... args) {
  throw Error(str_cat(args...));
}
}  // namespace tessera::detail

// TESSERA_CHECK(cond, "[op] pieces", ...) throws tessera::Error when cond is
// false; the pieces are evaluated only then.
#define TESSERA_CHECK(cond, ...)                   \
  do {                                             \
    if (!(cond)) [[unlikely]]                      \
      ::tessera::detail::throw_error(__VA_ARGS__); \
  } while (0)

#define TESSERA_FAIL(...) throw ::tessera::Error(::tessera::str_cat(__VA_ARGS__))
