#include "peer_memory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include <neuron_sim/neuron_sim.h>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {
namespace {

std::string sys_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

struct MapsEntry {
  uintptr_t start = 0, end = 0;
  uint64_t offset = 0;
  uint64_t inode = 0;
};

bool find_mapping(uintptr_t addr, MapsEntry* out) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    unsigned long long s, e, off, ino;
    char perms[8], dev[16];
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %15s %llu", &s, &e, perms, &off, dev, &ino) != 6)
      continue;
    if (addr >= s && addr < e) {
      *out = {uintptr_t(s), uintptr_t(e), uint64_t(off), uint64_t(ino)};
      return true;
    }
  }
  return false;
}

int fd_with_inode(uint64_t inode) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* endp = nullptr;
    const long fd = std::strtol(e->d_name, &endp, 10);
    if (*endp != '\0' || fd == dirfd(d)) continue;
    struct stat st;
    if (fstat(int(fd), &st) == 0 && uint64_t(st.st_ino) == inode && S_ISREG(st.st_mode)) {
      found = int(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

void LocalMemory::discover() {
  int count = 0;
  if (nsimInit() != NSIM_SUCCESS || nsimGetDeviceCount(&count) != NSIM_SUCCESS) {
    throw Error(Error::kSystem, std::string("neuron_ccl: neuron_sim failed to initialise: ") +
                                    nsimGetLastErrorMessage());
  }
  regions_.clear();
  for (int d = 0; d < count; ++d) {
    // A small allocation gives an address inside the device's alias range; its mapping in
    // /proc/self/maps names the memfd inode and the file offset of the range start.
    void* probe = nullptr;
    if (nsimMalloc(d, NSIM_ALIGNMENT, &probe) != NSIM_SUCCESS) {
      throw Error(Error::kSystem, std::string("neuron_ccl: probing device ") + std::to_string(d) +
                                      " memory failed: " + nsimGetLastErrorMessage());
    }
    const auto alias = reinterpret_cast<uintptr_t>(nsimDeviceToHostUnchecked(probe));
    nsimFree(probe);
    MapsEntry m;
    if (!alias || !find_mapping(alias, &m) || m.inode == 0) {
      throw Error(Error::kSystem, "neuron_ccl: cannot find the memfd behind device " +
                                      std::to_string(d) + " memory in /proc/self/maps");
    }
    const int fd = fd_with_inode(m.inode);
    if (fd < 0) {
      throw Error(Error::kSystem, "neuron_ccl: no open descriptor for the memfd of device " +
                                      std::to_string(d) + " (inode " + std::to_string(m.inode) + ")");
    }
    struct stat st;
    if (fstat(fd, &st) != 0) throw Error(Error::kSystem, sys_error("neuron_ccl: fstat of device memfd"));
    regions_.push_back({d, fd, m.start - m.offset, uint64_t(st.st_size)});
  }
}

void* LocalMemory::alias(const void* ptr) { return nsimDeviceToHostUnchecked(ptr); }

RemoteRef LocalMemory::locate(const void* ptr, size_t bytes, const char* what) const {
  nsimPointerAttributes attr;
  nsimPointerGetAttributes(ptr, &attr);
  if (attr.type != NSIM_MEMORY_DEVICE) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "neuron_ccl: %s buffer %p is not live neuron_sim device memory (type %d); "
                  "collectives take device buffers ('neuron' tensors, nsimMalloc)",
                  what, ptr, int(attr.type));
    throw Error(Error::kInvalidArgument, buf);
  }
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  const auto base = reinterpret_cast<uintptr_t>(attr.base);
  if (p + bytes > base + attr.size) {
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "neuron_ccl: %s buffer %p of %zu bytes overruns its allocation (%p, %zu bytes)",
                  what, ptr, bytes, attr.base, attr.size);
    throw Error(Error::kInvalidArgument, buf);
  }
  const auto a = reinterpret_cast<uintptr_t>(alias(ptr));
  for (const auto& r : regions_) {
    if (r.device == attr.device) return {int32_t(r.device), uint64_t(a - r.alias_base)};
  }
  throw Error(Error::kInvalidArgument,
              std::string("neuron_ccl: ") + what + " buffer is on device " +
                  std::to_string(attr.device) + ", unknown to this communicator");
}

PeerMemory::~PeerMemory() {
  for (auto& [key, m] : maps_) {
    if (m.base) munmap(m.base, m.size);
    if (m.fd >= 0) close(m.fd);
  }
}

void PeerMemory::add_peer(int rank, int pid, const std::vector<std::pair<int, uint64_t>>& fds) {
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t d = 0; d < fds.size(); ++d) {
    Mapping m;
    m.pid = pid;
    m.remote_fd = fds[d].first;
    m.size = fds[d].second;
    maps_[{rank, int(d)}] = m;
  }
}

char* PeerMemory::resolve(int rank, const RemoteRef& ref, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = maps_.find({rank, int(ref.device)});
  if (it == maps_.end()) {
    throw Error(Error::kInvalidArgument, "neuron_ccl: rank " + std::to_string(rank) +
                                             " published a buffer on unknown device " +
                                             std::to_string(ref.device));
  }
  Mapping& m = it->second;
  if (!m.base) {
    const std::string path = "/proc/" + std::to_string(m.pid) + "/fd/" + std::to_string(m.remote_fd);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      throw Error(Error::kSystem,
                  sys_error("neuron_ccl: opening rank " + std::to_string(rank) +
                            "'s device memory (" + path +
                            ") failed; ranks on one host must run as the same user and may not "
                            "be in separate PID namespaces"));
    }
    void* p = mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      close(fd);
      throw Error(Error::kSystem, sys_error("neuron_ccl: mapping rank " + std::to_string(rank) +
                                            "'s device memory"));
    }
    m.fd = fd;
    m.base = static_cast<char*>(p);
  }
  if (ref.offset + bytes > m.size) {
    throw Error(Error::kInvalidArgument, "neuron_ccl: rank " + std::to_string(rank) +
                                             " published a buffer outside its device memory");
  }
  return m.base + ref.offset;
}

}  // namespace neuron_ccl
