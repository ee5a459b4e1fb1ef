// preprocess_data: JSONL corpus -> Megatron indexed dataset(s).
// Port of Megatron-LM tools/preprocess_data.py (core_v0.12.0), same flags and byte-identical
// output: for each --json-keys key K, {output_prefix}_{K}_document.bin/.idx.
//
// Per line (tokenizer/json_document.h): one JSON object; each key's value is a string (one
// sequence) or a list of strings (one sequence each, as Megatron's --split-sentences output). Each
// non-empty tokenised sequence is recorded; --append-eod appends tokenizer.eod to a non-empty
// document (the last sequence grows by one). dtype = optimal_dtype(tokenizer.vocab_size) for
// every tokenizer type, as Megatron's builder chooses it (uint16 below 65500 ids, else int32).
// MindSpeed-LLM's --tokenizer-type PretrainedFromHF (--tokenizer-name-or-path DIR, a Hugging Face
// tokenizer directory) tokenises each text as tokenizer(text) there: with the post-processor's
// special tokens (LLaMA-3: <|begin_of_text|> first).
//
// MindSpeed-LLM's --handler-name (pretraining handlers: tokenizer/pretrain_handler.h; fine-tuning
// ones refused by name) and its --seq-length: each key's text comes from the handler, an empty
// text writes no document, a sequence of --seq-length tokens or more is dropped
// (tokenizer/json_document.h). The handlers need --tokenizer-type PretrainedFromHF, as their
// tokenizer call does in MindSpeed-LLM. One departure: MindSpeed-LLM's handlers write int32
// (their builder's default, kept for the -100 labels of fine-tuning data); here the dtype is
// Megatron's optimal one for handlers too, so the files equal Megatron's (training reads either).
//
// Pipeline: a reader thread streams the input (.jsonl or gzip, via zlib) in batches of
// lines through a bounded queue; --workers threads parse and tokenise; the main thread
// writes the batches in input order. Memory stays bounded whatever the corpus size.
//
// Differences from Megatron, on purpose:
//  - Every key's dataset is finalized. (Megatron's process_json_file finalizes only the
//    last key of the loop, leaving the other keys without an .idx.)
//  - A bad line (invalid JSON, not an object, missing key, value that is not a string or
//    a list of strings, text the tokenizer refuses) stops the run with file:line and the
//    reason (Megatron dies with a traceback); --skip-bad-lines (ours) reports, skips and
//    counts them instead. Nothing is left behind on failure (outputs are written to
//    temporary files and renamed at the end).
//  - .jsonl.gz input is read directly for any --partitions (Megatron only for > 1).
//  - --partitions N > 1 gives Megatron's document order (line i goes to partition i % N,
//    partitions are concatenated in order; with --keep-sequential-samples the input order)
//    without writing partition copies of the input; the per-partition datasets are
//    temporary. --input must be one file (Megatron globs it when N > 1).
//  - --workers defaults to the number of cores (required in Megatron) and must be 1..1024.
//  - --split-sentences is refused: it needs NLTK's punkt models, which we do not have.
//  - Progress shows the share of the input done and the time left as well (Megatron: docs/s
//    and MB/s); on a terminal it is one line redrawn in place (carriage return) five times
//    a second, otherwise a plain line every --log-interval documents.
#include <unistd.h>
#include <zlib.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "core/logging.h"
#include "core/status.h"
#include "datasets/indexed_dataset.h"
#include "tokenizer/json_document.h"
#include "tokenizer/pretrain_handler.h"
#include "tokenizer/tokenizer.h"

