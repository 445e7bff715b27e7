#include "tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "env.h"

namespace neuron_ccl {
namespace {

constexpr uint32_t kFrameMagic = 0x4e43544cu;  // "NCTL"
constexpr uint32_t kHelloMagic = 0x4e434831u;
using Clock = std::chrono::steady_clock;

std::string sys_error(const std::string& what) { return what + ": " + std::strerror(errno); }

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

void tune(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // small frames must not wait for Nagle
}

// Blocking exchange of the connection handshake with a deadline.
bool io_all(int fd, void* buf, size_t n, bool write, Clock::time_point deadline) {
  char* p = static_cast<char*>(buf);
  while (n) {
    pollfd pfd{fd, short(write ? POLLOUT : POLLIN), 0};
    const int ms = int(std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
    if (poll(&pfd, 1, ms) <= 0) return false;
    const ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k <= 0) {
      if (k < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      return false;
    }
    p += k;
    n -= size_t(k);
  }
  return true;
}

std::string advertised_address(bool loopback) {
  if (loopback) return "127.0.0.1";
  const std::string forced = env_string("NEURON_CCL_TCP_ADDR");
  if (!forced.empty()) return forced;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string out;
  if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
    for (addrinfo* a = res; a; a = a->ai_next) {
      char buf[INET_ADDRSTRLEN];
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr, buf, sizeof buf);
      out = buf;
      if (out.rfind("127.", 0) != 0) break;  // prefer an address other hosts can reach
    }
    freeaddrinfo(res);
  }
  if (out.empty() || out.rfind("127.", 0) == 0) {
    throw Error(Error::kSystem, std::string("neuron_ccl: TCP transport: host name '") + host +
                                    "' does not resolve to an address other hosts can reach; set "
                                    "NEURON_CCL_TCP_ADDR to this host's address");
  }
  return out;
}

}  // namespace

TcpTransport::TcpTransport(KVStore& store, const std::string& prefix, int rank, int size, bool loopback,
                           std::chrono::milliseconds timeout, Context context)
    : rank_(rank), size_(size), timeout_(timeout), context_(std::move(context)), conns_(size) {
  const std::string where = "neuron_ccl: TCP transport, rank " + std::to_string(rank) + ": ";
  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) throw Error(Error::kSystem, sys_error(where + "socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, size + 8) != 0 ||
      getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string msg = sys_error(where + "listening socket");
    close(lfd);
    throw Error(Error::kSystem, msg);
  }
  const std::string me = advertised_address(loopback) + " " + std::to_string(ntohs(addr.sin_port));
  store.set(prefix + "tcp/" + std::to_string(rank), me);
  const auto deadline = Clock::now() + timeout_;
  try {
    // Lower ranks are connected to, higher ranks accepted: each pair gets exactly one
    // connection, and a connect completes through the listen backlog, so no ordering deadlock.
    for (int r = 0; r < rank; ++r) {
      std::istringstream in(store.get(prefix + "tcp/" + std::to_string(r)));
      std::string host;
      int port = 0;
      in >> host >> port;
      sockaddr_in peer{};
      peer.sin_family = AF_INET;
      peer.sin_port = htons(uint16_t(port));
      if (inet_pton(AF_INET, host.c_str(), &peer.sin_addr) != 1)
        throw Error(Error::kSystem, where + "rank " + std::to_string(r) + " published a bad address '" + host + "'");
      int fd = -1;
      while (true) {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof peer) == 0) break;
        const std::string err = std::strerror(errno);
        if (fd >= 0) close(fd);
        if (Clock::now() >= deadline)
          throw Error(Error::kTimeout, where + "cannot connect to rank " + std::to_string(r) + " at " + host + ":" +
                                           std::to_string(port) + ": " + err);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      const uint32_t hello[2] = {kHelloMagic, uint32_t(rank)};
      if (!io_all(fd, const_cast<uint32_t*>(hello), sizeof hello, true, deadline)) {
        close(fd);
        throw Error(Error::kSystem, where + "handshake with rank " + std::to_string(r) + " failed");
      }
      conns_[r].fd = fd;
    }
    for (int accepted = rank + 1; accepted < size; ++accepted) {
      pollfd pfd{lfd, POLLIN, 0};
      const int ms = int(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count()));
      if (poll(&pfd, 1, ms) <= 0)
        throw Error(Error::kTimeout, where + "timed out waiting for connections from ranks " +
                                         std::to_string(rank + 1) + ".." + std::to_string(size - 1));
      const int fd = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) throw Error(Error::kSystem, sys_error(where + "accept"));
      uint32_t hello[2] = {0, 0};
      if (!io_all(fd, hello, sizeof hello, false, deadline) || hello[0] != kHelloMagic ||
          int(hello[1]) <= rank || int(hello[1]) >= size || conns_[hello[1]].fd >= 0) {
        close(fd);  // a stray connection: not one of ours
        --accepted;
        continue;
      }
      conns_[hello[1]].fd = fd;
    }
  } catch (...) {
    close(lfd);
    for (auto& c : conns_)
      if (c.fd >= 0) close(c.fd);
    throw;
  }
  close(lfd);
  for (auto& c : conns_) {
    if (c.fd < 0) continue;
    tune(c.fd);
    set_nonblocking(c.fd);
  }
}

