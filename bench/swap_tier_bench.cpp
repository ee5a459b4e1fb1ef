// Swap tier benchmark (core/swap_tier.h: the file-backed tier behind MindSpeed's
// --swap-attention / --swap-optimizer, as DeepSpeed's NVMe offload): for fp32 tensors of
// 1, 16 and 256 MiB (--sizes) it measures, best and median of --repeats:
//   write    swap_out + synchronize (the bytes reach the page cache), MiB/s;
//   +sync    the same followed by fdatasync of the swap file (the bytes reach the disk);
//   read     prefetch + swap_in with the file's pages in the page cache;
//   cold     prefetch + swap_in after fdatasync + posix_fadvise(DONTNEED) (read from disk);
// and the overlap the prefetch buys: "compute-like" busy work (a fused multiply-add loop over
// an L1-resident buffer on the calling thread) of about the cold read's time, run
//   serial      swap_in (no prefetch), then the busy work;
//   overlapped  prefetch, the busy work, swap_in;
// hidden = (serial - overlapped) / min(read, busy): 100 % when the read is fully hidden
// (best of --repeats for each, as the machine may be shared: the load average is printed).
// The benchmark finds the tier's unlinked file through /proc/self/fd to sync and drop it.
// Run: build/release/bench/swap_tier_bench [--dir PATH] [--sizes 1,16,256] [--repeats 5]
// Without --dir it works in a new /tmp/swapbench.XXXXXX, removed at the end.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "core/swap_tier.h"
#include "core/tensor.h"

using namespace mindspeed;
namespace fs = std::filesystem;

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
double best_of(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The descriptor of the tier's (unlinked) file: /proc/self/fd/N -> "<path> (deleted)".
int find_fd(const std::string& path) {
  for (const auto& e : fs::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind(path, 0) == 0) return std::atoi(e.path().filename().c_str());
  }
  fatal(std::string("swap file not found in /proc/self/fd: ") + path);
}

void sync_and_drop(int fd) {
  MS_CHECK(::fdatasync(fd) == 0, "fdatasync: ", std::strerror(errno));
  MS_CHECK(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0, "posix_fadvise failed");
}

Tensor filled(Allocator& alloc, int64_t mib) {
  Tensor t(alloc, Shape{mib * 262144}, DType::kFloat32,
           MemoryCategory::kActivations);  // [mib * 2^18] fp32
  float* p = t.f32();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(i % 1021);
  return t;
}

// Compute-like work on the calling thread: FMAs over a 16 KiB buffer, `iters` passes.
volatile float g_sink = 0.0f;
void busy(int64_t iters) {
  static float buf[4096];
  for (int64_t it = 0; it < iters; ++it) {
    for (float& x : buf) x = x * 0.999f + 0.5f;
  }
  g_sink = buf[iters % 4096];
}
// Passes of busy() that take about `seconds`.
int64_t busy_iters_for(double seconds) {
  int64_t iters = 64;
  for (;;) {
    const double t0 = now();
    busy(iters);
    const double dt = now() - t0;
    if (dt > 0.05)
      return std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * seconds / dt));
    iters *= 2;
  }
}

// The 1-minute load average (the machine may be shared).
std::string load_average() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (f == nullptr) return "?";
  char buf[64] = {0};
  const bool ok = std::fgets(buf, sizeof(buf), f) != nullptr;
  std::fclose(f);
  std::string s = ok ? buf : "?";
  return s.substr(0, s.find(' '));
}