namespace mindspeed {
namespace {

struct Args {
  std::string input;
  std::string output_prefix;
  std::vector<std::string> json_keys{"text"};
  bool split_sentences = false;
  bool keep_newlines = false;
  bool append_eod = false;
  std::string lang = "english";
  TokenizerOptions tokenizer;
  int64_t vocab_extra_ids = 0;
  std::optional<int64_t> workers;  // --workers; default: the number of cores
  std::string handler_name;        // MindSpeed-LLM's --handler-name (empty: Megatron's encode)
  PretrainHandler handler = PretrainHandler::kNone;
  int64_t seq_length = 0;  // MindSpeed-LLM's --seq-length (with --handler-name)
  int partitions = 1;
  int64_t log_interval = 1000;
  bool keep_sequential_samples = false;
  bool skip_bad_lines = false;
};

// ---------------------------------------------------------------- input

/// Streams lines from a plain or gzip-compressed file (zlib reads both).
class LineReader {
 public:
  static StatusOr<std::unique_ptr<LineReader>> open(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return invalid_argument("--input '", path, "' is a directory; give one .jsonl or .jsonl.gz");
    }
    if (!std::filesystem::exists(path, ec)) {  // FIFOs such as <(zcat ...) are fine
      return not_found("--input '", path, "': no such file",
                       path.find_first_of("*?[") != std::string::npos
                           ? " (glob patterns are not supported; give one .jsonl or .jsonl.gz)"
                           : "");
    }
    gzFile file = gzopen(path.c_str(), "rb");
    if (file == nullptr) return invalid_argument("--input '", path, "': cannot open it");
    gzbuffer(file, 1 << 18);
    return std::unique_ptr<LineReader>(new LineReader(path, file));
  }
  ~LineReader() { gzclose(file_); }

  /// Bytes of the file consumed so far (compressed for gzip) and the bytes they decompressed
  /// to: together with the file's size, an estimate of how much of the input is read.
  struct Position {
    double file_bytes = 0.0;
    double text_bytes = 0.0;
  };
  Position position() const {
    return {static_cast<double>(gzoffset(file_)), static_cast<double>(text_bytes_read_)};
  }

  /// Appends one line (without its '\n' and a trailing '\r') to *out; false at the end.
  StatusOr<bool> next_line(std::string* out, size_t* raw_bytes) {
    while (true) {
      const size_t nl = buffer_.find('\n', pos_);
      if (nl != std::string::npos) {
        take(nl, nl + 1, out, raw_bytes);
        return true;
      }
      if (eof_) {
        if (pos_ >= buffer_.size()) return false;
        take(buffer_.size(), buffer_.size(), out, raw_bytes);
        return true;
      }
      if (pos_ > 0) {
        buffer_.erase(0, pos_);
        pos_ = 0;
      }
      const size_t old = buffer_.size();
      buffer_.resize(old + kChunk);
      const int got = gzread(file_, buffer_.data() + old, kChunk);
      if (got < 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        return data_loss("--input '", path_, "': read error (", message,
                         "); is the gzip stream truncated or corrupt?");
      }
      buffer_.resize(old + static_cast<size_t>(got));
      text_bytes_read_ += static_cast<size_t>(got);
      if (got == 0) {
        int code = 0;
        const char* message = gzerror(file_, &code);
        if (code != Z_OK && code != Z_STREAM_END) {
          return data_loss("--input '", path_, "': the gzip stream is truncated or corrupt (",
                           message, ")");
        }
        eof_ = true;
      }
    }
  }

 private:
  static constexpr unsigned kChunk = 1 << 20;
  LineReader(std::string path, gzFile file) : path_(std::move(path)), file_(file) {}
  void take(size_t end, size_t next, std::string* out, size_t* raw_bytes) {
    size_t line_end = end;
    if (line_end > pos_ && buffer_[line_end - 1] == '\r') --line_end;
    out->append(buffer_, pos_, line_end - pos_);
    *raw_bytes += next - pos_;
    pos_ = next;
  }

  std::string path_;
  gzFile file_;
  std::string buffer_;
  size_t pos_ = 0;
  bool eof_ = false;
  size_t text_bytes_read_ = 0;
};

// ---------------------------------------------------------------- batches

/// Tokens of one key for the documents of a batch.
struct KeyOutput {
  std::vector<int32_t> tokens;
  std::vector<int32_t> lengths;        // per sequence
  std::vector<int32_t> num_sequences;  // per good line
  std::vector<uint8_t> written;  // per good line: 0 when the line writes no document (handlers)
};

struct Batch {
  uint64_t index = 0;
  int64_t first_line = 1;   // 1-based line number of the first line
  size_t raw_bytes = 0;     // input bytes, newlines included
  LineReader::Position read_position;  // the reader's position after this batch
  std::string data;         // the lines back to back
  std::vector<size_t> ends; // end offset of each line in data
  // Filled by a worker:
  std::vector<std::string> errors;  // per line; empty = good
  std::vector<KeyOutput> outputs;   // per key
};

constexpr size_t kBatchBytes = 256 << 10;
constexpr size_t kBatchLines = 512;

class Encoder {
 public:
  Encoder(const Args& args, const Tokenizer& tokenizer, IndexedDType dtype) : tokenizer_(tokenizer) {
    options_.json_keys = args.json_keys;
    options_.append_eod = args.append_eod;
    if (dtype == IndexedDType::kUInt16) options_.max_token_id = 65535;
    options_.handler = args.handler;
    options_.seq_length = args.seq_length;
  }

