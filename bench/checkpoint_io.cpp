// Checkpoint I/O benchmark on one process: builds a GPT (GPT-2 124M-like by default), trains
// one step so Adam state exists, then reports in one run, in the same directory:
//   (1) the disk's sequential speed: a file of the checkpoint's size written with 64 MiB
//       write() calls + fsync, then read back after posix_fadvise(DONTNEED) (and once more
//       from the page cache);
//   (2) save_checkpoint throughput (bytes of the iteration directory / wall time) beside the
//       disk write speed;
//   (3) load_checkpoint throughput, files dropped from the page cache first (and cached),
//       beside the disk read speed;
//   (4) training step time (micro-batch 1 x seq) with no save vs while an --async-save style
//       save (CheckpointSaver async, finish(false) after every step) writes in the
//       background, and how long a synchronous save blocks training.
// Best and median of --repeats runs; markdown tables on stdout, progress on stderr.
//   checkpoint_io [--dir PATH] [--hidden H] [--layers L] [--vocab V] [--seq S] [--repeats N] [--steps K]
// Without --dir it works in a new /tmp/ckbench.XXXXXX and removes it at the end; with --dir
// it removes only the files it wrote there.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "bench_model.h"
#include "config/configs.h"
#include "core/timers.h"
#include "training/checkpointing.h"

using namespace mindspeed;
namespace fs = std::filesystem;

namespace {

void check(const Status& s, const char* what) {
  if (!s.ok()) fatal(std::string(what) + ": " + s.to_string());
}

double best_of(std::vector<double> v) { return *std::min_element(v.begin(), v.end()); }
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t dir_bytes(const std::string& dir) {
  int64_t total = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) total += static_cast<int64_t>(e.file_size());
  return total;
}

// Drops the (clean, already fsynced) pages of every file under `path` from the page cache.
void drop_from_cache(const std::string& path) {
  auto drop = [](const std::string& p) {
    const int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  };
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path))
      if (e.is_regular_file()) drop(e.path().string());
  } else {
    drop(path);
  }
}

constexpr size_t kChunk = size_t{64} << 20;  // 64 MiB per write()/read()

// Writes `bytes` to `path` with kChunk write() calls, then fsync; returns the seconds.
double disk_write(const std::string& path, int64_t bytes, const std::vector<char>& buf) {
  Timer t;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fatal("cannot create " + path + ": " + std::strerror(errno));
  int64_t done = 0;
  while (done < bytes) {
    const size_t want = static_cast<size_t>(std::min<int64_t>(bytes - done, static_cast<int64_t>(buf.size())));
    const ssize_t n = ::write(fd, buf.data(), want);
    if (n <= 0) fatal("write to " + path + " failed: " + std::strerror(errno));
    done += n;
  }
  if (::fsync(fd) != 0) fatal("fsync of " + path + " failed");
  const double s = t.seconds();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // clean after fsync: the next read goes to the disk
  ::close(fd);
  return s;
}

