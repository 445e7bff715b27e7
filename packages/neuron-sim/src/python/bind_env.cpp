// The registry of environment variables the runtime reads.
#include <string>

#include "binding.h"

namespace nsim_py {

namespace {

const char* env_type_name(nsimEnvType type) {
  switch (type) {
    case NSIM_ENV_STRING: return "string";
    case NSIM_ENV_INT: return "int";
    case NSIM_ENV_BOOL: return "bool";
    case NSIM_ENV_CORE_LIST: return "core_list";
    case NSIM_ENV_BYTES: return "bytes";
  }
  return "unknown";
}

}  // namespace

void bind_env(py::module_& m) {
  m.def("env_registry", [] {
    py::list out;
    for (size_t i = 0; i < nsimEnvVarCount(); ++i) {
      const nsimEnvVar* v = nsimEnvVarGet(i);
      if (!v) continue;
      out.append(py::make_tuple(std::string(v->name), env_type_name(v->type),
                                std::string(v->default_value ? v->default_value : ""),
                                std::string(v->meaning ? v->meaning : "")));
    }
    return out;
  });
}

}  // namespace nsim_py