  void encode_batch(Batch* batch) const {
    const size_t num_lines = batch->ends.size();
    const size_t num_keys = options_.json_keys.size();
    batch->errors.assign(num_lines, std::string());
    batch->outputs.assign(num_keys, KeyOutput());
    std::vector<EncodedKey> doc(num_keys);
    size_t start = 0;
    for (size_t i = 0; i < num_lines; ++i) {
      const std::string_view line(batch->data.data() + start, batch->ends[i] - start);
      start = batch->ends[i];
      const Status status = encode_json_document(line, tokenizer_, options_, &doc);
      if (!status.ok()) {
        batch->errors[i] = status.message();
        continue;
      }
      for (size_t k = 0; k < num_keys; ++k) {
        KeyOutput& out = batch->outputs[k];
        out.tokens.insert(out.tokens.end(), doc[k].tokens.begin(), doc[k].tokens.end());
        out.lengths.insert(out.lengths.end(), doc[k].lengths.begin(), doc[k].lengths.end());
        out.num_sequences.push_back(static_cast<int32_t>(doc[k].lengths.size()));
        out.written.push_back(doc[k].write ? 1 : 0);
      }
    }
  }

 private:
  const Tokenizer& tokenizer_;
  JsonDocumentOptions options_;
};

// ---------------------------------------------------------------- pipeline

/// Reader -> workers -> in-order writer, with at most max_in_flight batches alive.
class Pipeline {
 public:
  Pipeline(LineReader* reader, const Encoder& encoder) : reader_(reader), encoder_(encoder) {}
  ~Pipeline() { stop(); }

  /// Starts the reader and `workers` worker threads. If the system refuses a thread, runs
  /// with the workers already started (a warning), or fails when none could start.
  Status start(int workers) {
    max_in_flight_ = static_cast<size_t>(4 * workers);
    worker_threads_.reserve(static_cast<size_t>(workers));
    for (int w = 0; w < workers; ++w) {
      std::optional<std::string> error = start_thread(&worker_threads_.emplace_back(), [this] { work_loop(); });
      if (error) {
        worker_threads_.pop_back();
        if (worker_threads_.empty()) {
          return failed_precondition("cannot start a worker thread (", *error, "); lower --workers");
        }
        log_warning(str_cat("--workers ", workers, ": the system refused worker thread ", w + 1, " (", *error,
                            "); continuing with ", worker_threads_.size(), " worker thread(s)"));
        std::lock_guard<std::mutex> lock(mutex_);
        max_in_flight_ = 4 * worker_threads_.size();
        break;
      }
    }
    if (std::optional<std::string> error = start_thread(&reader_thread_, [this] { read_loop(); })) {
      return failed_precondition("cannot start the input reader thread (", *error, ")");
    }
    return ok_status();
  }

  /// The next batch in input order; nullptr at the end (check reader_status()).
  std::unique_ptr<Batch> next() {
    std::unique_lock<std::mutex> lock(mutex_);
    done_cv_.wait(lock, [&] {
      return done_.count(next_index_) > 0 || (reader_done_ && next_index_ >= total_batches_);
    });
    auto it = done_.find(next_index_);
    if (it == done_.end()) return nullptr;
    std::unique_ptr<Batch> batch = std::move(it->second);
    done_.erase(it);
    ++next_index_;
    --in_flight_;
    space_cv_.notify_one();
    return batch;
  }

  Status reader_status() {
    std::lock_guard<std::mutex> lock(mutex_);
    return reader_status_;
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    space_cv_.notify_all();
    work_cv_.notify_all();
    if (reader_thread_.joinable()) reader_thread_.join();
    for (auto& t : worker_threads_) {
      if (t.joinable()) t.join();
    }
  }

