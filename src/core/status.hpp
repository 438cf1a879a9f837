// The one error mechanism inside epigemm: functions return a Status (code + message); the C
// boundary (c_api.cpp) turns it into epigemm_status_t and the context's last-error string.
// No exception is thrown for bad input; std::bad_alloc and other exceptions are caught at the
// C boundary and become EPIGEMM_STATUS_INTERNAL_ERROR / OUT_OF_MEMORY.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "epigemm/epigemm.h"

namespace epigemm {

class [[nodiscard]] Status {
 public:
  Status() = default;  // success
  Status(epigemm_status_t code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == EPIGEMM_STATUS_SUCCESS; }
  epigemm_status_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  epigemm_status_t code_ = EPIGEMM_STATUS_SUCCESS;
  std::string message_;
};

// Builds a message from streamable parts: error(EPIGEMM_STATUS_INVALID_VALUE, "bias has ", n, ...)
template <typename... Parts>
Status error(epigemm_status_t code, const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return Status(code, out.str());
}

template <typename... Parts>
Status invalid(const Parts&... parts) {
  return error(EPIGEMM_STATUS_INVALID_VALUE, parts...);
}

// A failure of something beneath us (BLAS, CUDA): "file:line in function: message".
#define EPIGEMM_BACKEND_ERROR(...)                                                           \
  ::epigemm::error(EPIGEMM_STATUS_BACKEND_ERROR, __FILE__, ":", __LINE__, " in ", __func__, \
                   ": ", __VA_ARGS__)

#define EPIGEMM_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::epigemm::Status status_ = (expr);        \
    if (!status_.ok()) return status_;         \
  } while (0)

}  // namespace epigemm
