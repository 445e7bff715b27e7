// Every environment variable neuron_ccl reads, in one table (read at use time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace neuron_ccl {

struct EnvVar {
  const char* name;
  const char* type;
  const char* default_value;
  const char* meaning;
};

size_t env_var_count();
const EnvVar& env_var(size_t i);
// Value of a registered variable, or its default. Throws on unregistered names (a typo guard).
std::string env_string(const char* name);
int64_t env_int(const char* name);

}  // namespace neuron_ccl