 private:
  // std::thread reports a refused thread (EAGAIN: too many threads) by throwing.
  template <typename Fn>
  static std::optional<std::string> start_thread(std::thread* thread, Fn fn) {
    try {
      *thread = std::thread(std::move(fn));
    } catch (const std::system_error& e) {
      return std::string(e.what());
    }
    return std::nullopt;
  }

  void read_loop() {
    uint64_t index = 0;
    int64_t line_no = 1;
    Status status;
    std::string line;
    while (true) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        space_cv_.wait(lock, [&] { return stopping_ || in_flight_ < max_in_flight_; });
        if (stopping_) break;
      }
      auto batch = std::make_unique<Batch>();
      batch->index = index;
      batch->first_line = line_no;
      bool last = false;
      while (batch->data.size() < kBatchBytes && batch->ends.size() < kBatchLines) {
        auto more = reader_->next_line(&batch->data, &batch->raw_bytes);
        if (!more.ok() || !*more) {
          if (!more.ok()) status = more.status();
          last = true;
          break;
        }
        batch->ends.push_back(batch->data.size());
      }
      line_no += static_cast<int64_t>(batch->ends.size());
      batch->read_position = reader_->position();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!batch->ends.empty()) {
        work_.push_back(std::move(batch));
        ++in_flight_;
        ++index;
        work_cv_.notify_one();
      }
      if (last) break;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    reader_done_ = true;
    total_batches_ = index;
    reader_status_ = status;
    work_cv_.notify_all();
    done_cv_.notify_all();
  }

  void work_loop() {
    while (true) {
      std::unique_ptr<Batch> batch;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        work_cv_.wait(lock, [&] { return stopping_ || !work_.empty() || reader_done_; });
        if (stopping_ || work_.empty()) return;
        batch = std::move(work_.front());
        work_.pop_front();
      }
      encoder_.encode_batch(batch.get());
      std::lock_guard<std::mutex> lock(mutex_);
      done_[batch->index] = std::move(batch);
      done_cv_.notify_one();
    }
  }

  LineReader* reader_;
  const Encoder& encoder_;
  size_t max_in_flight_ = 0;
  std::mutex mutex_;
  std::condition_variable space_cv_, work_cv_, done_cv_;
  std::deque<std::unique_ptr<Batch>> work_;
  std::map<uint64_t, std::unique_ptr<Batch>> done_;
  size_t in_flight_ = 0;
  uint64_t next_index_ = 0;
  uint64_t total_batches_ = 0;
  bool reader_done_ = false;
  bool stopping_ = false;
  Status reader_status_;
  std::thread reader_thread_;
  std::vector<std::thread> worker_threads_;
};

// ---------------------------------------------------------------- main flow

std::string dataset_prefix(const std::string& output_prefix, const std::string& key) {
  return output_prefix + "_" + key + "_document";
}

// The files a run has put in place; removed again unless the run succeeds, so an error
// leaves no partial output (unfinished datasets are temporary files their builders remove).
class OutputFiles {
 public:
  ~OutputFiles() {
    if (keep_) return;
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  void add_dataset(const std::string& prefix) {
    paths_.push_back(get_bin_path(prefix));
    paths_.push_back(get_idx_path(prefix));
  }
  void keep() { keep_ = true; }

 private:
  std::vector<std::string> paths_;
  bool keep_ = false;
};

// Progress on stderr: documents, docs/s, MB/s, and when the input's size is known (a regular
// file) the share done and the time left. On a terminal one line is redrawn in place
// (carriage return, erase to the end of the line) at most five times a second and ended
// with a newline; otherwise a plain line every --log-interval documents.
class Progress {
 public:
  Progress(const std::string& input, int64_t log_interval) : log_interval_(log_interval) {
    terminal_ = isatty(STDERR_FILENO) == 1;
    std::error_code ec;
    if (std::filesystem::is_regular_file(input, ec)) {
      const auto size = std::filesystem::file_size(input, ec);
      if (!ec && size > 0) input_bytes_ = static_cast<double>(size);
    }
  }

