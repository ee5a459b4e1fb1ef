// MS_CHECK / MS_DCHECK: broken invariants end the job (style_anchors §9.3, rule 3).
// A failed check prints "[rank r] file:line: cond: message" and calls fatal(), which
// runs the installed fatal handler (the parallel layer installs MPI_Abort once MPI is
// initialised, so one failing rank ends the whole job) and otherwise std::abort().
#pragma once

#include <string>

#include "core/str_cat.h"

namespace mindspeed {

/// Ends the process (or the whole MPI job). Never returns.
[[noreturn]] void fatal(const std::string& message, int exit_code = 1);
/// Prints "[rank r] FATAL: message" as fatal() does, without stopping (for a failure all
/// ranks agreed on, which then exit cleanly).
void print_fatal(const std::string& message);

/// The handler fatal() calls after printing; it must not return.
using FatalHandler = void (*)(int exit_code);
void set_fatal_handler(FatalHandler handler);
/// The rank printed in the "[rank r]" prefix of fatal messages and logs (-1: no MPI yet).
void set_log_rank(int rank);
int log_rank();

[[noreturn]] void check_failed(const char* file, int line, const char* cond,
                               const std::string& message);

}  // namespace mindspeed

#define MS_CHECK(cond, ...)                                                       \
  do {                                                                            \
    if (__builtin_expect(!(cond), 0))                                             \
      ::mindspeed::check_failed(__FILE__, __LINE__, #cond,                        \
                                ::mindspeed::str_cat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define MS_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define MS_DCHECK(cond, ...) MS_CHECK(cond, __VA_ARGS__)
#endif

/// Aborts with the Status message when `expr` is not OK (for call sites where an error
/// can only be a bug or an unrecoverable runtime failure).
#define MS_CHECK_OK(expr)                                                      \
  do {                                                                         \
    ::mindspeed::Status ms_check_status_ = (expr);                             \
    if (!ms_check_status_.ok())                                                \
      ::mindspeed::check_failed(__FILE__, __LINE__, #expr,                     \
                                ms_check_status_.to_string());                 \
  } while (0)
