// A minimal TCP key-value store for bootstrapping without PyTorch: one server thread (on the
// rank that passes is_server) keeps the map; get() requests wait on the server until the key
// is set. Frame: [u8 kind 'S'|'G'][u32 key length][u32 value length][key][value].
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "neuron_ccl/neuron_ccl.h"

namespace neuron_ccl {
namespace {

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n) {
    const ssize_t k = ::send(fd, c, n, MSG_NOSIGNAL);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return false;
    }
    c += k;
    n -= size_t(k);
  }
  return true;
}
bool read_all(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n) {
    const ssize_t k = ::recv(fd, c, n, 0);
    if (k <= 0) {
      if (k < 0 && errno == EINTR) continue;
      return false;
    }
    c += k;
    n -= size_t(k);
  }
  return true;
}

class TcpServer {
 public:
  explicit TcpServer(int listen_fd) : listen_fd_(listen_fd) {
    if (pipe(wake_) != 0) throw Error(Error::kSystem, "neuron_ccl TCP store: pipe failed");
    thread_ = std::thread([this] { loop(); });
  }
  ~TcpServer() {
    stop_ = true;
    char c = 0;
    (void)!write(wake_[1], &c, 1);
    thread_.join();
    for (int fd : clients_) close(fd);
    close(listen_fd_);
    close(wake_[0]);
    close(wake_[1]);
  }

 private:
  void reply(int fd, const std::string& v) {
    const uint32_t n = uint32_t(v.size());
    write_all(fd, &n, 4);
    write_all(fd, v.data(), v.size());
  }
  bool handle(int fd) {
    uint8_t kind;
    uint32_t kl, vl;
    if (!read_all(fd, &kind, 1) || !read_all(fd, &kl, 4) || !read_all(fd, &vl, 4)) return false;
    std::string k(kl, '\0'), v(vl, '\0');
    if (!read_all(fd, k.data(), kl) || !read_all(fd, v.data(), vl)) return false;
    if (kind == 'S') {
      data_[k] = v;
      for (auto it = waiting_.begin(); it != waiting_.end();) {
        if (it->second == k) {
          reply(it->first, v);
          it = waiting_.erase(it);
        } else {
          ++it;
        }
      }
      const uint32_t ok = 0;
      return write_all(fd, &ok, 4);
    }
    auto it = data_.find(k);
    if (it != data_.end()) {
      reply(fd, it->second);
    } else {
      waiting_.emplace_back(fd, k);
    }
    return true;
  }
  void loop() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
      for (int c : clients_) fds.push_back({c, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 1000) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        const int c = accept(listen_fd_, nullptr, nullptr);
        if (c >= 0) {
          int one = 1;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          clients_.push_back(c);
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        if (!handle(fds[i].fd)) {
          close(fds[i].fd);
          clients_.erase(std::find(clients_.begin(), clients_.end(), fds[i].fd));
        }
      }
    }
  }
  int listen_fd_;
  int wake_[2];
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<int> clients_;
  std::map<std::string, std::string> data_;
  std::vector<std::pair<int, std::string>> waiting_;
};

class TcpStore : public KVStore {
 public:
  TcpStore(const std::string& host, int port, bool is_server, std::chrono::milliseconds timeout)
      : timeout_(timeout) {
    if (is_server) {
      const int l = socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(uint16_t(port));
      a.sin_addr.s_addr = htonl(INADDR_ANY);
      if (bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(l, 128) != 0) {
        const std::string e = std::strerror(errno);
        close(l);
        throw Error(Error::kSystem, "neuron_ccl TCP store: cannot listen on port " + std::to_string(port) + ": " + e +
                                        " (pick another port)");
      }
      server_ = std::make_unique<TcpServer>(l);
    }
    connect_to(host, port);
  }
  ~TcpStore() override {
    if (fd_ >= 0) close(fd_);
  }
  void set(const std::string& key, const std::string& value) override {
    std::lock_guard<std::mutex> lock(mu_);
    request('S', key, value);
    uint32_t ok;
    if (!read_all(fd_, &ok, 4)) throw Error(Error::kSystem, "neuron_ccl TCP store: server closed during set(" + key + ")");
  }
  std::string get(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mu_);
    request('G', key, "");
    uint32_t n;
    if (!read_all(fd_, &n, 4)) {
      throw Error(Error::kTimeout, "neuron_ccl TCP store: get(" + key + ") got no value within " +
                                       std::to_string(timeout_.count()) + " ms (a rank did not join, or the server exited)");
    }
    std::string v(n, '\0');
    if (!read_all(fd_, v.data(), n)) throw Error(Error::kSystem, "neuron_ccl TCP store: truncated reply");
    return v;
  }

 private:
  void request(uint8_t kind, const std::string& k, const std::string& v) {
    const uint32_t kl = uint32_t(k.size()), vl = uint32_t(v.size());
    if (!write_all(fd_, &kind, 1) || !write_all(fd_, &kl, 4) || !write_all(fd_, &vl, 4) ||
        !write_all(fd_, k.data(), kl) || !write_all(fd_, v.data(), vl))
      throw Error(Error::kSystem, "neuron_ccl TCP store: lost the connection to the server");
  }
  void connect_to(const std::string& host, int port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res)
      throw Error(Error::kSystem, "neuron_ccl TCP store: cannot resolve " + host);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (true) {
      fd_ = socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd_, res->ai_addr, res->ai_addrlen) == 0) break;
      close(fd_);
      fd_ = -1;
      if (std::chrono::steady_clock::now() > deadline) {
        freeaddrinfo(res);
        throw Error(Error::kTimeout, "neuron_ccl TCP store: no server at " + host + ":" + std::to_string(port) +
                                         " within " + std::to_string(timeout_.count()) + " ms");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    freeaddrinfo(res);
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{static_cast<time_t>(timeout_.count() / 1000), static_cast<suseconds_t>((timeout_.count() % 1000) * 1000)};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  std::chrono::milliseconds timeout_;
  std::unique_ptr<TcpServer> server_;
  int fd_ = -1;
  std::mutex mu_;
};

}  // namespace

std::shared_ptr<KVStore> make_tcp_store(const std::string& host, int port, bool is_server,
                                        std::chrono::milliseconds timeout) {
  return std::make_shared<TcpStore>(host, port, is_server, timeout);
}

}  // namespace neuron_ccl