  /// After each document: `text_bytes` of the input done, `at` the reader's position.
  void document_done(int64_t documents, double text_bytes, const LineReader::Position& at) {
    const double seconds = elapsed();
    if (terminal_) {
      if (documents > 1 && seconds - last_draw_ < 0.2) return;
      last_draw_ = seconds;
      draw(documents, text_bytes, at, seconds);
    } else if (documents % log_interval_ == 0) {
      std::fprintf(stderr, "%s\n", describe(documents, text_bytes, at, seconds).c_str());
    }
  }
  /// At the end: the terminal line's final state and its newline.
  void finish(int64_t documents, double text_bytes, const LineReader::Position& at) {
    if (!terminal_ || documents == 0) return;
    draw(documents, text_bytes, at, elapsed());
    std::fputc('\n', stderr);
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void draw(int64_t documents, double text_bytes, const LineReader::Position& at, double seconds) {
    std::fprintf(stderr, "\r%s\033[K", describe(documents, text_bytes, at, seconds).c_str());
    std::fflush(stderr);
  }
  // "Processed N documents (D docs/s, M MB/s)." (Megatron's line) [" P% of the input, time left H:MM:SS."]
  std::string describe(int64_t documents, double text_bytes, const LineReader::Position& at, double seconds) const {
    seconds = std::max(seconds, 1e-9);
    char line[256];
    int n = std::snprintf(line, sizeof(line), "Processed %lld documents (%.2f docs/s, %.2f MB/s).",
                          static_cast<long long>(documents), static_cast<double>(documents) / seconds,
                          text_bytes / seconds / 1024 / 1024);
    if (input_bytes_ > 0.0 && at.text_bytes > 0.0) {
      // The file bytes behind the text done, at the compression ratio read so far.
      const double done = std::min(1.0, text_bytes / at.text_bytes * at.file_bytes / input_bytes_);
      const double left = done > 0.0 ? seconds * (1.0 - done) / done : -1.0;
      std::snprintf(line + n, sizeof(line) - static_cast<size_t>(n), " %.1f%% of the input, time left %s.",
                    100.0 * done, format_duration(left).c_str());
    }
    return line;
  }

  int64_t log_interval_;
  bool terminal_ = false;
  double input_bytes_ = 0.0;  // 0 = unknown (a pipe)
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  double last_draw_ = 0.0;
};

struct KeyStats {
  int64_t documents = 0;
  int64_t sequences = 0;
  int64_t tokens = 0;
};

// More tokenizer threads than this are a typo (and each thread holds a stack).
constexpr int64_t kMaxWorkers = 1024;

Status validate(Args* args) {
  if (args->split_sentences) {
    return unimplemented("--split-sentences is not supported: Megatron splits with NLTK's punkt "
                         "models, which mindspeed-cpp does not have. Split the text beforehand "
                         "and store each document as a list of sentences (a JSON array of "
                         "strings): every list element becomes one sequence, as with Megatron's "
                         "--split-sentences output (the dataset is then named _document)");
  }
  if (args->json_keys.empty()) return invalid_argument("--json-keys needs at least one key");
  std::set<std::string> seen;
  for (const std::string& key : args->json_keys) {
    if (!seen.insert(key).second) {
      return invalid_argument("--json-keys lists '", key, "' twice (each key is one dataset)");
    }
  }
  if (args->workers && (*args->workers < 1 || *args->workers > kMaxWorkers)) {
    return invalid_argument("--workers ", *args->workers, " is outside 1..", kMaxWorkers,
                            " (tokenizer threads; the default is the number of cores, ",
                            std::thread::hardware_concurrency(), " here)");
  }
  if (!args->workers) {
    args->workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, kMaxWorkers);
  }
  if (args->partitions < 1) {
    return invalid_argument("--partitions (", args->partitions, ") must be >= 1");
  }
  if (*args->workers % args->partitions != 0) {
    return invalid_argument("--workers (", *args->workers, ") must be divisible by --partitions (",
                            args->partitions, "), as in Megatron");
  }
  if (args->log_interval <= 0) {
    return invalid_argument("--log-interval (", args->log_interval, ") must be > 0");
  }
  if (!args->handler_name.empty()) {
    MS_ASSIGN_OR_RETURN(args->handler, parse_pretrain_handler(args->handler_name));
    MS_ASSIGN_OR_RETURN(args->json_keys, handler_output_keys(args->handler, args->json_keys));
    if (args->tokenizer.tokenizer_type != "PretrainedFromHF") {
      return invalid_argument(
          "--handler-name ", args->handler_name,
          " needs --tokenizer-type PretrainedFromHF (the "
          "handler tokenises with the Hugging Face tokenizer, as in MindSpeed-LLM); without "
          "--handler-name, preprocess_data encodes as Megatron's preprocess_data.py");
    }
  }
  if (args->seq_length < 0) {
    return invalid_argument("--seq-length (", args->seq_length, ") must be >= 0");
  }
  if (args->seq_length > 0 && args->handler == PretrainHandler::kNone) {
    return invalid_argument(
        "--seq-length drops long sequences in MindSpeed-LLM's handlers; pass --handler-name "
        "GeneralPretrainHandler with it (Megatron's preprocess_data.py has no --seq-length)");
  }
  if (args->vocab_extra_ids != 0) {
    log_warning(str_cat("--vocab-extra-ids ", args->vocab_extra_ids, " is ignored: Megatron's "
                        "preprocess_data.py always builds the tokenizer with 0 extra ids"));
  }
  return ok_status();
}

Status run(const Args& args) {
  const auto startup = std::chrono::steady_clock::now();
  log_info("Opening ", args.input);
  MS_ASSIGN_OR_RETURN(auto reader, LineReader::open(args.input));
  MS_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer, build_tokenizer(args.tokenizer));
  const IndexedDType dtype = optimal_dtype(tokenizer->vocab_size());
  if (args.append_eod && tokenizer->eod() < 0) {
    return invalid_argument("--append-eod: --tokenizer-type ", tokenizer->name(),
                            " has no end-of-document id for this model");
  }