TcpTransport::~TcpTransport() {
  for (auto& c : conns_)
    if (c.fd >= 0) close(c.fd);
}

void TcpTransport::fail_peer(int peer, const char* what) {
  // A peer that failed first sent an abort frame before closing: read what is still buffered,
  // so that its reason (read_ready throws it) is reported rather than a bare broken connection.
  Conn& c = conns_[peer];
  if (c.fd >= 0) {
    const std::string reason = c.close_reason;
    c.closed = false;
    read_ready(peer);
    c.closed = true;
    if (!reason.empty()) c.close_reason = reason;
  }
  throw Error(Error::kPeerFailure, "neuron_ccl: rank " + std::to_string(peer) + " " + conns_[peer].close_reason +
                                       " while rank " + std::to_string(rank_) + " waited for it in " + context_() +
                                       " (" + what + ", TCP transport)");
}

// Reads what is available on one connection and queues completed frames.
void TcpTransport::read_ready(int peer) {
  Conn& c = conns_[peer];
  while (!c.closed) {
    char* dst;
    size_t want;
    if (!c.in_payload) {
      dst = reinterpret_cast<char*>(&c.hdr) + c.hdr_got;
      want = sizeof(FrameHeader) - c.hdr_got;
    } else {
      dst = c.payload.data() + c.pay_got;
      want = c.payload.size() - c.pay_got;
    }
    if (want) {
      const ssize_t k = ::recv(c.fd, dst, want, 0);
      if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        c.closed = true;
        c.close_reason = k == 0 ? "exited (its connection closed)"
                                : std::string("exited or became unreachable (") + std::strerror(errno) + ")";
        return;
      }
      if (k < 0) return;  // nothing more right now
      if (!c.in_payload) c.hdr_got += size_t(k);
      else c.pay_got += size_t(k);
      if (size_t(k) < want) continue;
    }
    if (!c.in_payload) {
      if (c.hdr.magic != kFrameMagic) {
        c.closed = true;
        c.close_reason = "sent a corrupt frame";
        return;
      }
      c.in_payload = true;
      c.payload.assign(c.hdr.bytes, 0);
      c.pay_got = 0;
      if (c.hdr.bytes) continue;
    }
    Frame f{c.hdr, std::move(c.payload)};
    c.payload.clear();
    c.in_payload = false;
    c.hdr_got = 0;
    if (f.h.kind == FrameHeader::kAbort) {
      aborted_ = true;
      throw Error(Error::kAborted, "neuron_ccl: " + context_() + " on rank " + std::to_string(rank_) +
                                       " aborted: rank " + std::to_string(peer) +
                                       " reported: " + std::string(f.payload.begin(), f.payload.end()));
    }
    (f.h.kind == FrameHeader::kPointToPoint ? c.p2p : c.collective).push_back(std::move(f));
  }
}

