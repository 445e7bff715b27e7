// A child forked after nsimInit shares the parent's device memory mapping and a copy of its
// allocator: every call must refuse with NSIM_ERROR_FORKED_CHILD (frees are no-ops), so the
// child can neither hand out the parent's addresses again nor release the parent's pages.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "check.h"

// Runs body() in a forked child; returns its exit status (body returns the number of failures).
template <typename Body>
static int in_child(Body body) {
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static bool all_bytes(const void* device_ptr, size_t n, unsigned char value) {
  std::vector<unsigned char> host(n);
  if (nsimMemcpy(host.data(), device_ptr, n, NSIM_MEMCPY_DEVICE_TO_HOST) != NSIM_SUCCESS) return false;
  for (unsigned char c : host) {
    if (c != value) return false;
  }
  return true;
}

TEST(a_forked_child_cannot_use_the_parents_device) {
  REQUIRE_OK(nsimInit());
  const size_t small = 4096, large = size_t(64) << 20;  // large: freeing it releases pages
  void *a = nullptr, *b = nullptr;
  REQUIRE_OK(nsimMalloc(0, small, &a));
  REQUIRE_OK(nsimMalloc(0, large, &b));
  REQUIRE_OK(nsimMemset(a, 5, small));
  REQUIRE_OK(nsimMemset(b, 6, large));
  CHECK_EQ(nsimIsForkedChild(), 0);

  const int failures = in_child([&] {
    int bad = 0;
    bad += nsimIsForkedChild() != 1;
    void* c = nullptr;
    bad += nsimMalloc(0, small, &c) != NSIM_ERROR_FORKED_CHILD;
    const std::string msg = nsimGetLastErrorMessage();
    bad += msg.find("nsimMalloc") == std::string::npos;
    bad += msg.find("'spawn'") == std::string::npos;
    bad += msg.find(std::to_string(getppid())) == std::string::npos;
    bad += nsimMemset(a, 7, small) != NSIM_ERROR_FORKED_CHILD;
    int count = 0;
    bad += nsimGetDeviceCount(&count) != NSIM_ERROR_FORKED_CHILD;
    bad += nsimInit() != NSIM_ERROR_FORKED_CHILD;
    bad += nsimFree(a) != NSIM_SUCCESS;  // a no-op: the parent's allocation stays live
    bad += nsimFree(b) != NSIM_SUCCESS;
    return bad;
  });
  CHECK_EQ(failures, 0);
  CHECK(all_bytes(a, small, 5));
  CHECK(all_bytes(b, large, 6));
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimFree(b));
  CHECK_OK(nsimShutdown());
}

TEST(a_forked_child_gets_a_private_runtime_after_shutdown) {
  REQUIRE_OK(nsimInit());
  void* a = nullptr;
  REQUIRE_OK(nsimMalloc(0, 4096, &a));
  REQUIRE_OK(nsimMemset(a, 5, 4096));
  const int failures = in_child([&] {
    int bad = 0;
    bad += nsimShutdown() != NSIM_SUCCESS;
    bad += nsimIsForkedChild() != 0;
    bad += nsimInit() != NSIM_SUCCESS;
    void* c = nullptr;
    bad += nsimMalloc(0, 4096, &c) != NSIM_SUCCESS;
    bad += nsimMemset(c, 7, 4096) != NSIM_SUCCESS;
    bad += !all_bytes(c, 4096, 7);
    nsimShutdown();
    return bad;
  });
  CHECK_EQ(failures, 0);
  CHECK(all_bytes(a, 4096, 5));
  CHECK_OK(nsimFree(a));
  CHECK_OK(nsimShutdown());
}

TEST(a_child_forked_before_init_uses_its_own_runtime) {
  const int failures = in_child([] {
    int bad = nsimIsForkedChild() != 0;
    bad += nsimInit() != NSIM_SUCCESS;
    void* c = nullptr;
    bad += nsimMalloc(0, 4096, &c) != NSIM_SUCCESS;
    bad += nsimFree(c) != NSIM_SUCCESS;
    nsimShutdown();
    return bad;
  });
  CHECK_EQ(failures, 0);
}

NSIM_TEST_MAIN()
