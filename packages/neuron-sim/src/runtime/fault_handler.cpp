#include "fault_handler.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "address_space.h"
#include "runtime.h"

namespace nsim {
namespace {

struct sigaction g_previous_segv, g_previous_bus;
bool g_installed = false;

// Async-signal-safe output: a fixed buffer filled by hand, flushed with write(2).
struct Writer {
  char buf[1024];
  size_t len = 0;
  void str(const char* s) {
    while (*s && len < sizeof buf) buf[len++] = *s++;
  }
  void dec(uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n && len < sizeof buf) buf[len++] = tmp[--n];
  }
  void hex(uint64_t v) {
    char tmp[16];
    int n = 0;
    do {
      tmp[n++] = "0123456789abcdef"[v & 15];
      v >>= 4;
    } while (v);
    str("0x");
    while (n && len < sizeof buf) buf[len++] = tmp[--n];
  }
  void flush() {
    size_t off = 0;
    while (off < len) {
      ssize_t w = write(STDERR_FILENO, buf + off, len - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
  }
};

void describe(uintptr_t addr, int device, uint64_t offset) {
  Writer w;
  w.str("neuron_sim: host access to device memory at ");
  w.hex(addr);
  w.str(" on neuron device ");
  w.dec(static_cast<uint64_t>(device));
  w.str(": ");
  Runtime* rt = g_runtime.load(std::memory_order_acquire);
  DeviceAllocator::Block b;
  bool busy = false;
  if (rt && device < static_cast<int>(rt->devices.size()) &&
      rt->devices[device]->allocator->try_find(offset, &b, &busy)) {
    w.str("inside allocation base=");
    w.hex(addr - (offset - b.offset));
    w.str(" size=");
    w.dec(b.size);
    w.str(" (offset ");
    w.dec(offset - b.offset);
    w.str(")");
  } else if (busy) {
    w.str("the allocator was busy, so the allocation touched cannot be named");
  } else {
    w.str("address is not inside any live allocation (unallocated device memory)");
  }
  w.str("\nneuron_sim: device pointers cannot be dereferenced on the host; copy to host memory "
        "first (nsimMemcpy / tensor.cpu())\n");
  w.flush();
}

// Calls the handler that was installed before ours; false if there was none to call.
bool call_previous(int sig, siginfo_t* info, void* context) {
  const struct sigaction& prev = sig == SIGBUS ? g_previous_bus : g_previous_segv;
  if (prev.sa_flags & SA_SIGINFO) {
    if (!prev.sa_sigaction) return false;
    prev.sa_sigaction(sig, info, context);
    return true;
  }
  if (prev.sa_handler == SIG_DFL || prev.sa_handler == SIG_IGN || !prev.sa_handler) return false;
  prev.sa_handler(sig);
  return true;
}

// Loop breakers: a handler we chain to may return without resolving the fault, or re-raise
// the signal while ours is installed again (faulthandler enabled after nsimInit does both).
constexpr uintptr_t kNoAddress = ~uintptr_t(0);
std::atomic<uintptr_t> g_last_chained{kNoAddress};
std::atomic<bool> g_raised_chained{false};

void die(int sig) {
  signal(sig, SIG_DFL);
  raise(sig);  // delivered with the default action once this handler returns
}

void on_fault(int sig, siginfo_t* info, void* context) {
  // si_addr is meaningful only for faults raised by the kernel (si_code > 0), not kill/raise.
  if (info->si_code <= 0) {
    if (g_raised_chained.exchange(true) || !call_previous(sig, info, context)) die(sig);
    return;
  }
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  uint64_t offset = 0;
  const int device = device_of(address_view(), addr, &offset);
  if (device >= 0) {
    describe(addr, device, offset);
    // The previous handler (Python's faulthandler, say) may add its own report, e.g. the
    // Python traceback of the access. Whatever it does, the process then dies: returning
    // re-executes the access, which now takes the default action.
    call_previous(sig, info, context);
    signal(sig, SIG_DFL);
    return;
  }
  // The same fault coming back means the previous handler returned without resolving it.
  if (g_last_chained.exchange(addr) == addr || !call_previous(sig, info, context)) {
    signal(sig, SIG_DFL);  // returning re-executes the access, which now kills the process
  }
}

}  // namespace

void install_fault_handler() {
  if (g_installed) return;
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fault;
  sigemptyset(&sa.sa_mask);
  // SA_ONSTACK uses an alternate stack where the thread has one (Python's faulthandler
  // installs one), so stack overflows still reach the previous handler.
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, &g_previous_segv);
  sigaction(SIGBUS, &sa, &g_previous_bus);
  g_installed = true;
}

void uninstall_fault_handler() {
  if (!g_installed) return;
  // Restore the previous handlers only where ours is still the one installed.
  struct sigaction cur;
  if (sigaction(SIGSEGV, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
      cur.sa_sigaction == on_fault) {
    sigaction(SIGSEGV, &g_previous_segv, nullptr);
  }
  if (sigaction(SIGBUS, nullptr, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
      cur.sa_sigaction == on_fault) {
    sigaction(SIGBUS, &g_previous_bus, nullptr);
  }
  g_installed = false;
}

}  // namespace nsim