// Polls every connection (reading into the queues) until done() or, when `write_fd` >= 0,
// until that socket is writable. Fails when `awaited` closed, on abort frames and at the
// deadline.
template <class Done>
void TcpTransport::progress(Done done, int awaited, int write_fd, const char* what) {
  const auto deadline = Clock::now() + timeout_;
  std::vector<pollfd> fds;
  std::vector<int> who;
  while (!done()) {
    if (awaited >= 0 && conns_[awaited].closed) fail_peer(awaited, what);
    fds.clear();
    who.clear();
    for (int r = 0; r < size_; ++r) {
      if (conns_[r].fd < 0 || conns_[r].closed) continue;
      fds.push_back({conns_[r].fd, short(POLLIN | (conns_[r].fd == write_fd ? POLLOUT : 0)), 0});
      who.push_back(r);
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      throw Error(Error::kTimeout, "neuron_ccl: " + context_() + " timed out after " +
                                       std::to_string(timeout_.count()) + " ms on rank " + std::to_string(rank_) +
                                       " waiting for rank(s) [" + std::to_string(awaited) + "] (" + what +
                                       ", TCP transport); they did not reach the same collective. Raise the "
                                       "limit with init_process_group(timeout=...) or NEURON_CCL_TIMEOUT_MS");
    }
    const int k = poll(fds.data(), fds.size(), int(std::min<int64_t>(left, 100)));
    if (k < 0 && errno != EINTR) throw Error(Error::kSystem, sys_error("neuron_ccl: poll"));
    for (size_t i = 0; k > 0 && i < fds.size(); ++i) {
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) read_ready(who[i]);
      if (fds[i].fd == write_fd && (fds[i].revents & POLLOUT)) return;  // the caller writes more
    }
  }
}

void TcpTransport::check_peer(int peer) const {
  if (peer < 0 || peer >= size_ || peer == rank_ || conns_[peer].fd < 0)
    throw std::logic_error("neuron_ccl: TCP transfer between rank " + std::to_string(rank_) + " and rank " +
                           std::to_string(peer) + ", which has no connection");
}

void TcpTransport::send(int peer, FrameHeader h, const void* data, size_t bytes, const char* what) {
  check_peer(peer);
  Conn& c = conns_[peer];
  h.magic = kFrameMagic;
  h.bytes = bytes;
  h.from = rank_;
  const char* parts[2] = {reinterpret_cast<const char*>(&h), static_cast<const char*>(data)};
  const size_t sizes[2] = {sizeof h, bytes};
  for (int part = 0; part < 2; ++part) {
    size_t done = 0;
    while (done < sizes[part]) {
      if (c.closed) fail_peer(peer, what);
      const ssize_t k = ::send(c.fd, parts[part] + done, sizes[part] - done, MSG_NOSIGNAL);
      if (k > 0) {
        done += size_t(k);
        continue;
      }
      if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        c.closed = true;
        c.close_reason = std::string("exited or became unreachable (") + std::strerror(errno) + ")";
        fail_peer(peer, what);
      }
      // The peer's receive window is full: read our own incoming data meanwhile, so that a
      // peer blocked sending to us can make progress and drain its side.
      // progress() returns as soon as the socket is writable again.
      progress([] { return false; }, peer, c.fd, what);
    }
  }
}

FrameHeader TcpTransport::recv(int peer, int32_t kind, std::vector<char>* payload, const char* what) {
  check_peer(peer);
  Conn& c = conns_[peer];
  auto& q = kind == FrameHeader::kPointToPoint ? c.p2p : c.collective;
  progress([&] { return !q.empty(); }, peer, -1, what);
  Frame f = std::move(q.front());
  q.pop_front();
  *payload = std::move(f.payload);
  return f.h;
}

void TcpTransport::abort_all(const std::string& message) noexcept {
  if (aborted_) return;
  aborted_ = true;
  FrameHeader h;
  h.magic = kFrameMagic;
  h.kind = FrameHeader::kAbort;
  h.bytes = message.size();
  h.from = rank_;
  for (int r = 0; r < size_; ++r) {
    Conn& c = conns_[r];
    if (c.fd < 0 || c.closed) continue;
    // Non-blocking and best effort: a frame cut short by a full window still ends in the
    // peer seeing the connection close, which fails it just as well.
    const std::string frame = std::string(reinterpret_cast<const char*>(&h), sizeof h) + message;
    (void)!::send(c.fd, frame.data(), frame.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    shutdown(c.fd, SHUT_WR);
  }
}

}  // namespace neuron_ccl
