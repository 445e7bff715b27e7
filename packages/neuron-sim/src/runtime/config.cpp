#include "config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "env_registry.h"

namespace nsim {
namespace {

constexpr int kMaxChips = 64;
constexpr uint64_t kMaxTimelineCapacity = 1ull << 26;
// Two reservations (device range and alias) of this size per device must fit the 47-bit
// user address space with room to spare.
constexpr uint64_t kMaxCapacityPerDevice = 1ull << 40;
constexpr uint64_t kMaxTotalCapacity = 1ull << 44;

std::string invalid(const char* var, const char* value, const char* accepted) {
  return std::string("invalid ") + var + "='" + value + "': accepted " + accepted;
}

bool parse_int(const char* s, long long* out) {
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

bool parse_bytes(const char* s, uint64_t* out) {
  errno = 0;
  char* end = nullptr;
  if (!isdigit(static_cast<unsigned char>(*s))) return false;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || end == s) return false;
  int shift = 0;
  if (*end) {
    switch (toupper(static_cast<unsigned char>(*end))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      case 'T': shift = 40; break;
      default: return false;
    }
    ++end;
    if (toupper(static_cast<unsigned char>(*end)) == 'I') ++end;  // accept "Gi"
    if (toupper(static_cast<unsigned char>(*end)) == 'B') ++end;  // and "GB"/"GiB"
    if (*end) return false;
  }
  if (shift && v > (~0ull >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

bool parse_bool(const char* s, bool* out) {
  static const char* const kTrue[] = {"1", "true", "yes", "on"};
  static const char* const kFalse[] = {"0", "false", "no", "off"};
  for (const char* t : kTrue) {
    if (strcasecmp(s, t) == 0) return (*out = true, true);
  }
  for (const char* f : kFalse) {
    if (strcasecmp(s, f) == 0) return (*out = false, true);
  }
  return false;
}

// "0-3", "1,3", "0-1,4": ranges and single ids separated by commas.
bool parse_core_list(const char* s, int total, std::vector<int>* out, std::string* why) {
  std::vector<bool> seen(total, false);
  const char* p = s;
  while (true) {
    long long a = 0, b = 0;
    char* end = nullptr;
    if (!isdigit(static_cast<unsigned char>(*p))) return (*why = "expected a core id", false);
    a = strtoll(p, &end, 10);
    p = end;
    b = a;
    if (*p == '-') {
      ++p;
      if (!isdigit(static_cast<unsigned char>(*p))) {
        return (*why = "expected a core id after '-'", false);
      }
      b = strtoll(p, &end, 10);
      p = end;
    }
    if (b < a) return (*why = "range end before its start", false);
    if (b >= total) {
      *why = "core " + std::to_string(b) + " does not exist (" + std::to_string(total) +
             " logical cores: 0-" + std::to_string(total - 1) + ")";
      return false;
    }
    for (long long c = a; c <= b; ++c) {
      if (seen[c]) return (*why = "core " + std::to_string(c) + " listed twice", false);
      seen[c] = true;
      out->push_back(static_cast<int>(c));
    }
    if (*p == '\0') break;
    if (*p != ',') return (*why = std::string("unexpected character '") + *p + "'", false);
    ++p;
  }
  std::sort(out->begin(), out->end());
  return true;
}

}  // namespace

bool load_config(Config* cfg, std::string* error) {
  const char* v = env_lookup("NEURON_SIM_PROFILE");
  cfg->profile = find_profile(v ? v : "trn2");
  if (!cfg->profile) {
    *error = invalid("NEURON_SIM_PROFILE", v, "trn1, trn2 or trn3");
    return false;
  }

  long long n = 1;
  if ((v = env_lookup("NEURON_SIM_NUM_CHIPS"))) {
    if (!parse_int(v, &n) || n < 1 || n > kMaxChips) {
      *error = invalid("NEURON_SIM_NUM_CHIPS", v, "an integer from 1 to 64");
      return false;
    }
  }
  cfg->num_chips = static_cast<int>(n);

  cfg->lnc = cfg->profile->default_lnc;
  if ((v = env_lookup("NEURON_LOGICAL_NC_CONFIG"))) {
    long long lnc = 0;
    if (!parse_int(v, &lnc) || lnc < 1 || lnc > cfg->profile->max_lnc) {
      std::string accepted = cfg->profile->max_lnc == 1
                                 ? std::string("only 1 for profile ") + cfg->profile->name
                                 : std::string("1 or 2 for profile ") + cfg->profile->name;
      *error = invalid("NEURON_LOGICAL_NC_CONFIG", v, accepted.c_str());
      return false;
    }
    cfg->lnc = static_cast<int>(lnc);
  }
  const int logical_per_chip = cfg->profile->physical_cores_per_chip / cfg->lnc;
  const int total = logical_per_chip * cfg->num_chips;

  cfg->visible_cores.clear();
  if ((v = env_lookup("NEURON_RT_VISIBLE_CORES"))) {
    std::string why;
    if (!parse_core_list(v, total, &cfg->visible_cores, &why)) {
      std::string accepted = "a list of core ids and ranges such as '0-3' or '1,3' over 0-" +
                             std::to_string(total - 1) + " (" + why + ")";
      *error = invalid("NEURON_RT_VISIBLE_CORES", v, accepted.c_str());
      return false;
    }
  } else {
    for (int c = 0; c < total; ++c) cfg->visible_cores.push_back(c);
  }

  cfg->hbm_capacity_override = 0;
  if ((v = env_lookup("NEURON_SIM_HBM_CAPACITY"))) {
    uint64_t bytes = 0;
    if (!parse_bytes(v, &bytes) || bytes < 4096 || bytes > kMaxCapacityPerDevice ||
        bytes * cfg->visible_cores.size() > kMaxTotalCapacity) {
      *error = invalid("NEURON_SIM_HBM_CAPACITY", v,
                       "a byte count from 4096 to 1T per device (16T over all devices) with "
                       "optional K/M/G/T suffix, e.g. 512M");
      return false;
    }
    cfg->hbm_capacity_override = bytes;
  }

  cfg->timeline_enabled = true;
  if ((v = env_lookup("NEURON_SIM_TIMELINE"))) {
    if (!parse_bool(v, &cfg->timeline_enabled)) {
      *error = invalid("NEURON_SIM_TIMELINE", v, "1/0, true/false, yes/no or on/off");
      return false;
    }
  }

  cfg->timeline_capacity = 1u << 20;
  if ((v = env_lookup("NEURON_SIM_TIMELINE_CAPACITY"))) {
    long long cap = 0;
    if (!parse_int(v, &cap) || cap < 1 || static_cast<uint64_t>(cap) > kMaxTimelineCapacity) {
      *error = invalid("NEURON_SIM_TIMELINE_CAPACITY", v, "an integer from 1 to 67108864");
      return false;
    }
    cfg->timeline_capacity = static_cast<uint64_t>(cap);
  }

  cfg->fault_alloc = 0;
  cfg->fault_alloc_run = 1;
  if ((v = env_lookup("NEURON_SIM_FAULT_ALLOC"))) {
    const std::string spec(v);
    const size_t colon = spec.find(':');
    long long nth = 0, run = 1;
    if (!parse_int(spec.substr(0, colon).c_str(), &nth) || nth < 1 ||
        (colon != std::string::npos &&
         (!parse_int(spec.substr(colon + 1).c_str(), &run) || run < 1))) {
      *error = invalid("NEURON_SIM_FAULT_ALLOC", v,
                       "N or N:K with N >= 1 (the first failing allocation) and K >= 1 (how many "
                       "consecutive allocations fail)");
      return false;
    }
    cfg->fault_alloc = static_cast<uint64_t>(nth);
    cfg->fault_alloc_run = static_cast<uint64_t>(run);
  }

  cfg->fault_kernels.clear();
  if ((v = env_lookup("NEURON_SIM_FAULT_KERNEL"))) {
    const std::string spec(v);
    size_t start = 0;
    while (start <= spec.size()) {
      size_t end = spec.find(',', start);
      if (end == std::string::npos) end = spec.size();
      const std::string item = spec.substr(start, end - start);
      const size_t eq = item.rfind('=');
      std::string name = eq == std::string::npos ? item : item.substr(0, eq);
      long long count = 1;
      if (name.empty() || (eq != std::string::npos &&
                           (!parse_int(item.substr(eq + 1).c_str(), &count) || count == 0 ||
                            count < -1 || count > 1000000000))) {
        *error = invalid("NEURON_SIM_FAULT_KERNEL", v,
                         "a comma-separated list of NAME or NAME=COUNT (COUNT >= 1, or -1 for "
                         "every launch), e.g. 'aten::add.Tensor=2'");
        return false;
      }
      cfg->fault_kernels.emplace_back(name, static_cast<int>(count));
      start = end + 1;
    }
  }

  cfg->fault_lost_device = -1;
  cfg->fault_lost_after = 0;
  if ((v = env_lookup("NEURON_SIM_FAULT_DEVICE_LOST"))) {
    const std::string spec(v);
    const size_t at = spec.find('@');
    long long dev = -1, after = 1;
    const bool ok = parse_int(spec.substr(0, at).c_str(), &dev) && dev >= 0 &&
                    dev < static_cast<long long>(cfg->visible_cores.size()) &&
                    (at == std::string::npos ||
                     (parse_int(spec.substr(at + 1).c_str(), &after) && after >= 1));
    if (!ok) {
      std::string accepted = "DEVICE or DEVICE@N with DEVICE in 0.." +
                             std::to_string(cfg->visible_cores.size() - 1) +
                             " and N >= 1 (the launch at which it is lost)";
      *error = invalid("NEURON_SIM_FAULT_DEVICE_LOST", v, accepted.c_str());
      return false;
    }
    cfg->fault_lost_device = static_cast<int>(dev);
    cfg->fault_lost_after = static_cast<uint64_t>(after);
  }
  return true;
}

}  // namespace nsim
