#include "names.h"

#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>

#include "error.h"
#include "runtime.h"

namespace nsim {
namespace {

struct NameTable {
  std::mutex mu;
  std::unordered_map<std::string, uint32_t> ids;
  std::deque<std::string> names;  // deque: element addresses stay stable as it grows
};

NameTable& table() {
  static NameTable* t = new NameTable();  // never destroyed: names outlive static teardown
  return *t;
}

}  // namespace

uint32_t intern_name(const char* name) {
  NameTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  auto it = t.ids.find(name);
  if (it != t.ids.end()) return it->second;
  const uint32_t id = static_cast<uint32_t>(t.names.size());
  t.names.emplace_back(name);
  t.ids.emplace(t.names.back(), id);
  return id;
}

const char* name_of(uint32_t id) {
  NameTable& t = table();
  std::lock_guard<std::mutex> lock(t.mu);
  return id < t.names.size() ? t.names[id].c_str() : nullptr;
}

}  // namespace nsim

extern "C" {

NSIM_API nsimError nsimRegisterName(const char* name, uint32_t* name_id) {
  if (!nsim::runtime_or_error("nsimRegisterName")) return nsim::runtime_unavailable();
  if (!name || !name_id) {
    return nsim::set_error(NSIM_ERROR_INVALID_VALUE,
                           "nsimRegisterName: name and name_id must not be NULL");
  }
  *name_id = nsim::intern_name(name);
  return NSIM_SUCCESS;
}

NSIM_API const char* nsimGetName(uint32_t name_id) { return nsim::name_of(name_id); }

}  // extern "C"