double disk_read(const std::string& path, std::vector<char>& buf) {
  Timer t;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fatal("cannot open " + path);
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) fatal("read of " + path + " failed");
    if (n == 0) break;
  }
  ::close(fd);
  return t.seconds();
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int64_t hidden = 768, layers = 12, vocab = 50304, seq = 256;
  int repeats = 3, steps = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dir" && i + 1 < argc) dir = argv[++i];
    else if (a == "--hidden" && i + 1 < argc) hidden = std::atoll(argv[++i]);
    else if (a == "--layers" && i + 1 < argc) layers = std::atoll(argv[++i]);
    else if (a == "--vocab" && i + 1 < argc) vocab = std::atoll(argv[++i]);
    else if (a == "--seq" && i + 1 < argc) seq = std::atoll(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr,
                   "usage: checkpoint_io [--dir PATH] [--hidden H] [--layers L] [--vocab V] [--seq S] "
                   "[--repeats N] [--steps K]\n");
      return 2;
    }
  }
  if (hidden < 64 || hidden % 64 != 0 || layers < 1 || vocab < 1 || seq < 1 || repeats < 1 || steps < 1) {
    std::fprintf(stderr, "checkpoint_io: --hidden must be a multiple of 64; the others positive\n");
    return 2;
  }
  const bool own_dir = dir.empty();
  if (own_dir) {
    char tmpl[] = "/tmp/ckbench.XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) fatal("mkdtemp failed");
    dir = tmpl;
  } else {
    fs::create_directories(dir);
  }

  // The model: GPT-2 style, 64-dim heads, ffn 4h, vocabulary padded to a multiple of 128.
  ModelConfig m;
  m.num_layers = layers;
  m.hidden_size = hidden;
  m.num_attention_heads = m.num_query_groups = hidden / 64;
  m.kv_channels = 64;
  m.ffn_hidden_size = 4 * hidden;
  m.seq_length = m.max_position_embeddings = seq;
  m.vocab_size = vocab;
  m.padded_vocab_size = (vocab + 127) / 128 * 128;
  m.openai_gelu = true;
  m.attention_dropout = m.hidden_dropout = 0.0f;
  Configs configs;
  configs.model = m;  // parallel / training defaults: no distributed optimizer, fp32

  bench::BenchModel bm(m, /*flash_attention=*/true, /*micro_batch=*/1);
  int64_t iteration = 0;
  auto step = [&] { bm.step(++iteration); };
  const CheckpointTarget target{bm.model.registry(), bm.buffer, *bm.optimizer, *bm.ps};
  const int64_t params = bm.model.registry().num_local_elements();
  std::fprintf(stderr, "model: %lld layers, hidden %lld, vocab %lld (padded %lld), %.1f M parameters; dir %s\n",
               static_cast<long long>(layers), static_cast<long long>(hidden), static_cast<long long>(vocab),
               static_cast<long long>(m.padded_vocab_size), params / 1e6, dir.c_str());
  step();  // warm-up: Adam state exists, the allocator is warm

  const std::string tracker = dir + "/latest_checkpointed_iteration.txt";
  auto remove_checkpoint = [&](int64_t it) {
    std::error_code ec;
    fs::remove_all(checkpoint_iteration_dir(dir, it), ec);
    fs::remove(tracker, ec);
  };

  // (2) save_checkpoint, iteration 1 each time (the previous one removed, untimed).
  const int64_t kSaveIter = 1;
  const std::string iter_dir = checkpoint_iteration_dir(dir, kSaveIter);
  std::vector<double> save_s;
  int64_t ckpt_bytes = 0;
  for (int r = 0; r < repeats; ++r) {
    remove_checkpoint(kSaveIter);
    ::sync();  // the removal's metadata out of the way of the timed save
    CheckpointState st;
    st.iteration = kSaveIter;
    Timer t;
    check(save_checkpoint(dir, st, configs, target, /*save_optimizer=*/true), "save_checkpoint");
    save_s.push_back(t.seconds());
    ckpt_bytes = dir_bytes(iter_dir);
    std::fprintf(stderr, "save %d: %.3f s, %lld bytes\n", r + 1, save_s.back(), static_cast<long long>(ckpt_bytes));
  }

  // (1) The disk: a file of the checkpoint's size, large write() calls + fsync, then read.
  const std::string probe = dir + "/disk_speed_probe.bin";
  std::vector<char> buf(kChunk);
  for (size_t i = 0; i < buf.size(); i += 8) {  // incompressible content
    const uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull;
    std::memcpy(buf.data() + i, &x, 8);
  }
  std::vector<double> wr_s, rd_cold_s, rd_warm_s;
  for (int r = 0; r < repeats; ++r) {
    std::error_code ec;
    fs::remove(probe, ec);
    ::sync();
    wr_s.push_back(disk_write(probe, ckpt_bytes, buf));  // ends with fadvise(DONTNEED)
    rd_cold_s.push_back(disk_read(probe, buf));
    rd_warm_s.push_back(disk_read(probe, buf));  // the pages just read are cached
    std::fprintf(stderr, "disk %d: write %.3f s, read after DONTNEED %.3f s, read cached %.3f s\n", r + 1,
                 wr_s.back(), rd_cold_s.back(), rd_warm_s.back());
  }
  {
    std::error_code ec;
    fs::remove(probe, ec);
  }

  // (3) load_checkpoint of that iteration: files dropped from the cache first, then cached.
  std::vector<double> load_cold_s, load_warm_s;
  for (int r = 0; r < repeats; ++r) {
    drop_from_cache(iter_dir);
    Timer t;
    auto st = load_checkpoint(dir, configs, target, CheckpointLoadOptions{});
    load_cold_s.push_back(t.seconds());
    check(st.status(), "load_checkpoint");
    t.restart();
    st = load_checkpoint(dir, configs, target, CheckpointLoadOptions{});
    load_warm_s.push_back(t.seconds());
    check(st.status(), "load_checkpoint");
    std::fprintf(stderr, "load %d: %.3f s after DONTNEED, %.3f s cached\n", r + 1, load_cold_s.back(),
                 load_warm_s.back());
  }
  remove_checkpoint(kSaveIter);

  // (4) Step time: K steps without saving, then an async save started before a step and
  // finish(false) after every step until it is published.
  std::vector<double> plain_s;
  for (int s = 0; s < steps; ++s) {
    Timer t;
    step();
    plain_s.push_back(t.seconds());
    std::fprintf(stderr, "step without save: %.3f s\n", plain_s.back());
  }
  const int64_t kAsyncIter = 2;
  std::vector<double> inflight_s;
  double async_start_s = 0.0, async_final_wait_s = 0.0;
  {
    CheckpointSaver saver(*bm.ps, /*async=*/true);
    CheckpointState st;
    st.iteration = kAsyncIter;
    ::sync();
    Timer t;
    check(saver.save(dir, st, configs, target, /*save_optimizer=*/true), "async save");
    async_start_s = t.seconds();
    std::fprintf(stderr, "async save(): %.3f s until training may go on\n", async_start_s);
    for (int s = 0; s < 50 && saver.pending(); ++s) {
      t.restart();
      step();
      check(saver.finish(/*wait=*/false), "finish(false)");
      inflight_s.push_back(t.seconds());
      std::fprintf(stderr, "step with the save in flight: %.3f s%s\n", inflight_s.back(),
                   saver.pending() ? "" : " (published after it)");
    }
    t.restart();
    check(saver.finish(/*wait=*/true), "finish(true)");
    async_final_wait_s = t.seconds();
  }
  const bool published = has_checkpoint_tracker(dir) && fs::exists(checkpoint_iteration_dir(dir, kAsyncIter));
  remove_checkpoint(kAsyncIter);
  if (own_dir) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }

  // The report.
  const double gb = static_cast<double>(ckpt_bytes) / 1e9, mb_ = static_cast<double>(ckpt_bytes) / 1e6;
  auto rate = [](double bytes, double s) { return bytes / s; };
  const double wr_best = rate(mb_, best_of(wr_s)), wr_med = rate(mb_, median_of(wr_s));
  const double rc_best = rate(mb_, best_of(rd_cold_s)), rc_med = rate(mb_, median_of(rd_cold_s));
  const double rw_best = rate(mb_, best_of(rd_warm_s)), rw_med = rate(mb_, median_of(rd_warm_s));
  const double sv_best = rate(gb, best_of(save_s)), sv_med = rate(gb, median_of(save_s));
  const double lc_best = rate(gb, best_of(load_cold_s)), lc_med = rate(gb, median_of(load_cold_s));
  const double lw_best = rate(gb, best_of(load_warm_s)), lw_med = rate(gb, median_of(load_warm_s));
  std::printf("model: %lld layers, hidden %lld, vocab %lld (padded %lld), %.1f M parameters, fp32 + Adam; "
              "checkpoint %.3f GB (%lld bytes); %d repeats; dir %s\n\n",
              static_cast<long long>(layers), static_cast<long long>(hidden), static_cast<long long>(vocab),
              static_cast<long long>(m.padded_vocab_size), params / 1e6, gb, static_cast<long long>(ckpt_bytes),
              repeats, own_dir ? "/tmp/ckbench.XXXXXX" : dir.c_str());
  std::printf("| operation | best | median | best time (s) | vs disk (best / best) |\n|---|---|---|---|---|\n");
  std::printf("| disk write: 64 MiB write() calls + fsync | %.0f MB/s | %.0f MB/s | %.3f | |\n", wr_best, wr_med,
              best_of(wr_s));
  std::printf("| save_checkpoint | %.3f GB/s | %.3f GB/s | %.3f | %.2f of disk write |\n", sv_best, sv_med,
              best_of(save_s), sv_best * 1e3 / wr_best);
  std::printf("| disk read after fadvise(DONTNEED) | %.0f MB/s | %.0f MB/s | %.3f | |\n", rc_best, rc_med,
              best_of(rd_cold_s));
  std::printf("| disk read again (page cache) | %.0f MB/s | %.0f MB/s | %.3f | |\n", rw_best, rw_med,
              best_of(rd_warm_s));
  std::printf("| load_checkpoint, files dropped with DONTNEED | %.3f GB/s | %.3f GB/s | %.3f | %.2f of disk read |\n",
              lc_best, lc_med, best_of(load_cold_s), lc_best * 1e3 / rc_best);
  std::printf("| load_checkpoint, files in the page cache | %.3f GB/s | %.3f GB/s | %.3f | %.2f of cached read |\n\n",
              lw_best, lw_med, best_of(load_warm_s), lw_best * 1e3 / rw_best);

  double plain_mean = 0.0, inflight_mean = 0.0;
  for (double s : plain_s) plain_mean += s / static_cast<double>(plain_s.size());
  for (double s : inflight_s) inflight_mean += s / static_cast<double>(inflight_s.size());
  std::printf("training step, micro-batch 1 x %lld:\n\n| | steps | time (s) |\n|---|---|---|\n",
              static_cast<long long>(seq));
  std::printf("| mean step, no save | %zu | %.3f |\n", plain_s.size(), plain_mean);
  std::printf("| mean step, async save writing in the background | %zu | %.3f (%+.0f %%) |\n", inflight_s.size(),
              inflight_mean, inflight_s.empty() ? 0.0 : 100.0 * (inflight_mean / plain_mean - 1.0));
  std::printf("| async save(): blocks training (snapshot copy) | | %.3f |\n", async_start_s);
  std::printf("| async finish(true) at the end | | %.3f |\n", async_final_wait_s);
  std::printf("| synchronous save_checkpoint blocks training (median above) | | %.3f |\n", median_of(save_s));
  if (!published) std::printf("\nWARNING: the async save was not published (no tracker / iteration directory)\n");
  return published ? 0 : 1;
}
