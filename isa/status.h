// Errors as values: every fallible call returns a Status or a Result<T> whose message names the
// place (file:line:col, byte offset, tensor name, instruction index). Nothing here throws.
#pragma once
#include <new>
#include <string>
#include <utility>
#include <variant>

#include <fmt/format.h>

namespace nnasm {

class Status {
 public:
  Status() = default;
  static Status ok() { return Status(); }
  static Status error(std::string msg) { Status s; s.failed_ = true; s.msg_ = std::move(msg); return s; }
  template <typename... A>
  static Status errorf(fmt::format_string<A...> f, A&&... a) {
    return error(fmt::format(f, std::forward<A>(a)...));
  }
  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return !failed_; }
  const std::string& message() const { return msg_; }
  // Prefixes the message with where it happened, e.g. "model.nnasm:3:7: error: " or "ADD: ".
  Status with_prefix(const std::string& prefix) const {
    return failed_ ? error(prefix + msg_) : *this;
  }

 private:
  bool failed_ = false;
  std::string msg_;
};

template <typename T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status s) : v_(std::move(s)) {}
  bool is_ok() const { return v_.index() == 0; }
  explicit operator bool() const { return is_ok(); }
  T& value() { return std::get<0>(v_); }
  const T& value() const { return std::get<0>(v_); }
  T& operator*() { return value(); }
  T* operator->() { return &value(); }
  Status status() const { return is_ok() ? Status::ok() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

#define NNASM_TRY(expr)                  \
  do {                                   \
    ::nnasm::Status nnasm_s_ = (expr);   \
    if (!nnasm_s_) return nnasm_s_;      \
  } while (0)

// Calls f() (returning a Status or a Result) where a big allocation may fail: with exceptions on,
// std::bad_alloc becomes the error `message()` formats; built without exceptions (make
// check-noexcept) a failed allocation ends the process, as any in such a build does.
template <typename F, typename M>
auto catch_bad_alloc(F&& f, M&& message) -> decltype(f()) {
#if defined(__cpp_exceptions)
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return Status::error(message());
  }
#else
  (void)message;
  return f();
#endif
}

}  // namespace nnasm