  // Builders: one per key, or per (partition, key) for --partitions > 1 (Megatron's order).
  const size_t num_keys = args.json_keys.size();
  const int partitions = args.keep_sequential_samples ? 1 : args.partitions;
  std::vector<std::vector<std::unique_ptr<IndexedDatasetBuilder>>> builders(partitions);
  std::vector<std::vector<std::string>> prefixes(partitions);
  for (int p = 0; p < partitions; ++p) {
    for (const std::string& key : args.json_keys) {
      const std::string prefix = partitions == 1
                                     ? dataset_prefix(args.output_prefix, key)
                                     : dataset_prefix(str_cat(args.output_prefix, "_", p), key);
      MS_ASSIGN_OR_RETURN(auto builder,
                          IndexedDatasetBuilder::create(get_bin_path(prefix), dtype));
      builders[p].push_back(std::move(builder));
      prefixes[p].push_back(prefix);
    }
  }

  const Encoder encoder(args, *tokenizer, dtype);
  const auto start = std::chrono::steady_clock::now();
  log_info("Time to startup: ", std::chrono::duration<double>(start - startup).count());
  log_info("Tokenizing with ", *args.workers, " worker thread(s), ", tokenizer->name(),
           " (vocab size ", tokenizer->vocab_size(), ", dtype ", indexed_dtype_name(dtype), ")");

