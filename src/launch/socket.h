// TCP connections of the launcher (rendezvous.h): a listening socket on an address and port,
// a connect retried until a deadline, and a connection exchanging newline-terminated text
// messages without blocking the launcher's poll loop. POSIX sockets, IPv4 and IPv6.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "core/status.h"

namespace mindspeed::launch {

using Clock = std::chrono::steady_clock;

/// A listening TCP socket on `addr` ("" or "0.0.0.0": every address) and `port` (0: any free).
/// The errors name the address and port and say why (in use, not an address of this host).
StatusOr<int> listen_on(const std::string& addr, int port);
/// The port a listening socket is bound to.
int bound_port(int fd);
/// The local address of a connected socket, as text ("10.0.0.2").
std::string local_address(int fd);
/// The numeric address `host` resolves to ("" if it does not).
std::string resolve_address(const std::string& host);
/// True when `addr` is an address of one of this host's interfaces.
bool is_local_address(const std::string& addr);

/// Connects to host:port, retrying every 0.2 s until `deadline` (a master not yet listening is
/// expected at start-up). The error says the last reason.
StatusOr<int> connect_until(const std::string& host, int port, Clock::time_point deadline);

/// One peer: buffered non-blocking sends and reads of newline-terminated messages.
class Connection {
 public:
  explicit Connection(int fd);
  Connection(Connection&& other) noexcept;
  Connection& operator=(Connection&& other) noexcept;
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;
  ~Connection();

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  /// Queues `message` + '\n' and writes what the socket takes now (false: the peer is gone).
  bool send(const std::string& message);
  /// Writes what is queued as far as the socket takes it now (false: the peer is gone).
  bool flush();
  /// Reads what is available (call when poll says readable); false on end of stream or error.
  bool read_available();
  /// The next complete message, if one has arrived.
  std::optional<std::string> next_message();
  /// Blocks until a message arrives or `deadline` passes (nullopt: closed or timed out).
  std::optional<std::string> wait_message(Clock::time_point deadline);
  void close();
  Clock::time_point last_heard() const { return last_heard_; }

 private:
  int fd_ = -1;
  std::string in_, out_;
  Clock::time_point last_heard_ = Clock::now();
};

}  // namespace mindspeed::launch
