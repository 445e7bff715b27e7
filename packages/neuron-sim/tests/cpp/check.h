// Minimal test harness for the runtime's ctest executables: TEST cases registered at static
// initialisation, CHECK macros that report the failing expression and the runtime's last error.
// Every case starts from a clean environment (all registered variables unset) and a shut-down
// runtime.
#ifndef NEURON_SIM_TESTS_CHECK_H
#define NEURON_SIM_TESTS_CHECK_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "neuron_sim/neuron_sim.h"

namespace check {

struct Case {
  const char* name;
  void (*fn)();
};
inline std::vector<Case>& cases() {
  static std::vector<Case> c;
  return c;
}
inline int& failures() {
  static int f = 0;
  return f;
}
struct Registrar {
  Registrar(const char* name, void (*fn)()) { cases().push_back({name, fn}); }
};

inline void fail(const char* file, int line, const std::string& what) {
  fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
  ++failures();
}

inline std::string to_text(const std::string& s) { return "'" + s + "'"; }
inline std::string to_text(const char* s) { return s ? to_text(std::string(s)) : "NULL"; }
inline std::string to_text(const void* p) {
  char buf[32];
  snprintf(buf, sizeof buf, "%p", p);
  return buf;
}
template <typename T>
std::string to_text(const T& v) {
  if constexpr (std::is_enum_v<T>) {
    return std::to_string(static_cast<long long>(v));
  } else {
    return std::to_string(v);
  }
}

inline void reset_environment() {
  nsimShutdown();
  for (size_t i = 0; i < nsimEnvVarCount(); ++i) unsetenv(nsimEnvVarGet(i)->name);
}

inline int run_all() {
  int failed_cases = 0;
  for (const Case& c : cases()) {
    reset_environment();
    const int before = failures();
    c.fn();
    const bool ok = failures() == before;
    failed_cases += !ok;
    printf("[%s] %s\n", ok ? "  OK  " : " FAIL ", c.name);
    fflush(stdout);
  }
  reset_environment();
  printf("%zu cases, %d failed\n", cases().size(), failed_cases);
  return failed_cases ? 1 : 0;
}

}  // namespace check

#define TEST(name)                                              \
  static void name();                                           \
  static check::Registrar name##_registrar(#name, &name);       \
  static void name()

#define CHECK(cond)                                                      \
  do {                                                                   \
    if (!(cond)) check::fail(__FILE__, __LINE__, "CHECK(" #cond ")");    \
  } while (0)

// Stops the current case: later steps would only cascade.
#define REQUIRE(cond)                                                    \
  do {                                                                   \
    if (!(cond)) {                                                       \
      check::fail(__FILE__, __LINE__, "REQUIRE(" #cond ")");             \
      return;                                                            \
    }                                                                    \
  } while (0)

#define CHECK_OK(expr)                                                                   \
  do {                                                                                   \
    nsimError check_err_ = (expr);                                                       \
    if (check_err_ != NSIM_SUCCESS)                                                      \
      check::fail(__FILE__, __LINE__,                                                    \
                  std::string(#expr " returned ") + nsimGetErrorName(check_err_) + ": " + \
                      nsimGetLastErrorMessage());                                        \
  } while (0)

#define REQUIRE_OK(expr)                                                                 \
  do {                                                                                   \
    nsimError check_err_ = (expr);                                                       \
    if (check_err_ != NSIM_SUCCESS) {                                                    \
      check::fail(__FILE__, __LINE__,                                                    \
                  std::string(#expr " returned ") + nsimGetErrorName(check_err_) + ": " + \
                      nsimGetLastErrorMessage());                                        \
      return;                                                                            \
    }                                                                                    \
  } while (0)

#define CHECK_ERR(expr, code)                                                              \
  do {                                                                                     \
    nsimError check_err_ = (expr);                                                         \
    if (check_err_ != (code))                                                              \
      check::fail(__FILE__, __LINE__,                                                      \
                  std::string(#expr " returned ") + nsimGetErrorName(check_err_) +         \
                      ", expected " + nsimGetErrorName(code) + " (message: " +             \
                      nsimGetLastErrorMessage() + ")");                                    \
  } while (0)

#define CHECK_CONTAINS(text, needle)                                                        \
  do {                                                                                      \
    std::string check_text_ = (text);                                                       \
    std::string check_needle_ = (needle);                                                   \
    if (check_text_.find(check_needle_) == std::string::npos)                               \
      check::fail(__FILE__, __LINE__,                                                       \
                  "'" + check_text_ + "' does not contain '" + check_needle_ + "'");        \
  } while (0)

#define CHECK_EQ(a, b)                                                                   \
  do {                                                                                   \
    auto check_a_ = (a);                                                                 \
    auto check_b_ = (b);                                                                 \
    if (!(check_a_ == check_b_))                                                         \
      check::fail(__FILE__, __LINE__,                                                    \
                  std::string(#a " == " #b ": ") + check::to_text(check_a_) + " vs " +  \
                      check::to_text(check_b_));                                         \
  } while (0)

#define CHECK_NEAR(a, b, rel)                                                            \
  do {                                                                                   \
    double check_a_ = (a), check_b_ = (b);                                               \
    if (!(std::fabs(check_a_ - check_b_) <= (rel) * std::fmax(std::fabs(check_b_), 1e-300))) \
      check::fail(__FILE__, __LINE__,                                                    \
                  std::string(#a " ~= " #b ": ") + std::to_string(check_a_) + " vs " +   \
                      std::to_string(check_b_));                                         \
  } while (0)

#define NSIM_TEST_MAIN() \
  int main() { return check::run_all(); }

#endif