  Pipeline pipeline(reader.get(), encoder);
  MS_RETURN_IF_ERROR(pipeline.start(static_cast<int>(*args.workers)));
  std::vector<KeyStats> stats(num_keys);
  int64_t documents = 0, lines = 0, bad_lines = 0;
  size_t bytes = 0;
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  Progress progress(args.input, args.log_interval);
  LineReader::Position read_position;
  while (std::unique_ptr<Batch> batch = pipeline.next()) {
    std::vector<size_t> token_pos(num_keys, 0), length_pos(num_keys, 0), doc_pos(num_keys, 0);
    for (size_t i = 0; i < batch->ends.size(); ++i) {
      const int64_t line_no = batch->first_line + static_cast<int64_t>(i);
      ++lines;
      if (!batch->errors[i].empty()) {
        if (!args.skip_bad_lines) {
          return invalid_argument(args.input, ":", line_no, ": ", batch->errors[i],
                                  " (use --skip-bad-lines to skip such lines)");
        }
        ++bad_lines;
        log_warning(str_cat(args.input, ":", line_no, ": ", batch->errors[i], " (skipped)"));
        continue;
      }
      const int partition = static_cast<int>((line_no - 1) % partitions);
      for (size_t k = 0; k < num_keys; ++k) {
        const KeyOutput& out = batch->outputs[k];
        const bool written = out.written[doc_pos[k]] != 0;
        const int32_t num_seqs = out.num_sequences[doc_pos[k]++];
        int64_t num_tokens = 0;
        for (int32_t s = 0; s < num_seqs; ++s) num_tokens += out.lengths[length_pos[k] + s];
        const std::span<const int32_t> tokens(out.tokens.data() + token_pos[k], num_tokens);
        const std::span<const int32_t> lengths(out.lengths.data() + length_pos[k], num_seqs);
        if (!written) continue;  // nothing was encoded for this key
        MS_RETURN_IF_ERROR(builders[partition][k]->add_document(tokens, lengths));
        token_pos[k] += num_tokens;
        length_pos[k] += num_seqs;
        stats[k].documents += 1;
        stats[k].sequences += num_seqs;
        stats[k].tokens += num_tokens;
      }
      ++documents;
      progress.document_done(
          documents, static_cast<double>(bytes + batch->raw_bytes * (i + 1) / batch->ends.size()),
          batch->read_position);
    }
    bytes += batch->raw_bytes;
    read_position = batch->read_position;
  }
  progress.finish(documents, static_cast<double>(bytes), read_position);
  MS_RETURN_IF_ERROR(pipeline.reader_status());
  pipeline.stop();

  // Finalize (every key: Megatron's single-key finalize quirk is not reproduced).
  OutputFiles outputs;
  for (int p = 0; p < partitions; ++p) {
    for (size_t k = 0; k < num_keys; ++k) {
      MS_RETURN_IF_ERROR(builders[p][k]->finalize(get_idx_path(prefixes[p][k])));
      outputs.add_dataset(prefixes[p][k]);
    }
  }
  if (partitions > 1) {
    for (size_t k = 0; k < num_keys; ++k) {
      const std::string prefix = dataset_prefix(args.output_prefix, args.json_keys[k]);
      MS_ASSIGN_OR_RETURN(auto merged, IndexedDatasetBuilder::create(get_bin_path(prefix), dtype));
      for (int p = 0; p < partitions; ++p) MS_RETURN_IF_ERROR(merged->add_index(prefixes[p][k]));
      MS_RETURN_IF_ERROR(merged->finalize(get_idx_path(prefix)));
      outputs.add_dataset(prefix);
      for (int p = 0; p < partitions; ++p) {
        std::remove(get_bin_path(prefixes[p][k]).c_str());
        std::remove(get_idx_path(prefixes[p][k]).c_str());
      }
    }
  }
  outputs.keep();

  const double seconds = elapsed();
  for (size_t k = 0; k < num_keys; ++k) {
    log_info("Wrote ", dataset_prefix(args.output_prefix, args.json_keys[k]), ".{bin,idx}: ",
             stats[k].documents, " documents, ", stats[k].sequences, " sequences, ",
             stats[k].tokens, " tokens (", indexed_dtype_name(dtype), ")");
  }
  char rate[128];
  std::snprintf(rate, sizeof(rate), "%.2f docs/s, %.2f MB/s", documents / std::max(seconds, 1e-9),
                static_cast<double>(bytes) / std::max(seconds, 1e-9) / 1024 / 1024);
  log_info("Done: ", documents, " documents from ", lines, " lines (", bytes, " bytes) in ",
           seconds, " s (", rate, ")", args.skip_bad_lines ? str_cat("; ", bad_lines,
           " bad line(s) skipped") : std::string());
  return ok_status();
}

}  // namespace
}  // namespace mindspeed