std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> v;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) v.push_back(std::atoll(item.c_str()));
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  std::vector<int64_t> sizes = {1, 16, 256};
  int repeats = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) {
      dir = argv[++i];
    } else if (a == "--sizes" && i + 1 < argc) {
      sizes = parse_list(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: swap_tier_bench [--dir PATH] [--sizes 1,16,256] [--repeats 5]\n");
      return 2;
    }
  }
  bool own_dir = false;
  if (dir.empty()) {
    char tmpl[] = "/tmp/swapbench.XXXXXX";
    MS_CHECK(::mkdtemp(tmpl) != nullptr, "mkdtemp: ", std::strerror(errno));
    dir = tmpl;
    own_dir = true;
  }

  Allocator alloc;
  auto opened = FileSwapTier::open(dir, alloc);
  if (!opened.ok()) fatal(opened.status().to_string());
  std::unique_ptr<FileSwapTier> tier = std::move(opened).value();
  const int fd = find_fd(tier->path());
  std::fprintf(stderr, "swap file %s (fd %d), %d repeats\n", tier->path().c_str(), fd, repeats);

  std::printf(
      "| tensor | write (MiB/s) | write + fdatasync | read, page cache | read, cold (DONTNEED) "
      "|\n");
  std::printf("|---|---|---|---|---|\n");
  struct Overlap {
    int64_t mib;
    double read, busy, serial, overlapped;
  };
  std::vector<Overlap> overlaps;
  for (int64_t mib : sizes) {
    std::vector<double> write, write_sync, read, cold, serial, overlapped;
    Tensor t = filled(alloc, mib);
    const Shape shape = t.shape();
    for (int r = 0; r < repeats; ++r) {
      double t0 = now();
      SwappedTensor s = tier->swap_out(std::move(t));
      tier->synchronize();
      write.push_back(now() - t0);
      t0 = now();
      tier->prefetch(s);
      t = tier->swap_in(std::move(s));
      read.push_back(now() - t0);
      MS_CHECK(t.shape() == shape &&
                   t.f32()[t.numel() - 1] == static_cast<float>((t.numel() - 1) % 1021),
               "round trip changed the tensor");

      t0 = now();
      s = tier->swap_out(std::move(t));
      tier->synchronize();
      sync_and_drop(fd);
      write_sync.push_back(now() - t0);
      t0 = now();
      tier->prefetch(s);
      t = tier->swap_in(std::move(s));
      cold.push_back(now() - t0);
    }
    // Overlap: busy work as long as the cold read; the file dropped before every read.
    const double cold_read = median_of(cold);
    const int64_t iters = busy_iters_for(cold_read);
    std::vector<double> busy_alone;
    for (int r = 0; r < repeats; ++r) {
      double t0 = now();
      busy(iters);
      busy_alone.push_back(now() - t0);

      SwappedTensor s = tier->swap_out(std::move(t));
      tier->synchronize();
      sync_and_drop(fd);
      t0 = now();
      t = tier->swap_in(std::move(s));
      busy(iters);
      serial.push_back(now() - t0);

      s = tier->swap_out(std::move(t));
      tier->synchronize();
      sync_and_drop(fd);
      t0 = now();
      tier->prefetch(s);
      busy(iters);
      t = tier->swap_in(std::move(s));
      overlapped.push_back(now() - t0);
    }
    auto rate = [&](const std::vector<double>& v) {
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.0f / %.0f", static_cast<double>(mib) / best_of(v),
                    static_cast<double>(mib) / median_of(v));
      return std::string(buf);
    };
    std::printf("| %lld MiB | %s | %s | %s | %s |\n", static_cast<long long>(mib),
                rate(write).c_str(), rate(write_sync).c_str(), rate(read).c_str(),
                rate(cold).c_str());
    std::fflush(stdout);
    overlaps.push_back(
        {mib, best_of(cold), best_of(busy_alone), best_of(serial), best_of(overlapped)});
  }
  std::printf("\n(MiB/s: best / median of %d)\n\n", repeats);
  std::printf(
      "| tensor | cold read (ms) | busy work (ms) | serial: swap_in, work (ms) | overlapped: "
      "prefetch, work, "
      "swap_in (ms) | hidden |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Overlap& o : overlaps) {
    const double hidden = (o.serial - o.overlapped) / std::min(o.read, o.busy);
    std::printf("| %lld MiB | %.1f | %.1f | %.1f | %.1f | %.0f %% |\n",
                static_cast<long long>(o.mib), o.read * 1e3, o.busy * 1e3, o.serial * 1e3,
                o.overlapped * 1e3, hidden * 100.0);
  }
  std::printf("\n(best of %d; load average %s)\n", repeats, load_average().c_str());
  tier->synchronize();
  tier.reset();
  if (own_dir) fs::remove_all(dir);
  return 0;
}
