// TCP helpers of the launcher (see socket.h).
#include "launch/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace mindspeed::launch {
namespace {

std::string address_text(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {0};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf, sizeof(buf));
  }
  return buf;
}

void set_nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL, 0) | O_NONBLOCK); }

}  // namespace

StatusOr<int> listen_on(const std::string& addr, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const char* node = addr.empty() || addr == "0.0.0.0" ? nullptr : addr.c_str();
  if (const int rc = getaddrinfo(node, service.c_str(), &hints, &res); rc != 0) {
    return invalid_argument("the address '", addr, "' does not resolve (", gai_strerror(rc), ")");
  }
  std::string why = "no address";
  for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
               sizeof(one));  // a port in TIME_WAIT is free; a listener is not
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 128) == 0) {
      freeaddrinfo(res);
      set_nonblocking(fd);
      return fd;
    }
    const int err = errno;
    ::close(fd);
    if (err == EADDRINUSE) {
      why = str_cat("port ", port, " on ", address_text(ai->ai_addr),
                    " is in use (another job or program holds it): pick another port");
    } else if (err == EADDRNOTAVAIL) {
      why = str_cat(address_text(ai->ai_addr),
                    " is not an address of this host (the master node must be started where that "
                    "address lives)");
    } else {
      why = str_cat("cannot listen on ", address_text(ai->ai_addr), ":", port, ": ",
                    std::strerror(err));
    }
  }
  freeaddrinfo(res);
  return failed_precondition(why);
}

int bound_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  if (ss.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string local_address(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof(ss);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  return address_text(reinterpret_cast<sockaddr*>(&ss));
}

std::string resolve_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return "";
  std::string out = address_text(res->ai_addr);
  freeaddrinfo(res);
  return out;
}

bool is_local_address(const std::string& addr) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) {
    if (i->ifa_addr != nullptr &&
        (i->ifa_addr->sa_family == AF_INET || i->ifa_addr->sa_family == AF_INET6)) {
      found = address_text(i->ifa_addr) == addr;
    }
  }
  freeifaddrs(list);
  return found;
}

StatusOr<int> connect_until(const std::string& host, int port, Clock::time_point deadline) {
  std::string why = "no attempt";
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res);
        rc != 0) {
      why = str_cat("'", host, "' does not resolve (", gai_strerror(rc), ")");
    } else {
      for (addrinfo* ai = res; ai != nullptr; ai = ai->ai_next) {
        const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) continue;
        // A connect bounded by the deadline: non-blocking, then poll for completion.
        set_nonblocking(fd);
        int rc2 = connect(fd, ai->ai_addr, ai->ai_addrlen);
        if (rc2 != 0 && errno == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          const auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                  .count();
          if (poll(&p, 1, static_cast<int>(std::max<int64_t>(std::min<int64_t>(left, 2000), 1))) ==
              1) {
            int err = 0;
            socklen_t len = sizeof(err);
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
            rc2 = err == 0 ? 0 : -1;
            errno = err == 0 ? 0 : err;
          } else {
            rc2 = -1;
            errno = ETIMEDOUT;
          }
        }
        if (rc2 == 0) {
          freeaddrinfo(res);
          const int one = 1;
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
          return fd;
        }
        why = std::strerror(errno);
        ::close(fd);
      }
      freeaddrinfo(res);
    }
    if (Clock::now() >= deadline) return failed_precondition(why);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Connection::Connection(int fd) : fd_(fd) {
  set_nonblocking(fd_);
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}
Connection::Connection(Connection&& other) noexcept
    : fd_(other.fd_),
      in_(std::move(other.in_)),
      out_(std::move(other.out_)),
      last_heard_(other.last_heard_) {
  other.fd_ = -1;
}
Connection& Connection::operator=(Connection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    in_ = std::move(other.in_);
    out_ = std::move(other.out_);
    last_heard_ = other.last_heard_;
    other.fd_ = -1;
  }
  return *this;
}
Connection::~Connection() { close(); }

void Connection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Connection::flush() {
  while (fd_ >= 0 && !out_.empty()) {
    const ssize_t n = ::send(fd_, out_.data(), out_.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      out_.erase(0, static_cast<size_t>(n));
      continue;
    }
    // Full (a stalled link): kept queued, the keep-alive timeout decides; anything else: gone.
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  }
  return fd_ >= 0;
}

bool Connection::send(const std::string& message) {
  if (fd_ < 0) return false;
  out_ += message;
  out_ += '\n';
  return flush();
}

bool Connection::read_available() {
  if (fd_ < 0 || !flush()) return false;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      in_.append(buf, static_cast<size_t>(n));
      last_heard_ = Clock::now();
      continue;
    }
    if (n == 0) return false;
    return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
  }
}

std::optional<std::string> Connection::next_message() {
  const size_t nl = in_.find('\n');
  if (nl == std::string::npos) return std::nullopt;
  std::string m = in_.substr(0, nl);
  in_.erase(0, nl + 1);
  return m;
}

std::optional<std::string> Connection::wait_message(Clock::time_point deadline) {
  for (;;) {
    if (auto m = next_message()) return m;
    if (fd_ < 0) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000))) > 0 && !read_available()) {
      if (auto m = next_message()) return m;
      return std::nullopt;
    }
  }
}

}  // namespace mindspeed::launch