int main(int argc, char** argv) {
  using mindspeed::Args;
  Args args;
  std::optional<int64_t> vocab_size;
  std::string tiktoken_pattern;
  int64_t tiktoken_num_special_tokens = 1000;
  std::vector<std::string> tiktoken_special_tokens;

  CLI::App app{"Tokenize a JSONL corpus into Megatron indexed datasets "
               "({output-prefix}_{key}_document.bin/.idx). Port of Megatron-LM "
               "tools/preprocess_data.py."};
  app.get_formatter()->column_width(40);
  auto* tok = app.add_option_group("tokenizer");
  tok->add_option("--tokenizer-type", args.tokenizer.tokenizer_type,
                  "GPT2BPETokenizer, SentencePieceTokenizer, GPTSentencePieceTokenizer, "
                  "Llama2Tokenizer, NullTokenizer or MindSpeed-LLM's PretrainedFromHF")
      ->required();
  tok->add_option("--vocab-file", args.tokenizer.vocab_file, "Path to the vocab file");
  tok->add_option("--merge-file", args.tokenizer.merge_file, "Path to the BPE merge file");
  tok->add_option("--tokenizer-model", args.tokenizer.tokenizer_model,
                  "SentencePiece tokenizer model");
  tok->add_option("--tokenizer-name-or-path", args.tokenizer.tokenizer_name_or_path,
                  "PretrainedFromHF: the directory of a Hugging Face tokenizer (tokenizer.json, "
                  "or a SentencePiece tokenizer.model)");
  tok->add_option("--vocab-size", vocab_size,
                  "Size of vocab before EOD or padding (NullTokenizer)");
  tok->add_option("--vocab-extra-ids", args.vocab_extra_ids,
                  "Ignored, as in Megatron's preprocess_data.py (always 0)");
  tok->add_option("--tiktoken-pattern", tiktoken_pattern, "TikTokenizer only (not implemented)");
  tok->add_option("--tiktoken-num-special-tokens", tiktoken_num_special_tokens,
                  "TikTokenizer only (not implemented)");
  tok->add_option("--tiktoken-special-tokens", tiktoken_special_tokens,
                  "TikTokenizer only (not implemented)");
  auto* input = app.add_option_group("input data");
  input->add_option("--input", args.input, "Path to the input JSONL (.jsonl or .jsonl.gz)")
      ->required();
  input->add_option("--json-keys", args.json_keys,
                    "Space-separated keys to extract from each JSON line (default: text)");
  input->add_option(
      "--handler-name", args.handler_name,
      "MindSpeed-LLM's dataset handler: GeneralPretrainHandler, AlpacaPretrainHandler, "
      "SharegptPretrainHandler or StackOverflowPythonPretrainHandler (needs PretrainedFromHF); "
      "default: Megatron's encoding");
  input->add_option(
      "--seq-length", args.seq_length,
      "With --handler-name: drop sequences of this many tokens or more (MindSpeed-LLM)");
  input->add_flag("--split-sentences", args.split_sentences,
                  "Split documents into sentences (not supported: needs NLTK)");
  input->add_flag("--keep-newlines", args.keep_newlines,
                  "Keep newlines between sentences when splitting (with --split-sentences)");
  auto* process = app.add_option_group("tokenization process");
  process->add_flag("--append-eod", args.append_eod,
                    "Append an <eod> token to the end of a document");
  process->add_option("--lang", args.lang,
                      "Language for sentence splitting (with --split-sentences)");
  auto* output = app.add_option_group("output data");
  output->add_option("--output-prefix", args.output_prefix,
                     "Path to binary output file without suffix")
      ->required();
  auto* runtime = app.add_option_group("runtime");
  runtime->add_option("--workers", args.workers,
                      "Tokenizer threads (default: the number of cores)");
  runtime->add_option("--partitions", args.partitions,
                      "Number of file partitions (Megatron's document order)");
  runtime->add_option("--log-interval", args.log_interval,
                      "Documents between progress lines (on a terminal one line is redrawn "
                      "5 times a second instead)");
  runtime->add_flag("--keep-sequential-samples", args.keep_sequential_samples,
                    "Keep the input order when using --partitions > 1");
  runtime->add_flag("--skip-bad-lines", args.skip_bad_lines,
                    "Report, skip and count bad lines instead of stopping (mindspeed-cpp)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  args.tokenizer.vocab_size = vocab_size;
  args.tokenizer.vocab_extra_ids = 0;

  try {
    mindspeed::Status status = mindspeed::validate(&args);
    if (!status.ok()) {
      std::fprintf(stderr, "preprocess_data: error: %s\n", status.message().c_str());
      return 2;
    }
    status = mindspeed::run(args);
    if (!status.ok()) {
      std::fprintf(stderr, "preprocess_data: error: %s\n", status.message().c_str());
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "preprocess_data: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
