// Port of megatron/core/datasets/gpt_dataset.py (see the header).
#include "datasets/gpt_dataset.h"

#include <algorithm>
#include <filesystem>
#include <limits>

#include "core/check.h"
#include "core/logging.h"
#include "datasets/helpers.h"
#include "datasets/md5.h"
#include "datasets/numpy_random.h"

namespace mindspeed {

PyJson split_matrix_to_json(const std::optional<SplitMatrix>& matrix) {
  if (!matrix) return PyJson::null();
  PyJson list = PyJson::list();
  for (int i = 0; i < kNumSplits; ++i) {
    const auto& b = (*matrix)[i];
    if (!b) {
      list.push_back(PyJson::null());
      continue;
    }
    PyJson pair = PyJson::list();
    // expansion[0] is the Python int 0 (functools.reduce over [[0], *vector]).
    pair.push_back(i == 0 ? PyJson::integer(0) : PyJson::floating(b->first));
    pair.push_back(PyJson::floating(b->second));
    list.push_back(std::move(pair));
  }
  return list;
}

PyJson gpt_dataset_unique_identifiers(const std::string& class_name,
                                      const std::optional<std::string>& dataset_path,
                                      std::optional<int64_t> num_samples, Split index_split,
                                      const GPTDatasetConfig& config) {
  PyJson id = PyJson::object();
  id.set("class", PyJson::string(class_name));
  id.set("dataset_path", dataset_path ? PyJson::string(*dataset_path) : PyJson::null());
  id.set("num_samples", num_samples ? PyJson::integer(*num_samples) : PyJson::null());
  id.set("index_split", PyJson::string(split_name(index_split)));
  id.set("random_seed", PyJson::integer(config.random_seed));
  id.set("sequence_length", PyJson::integer(config.sequence_length));
  id.set("split", config.split ? PyJson::string(*config.split) : PyJson::null());
  id.set("split_matrix", split_matrix_to_json(config.split_matrix));
  id.set("tokenizer", config.tokenizer.to_json());
  return id;
}

void get_ltor_masks_and_position_ids(const int32_t* tokens, int64_t s, int64_t eod_token,
                                     bool reset_position_ids, bool reset_attention_mask,
                                     bool eod_mask_loss, float* loss_mask, int32_t* position_ids,
                                     int32_t* doc_start, std::vector<int32_t>* actual_seq_len) {
  if (actual_seq_len) actual_seq_len->clear();
  int64_t start = 0;  // first position after the last EOD seen so far
  for (int64_t t = 0; t < s; ++t) {
    const bool is_eod = tokens[t] == eod_token;
    loss_mask[t] = (eod_mask_loss && is_eod) ? 0.0f : 1.0f;
    // Megatron: position_ids[(i + 1):] -= i + 1 - prev_index for each EOD at i.
    position_ids[t] = static_cast<int32_t>(reset_position_ids ? t - start : t);
    // Megatron: attention_mask[0, (i + 1):, :(i + 1)] = 0 for each EOD at i.
    doc_start[t] = static_cast<int32_t>(reset_attention_mask ? start : 0);
    if (is_eod) {
      start = t + 1;
      if (actual_seq_len && reset_attention_mask) actual_seq_len->push_back(static_cast<int32_t>(t + 1));
    }
  }
  if (actual_seq_len && (actual_seq_len->empty() || actual_seq_len->back() != s)) {
    actual_seq_len->push_back(static_cast<int32_t>(s));
  }
}

namespace {

std::string path_join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (!b.empty() && b[0] == '/') return b;
  return a.back() == '/' ? a + b : a + "/" + b;
}

bool file_exists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

}  // namespace

std::string GPTDataset::cache_file(const std::string& suffix) const {
  return path_join(cache_dir_, str_cat(unique_description_hash_, "-", class_name_, "-",
                                       split_name(index_split_), "-", suffix));
}

StatusOr<std::shared_ptr<GPTDataset>> GPTDataset::create(
    std::shared_ptr<const LowLevelDataset> dataset, std::optional<std::string> dataset_path,
    std::vector<int32_t> indices, std::optional<int64_t> num_samples, Split index_split,
    std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role) {
  MS_CHECK(dataset != nullptr && config != nullptr);
  if (num_samples && *num_samples < 0) {
    return invalid_argument("GPTDataset: negative number of samples (", *num_samples, ")");
  }
  std::shared_ptr<GPTDataset> ds(new GPTDataset());
  ds->dataset_ = std::move(dataset);
  ds->config_ = std::move(config);
  ds->dataset_path_ = std::move(dataset_path);
  ds->indices_ = std::move(indices);
  ds->num_samples_ = num_samples;
  ds->index_split_ = index_split;
  ds->class_name_ = ds->config_->mock ? "MockGPTDataset" : "GPTDataset";
  ds->extra_ = ds->config_->add_extra_token_to_sequence ? 1 : 0;
  ds->log_ = role.log;
  const GPTDatasetConfig& cfg = *ds->config_;

  // megatron_dataset.py: unique_identifiers -> json.dumps(indent=4) -> md5.
  PyJson id = gpt_dataset_unique_identifiers(ds->class_name_, ds->dataset_path_, num_samples,
                                             index_split, cfg);
  ds->unique_description_ = id.dumps(4);
  ds->unique_description_hash_ = md5_hex(ds->unique_description_);
  ds->unique_identifiers_ = std::move(id);

  for (int32_t seq : ds->indices_) {
    if (seq < 0 || seq >= ds->dataset_->num_sequences()) {
      return invalid_argument("GPTDataset: sequence id ", seq, " is outside ",
                              ds->dataset_->path_prefix(), " (", ds->dataset_->num_sequences(),
                              " sequences)");
    }
  }

  ds->cache_dir_ = cfg.path_to_cache;
  if (ds->cache_dir_.empty() && !cfg.mock) {
    ds->cache_dir_ = path_join(path_join(ds->dataset_->path_prefix(), "cache"),
                               ds->class_name_ + "_indices");
  }

  const char* what = split_name(index_split);
  if (!ds->cache_dir_.empty()) {
    const bool cache_hit = file_exists(ds->cache_file("description.txt")) &&
                           file_exists(ds->cache_file("document_index.npy")) &&
                           file_exists(ds->cache_file("sample_index.npy")) &&
                           file_exists(ds->cache_file("shuffle_index.npy"));
    if (cache_hit) {
      if (ds->log_) log_info("Load the ", ds->class_name_, " ", what, " indices");
      const Status st = ds->load_indices();
      if (st.ok()) {
        if (ds->log_) log_info("> total number of samples: ", ds->size());
        std::vector<int32_t>().swap(ds->indices_);  // only needed to build
        return ds;
      }
      log_warning(str_cat("the cached ", ds->class_name_, " ", what, " indices in ",
                          ds->cache_dir_, " are unusable (", st.message(), "); ",
                          role.build_on_this_rank ? "rebuilding them" : "building them in memory"));
    } else if (!role.build_on_this_rank) {
      log_warning(str_cat("no cached ", ds->class_name_, " ", what, " indices ",
                          ds->cache_file("*"), " (is ", ds->cache_dir_,
                          " shared with the rank that builds them?); building them in memory"));
    }
  }

  if (ds->log_) log_info("Build and save the ", ds->class_name_, " ", what, " indices");
  MS_RETURN_IF_ERROR(ds->build_indices());
  if (!ds->cache_dir_.empty() && role.build_on_this_rank && ds->size() > 0) {
    MS_RETURN_IF_ERROR(ds->save_indices());
  } else if (ds->cache_dir_.empty() && ds->log_) {
    log_warning(str_cat("Unable to save ", ds->class_name_, " indexes because path_to_cache is None"));
  }
  if (ds->log_) log_info("> total number of samples: ", ds->size());
  std::vector<int32_t>().swap(ds->indices_);  // only needed to build
  return ds;
}

Status GPTDataset::build_indices() {
  built_indices_ = true;
  const GPTDatasetConfig& cfg = *config_;
  const int64_t seq_length = cfg.sequence_length;
  if (seq_length <= 1 || seq_length > std::numeric_limits<int32_t>::max() / 2) {
    return invalid_argument("--seq-length (", seq_length, ") is out of range");
  }

  const int64_t n_seq = dataset_->num_sequences();
  std::vector<int32_t> sizes(static_cast<size_t>(n_seq));
  for (int64_t i = 0; i < n_seq; ++i) {
    sizes[static_cast<size_t>(i)] = dataset_->sequence_length(i);
    if (sizes[static_cast<size_t>(i)] < 0) {
      return data_loss(dataset_->path_prefix(), ": sequence ", i, " has negative length");
    }
  }
  int64_t tokens_per_epoch = 0;
  for (int32_t seq : indices_) tokens_per_epoch += sizes[static_cast<size_t>(seq)];

  const char* what = split_name(index_split_);
  if (tokens_per_epoch <= 1) {
    // Megatron loops forever here (no tokens can never satisfy the request).
    if (!num_samples_ || *num_samples_ == 0) {
      log_warning(str_cat("the ", what, " split of ", dataset_->path_prefix(), " has ",
                          tokens_per_epoch, " tokens (", indices_.size(),
                          " sequences); it yields no samples"));
      document_index_ = NpyArray::from_vector(std::vector<int32_t>{});
      sample_index_ = NpyArray::from_vector(std::vector<int32_t>{0, 0}, {1, 2});
      shuffle_index_ = NpyArray::from_vector(std::vector<uint32_t>{});
      return ok_status();
    }
    return invalid_argument("the ", what, " split of ", dataset_->path_prefix(), " has ",
                            tokens_per_epoch, " tokens (", indices_.size(), " of ", n_seq,
                            " sequences) but ", *num_samples_,
                            " samples are needed; adjust --split (\"",
                            cfg.split.value_or(""), "\") or use more data");
  }

  // _get_num_epochs: the smallest e >= 1 with e * tokens_per_epoch >= num_samples * s + x.
  int64_t num_epochs = 1;
  if (num_samples_) {
    const int64_t requested = *num_samples_ * seq_length + extra_;
    num_epochs = std::max<int64_t>(1, (requested + tokens_per_epoch - 1) / tokens_per_epoch);
  }
  if (num_epochs > std::numeric_limits<int32_t>::max()) {
    return invalid_argument("the ", what, " split of ", dataset_->path_prefix(), " would need ",
                            num_epochs, " epochs of ", tokens_per_epoch, " tokens");
  }

  bool separate_final_epoch = false;
  int64_t num_samples_sans_final_epoch = 0;
  if (num_epochs > 1) {
    num_samples_sans_final_epoch = ((num_epochs - 1) * tokens_per_epoch - extra_) / seq_length;
    const int64_t num_samples_from_final_epoch = *num_samples_ - num_samples_sans_final_epoch;
    const int64_t num_samples_per_epoch = (tokens_per_epoch - extra_) / seq_length;
    if (num_samples_from_final_epoch < 0 || num_samples_from_final_epoch > num_samples_per_epoch + 1) {
      return internal_error("GPTDataset: ", num_samples_from_final_epoch,
                            " samples from the final epoch (", num_samples_per_epoch, " per epoch)");
    }
    // int(0.80 * num_samples_per_epoch): float64 product truncated toward zero.
    const auto threshold = static_cast<int64_t>(0.80 * static_cast<double>(num_samples_per_epoch));
    separate_final_epoch = num_samples_from_final_epoch < threshold;
  }

  NumpyRandomState rs(static_cast<uint32_t>(cfg.random_seed));

  // _build_document_index: epoch-major copies of the split's ids, shuffled; with
  // separate_final_epoch the first num_epochs - 1 epochs and the last one are shuffled apart.
  const auto n_docs = static_cast<int64_t>(indices_.size());
  std::vector<int32_t> document_index(static_cast<size_t>(num_epochs * n_docs));
  for (int64_t e = 0; e < num_epochs; ++e) {
    std::copy(indices_.begin(), indices_.end(), document_index.begin() + e * n_docs);
  }
  if (separate_final_epoch) {
    rs.shuffle(document_index.data(), (num_epochs - 1) * n_docs);
    rs.shuffle(document_index.data() + (num_epochs - 1) * n_docs, n_docs);
  } else {
    rs.shuffle(document_index);
  }

  MS_ASSIGN_OR_RETURN(
      sample_index_,
      build_sample_idx(sizes, document_index, static_cast<int32_t>(seq_length),
                       static_cast<int32_t>(num_epochs), tokens_per_epoch,
                       index_split_ == Split::kValid ? cfg.drop_last_partial_validation_sequence : true,
                       extra_));
  document_index_ = NpyArray::from_vector(std::move(document_index));

  // _build_shuffle_index: uint32 unless the size reaches uint32 max - 1.
  const int64_t total = sample_index_.shape()[0] - 1;
  const int64_t first = separate_final_epoch ? num_samples_sans_final_epoch : total;
  auto build_shuffle = [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> shuffle(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) shuffle[static_cast<size_t>(i)] = static_cast<T>(i);
    rs.shuffle(shuffle.data(), first);
    if (first != total) rs.shuffle(shuffle.data() + first, total - first);
    return NpyArray::from_vector(std::move(shuffle));
  };
  if (total >= static_cast<int64_t>(std::numeric_limits<uint32_t>::max()) - 1) {
    shuffle_index_ = build_shuffle(int64_t{0});
  } else {
    shuffle_index_ = build_shuffle(uint32_t{0});
  }
  if (log_) log_info("> total number of epochs: ", num_epochs);
  return ok_status();
}

Status GPTDataset::save_indices() const {
  std::error_code ec;
  std::filesystem::create_directories(cache_dir_, ec);
  if (ec) {
    return failed_precondition("cannot create the dataset cache folder ", cache_dir_, ": ",
                               ec.message(), "; pass a writable folder with --data-cache-path");
  }
  // Data first, the description last: a crash in between leaves an incomplete set that reads
  // as a cache miss.
  MS_RETURN_IF_ERROR(write_npy(cache_file("document_index.npy"), document_index_));
  MS_RETURN_IF_ERROR(write_npy(cache_file("sample_index.npy"), sample_index_));
  MS_RETURN_IF_ERROR(write_npy(cache_file("shuffle_index.npy"), shuffle_index_));
  MS_RETURN_IF_ERROR(write_file_atomic(cache_file("description.txt"), unique_description_));
  return ok_status();
}

Status GPTDataset::load_indices() {
  MS_ASSIGN_OR_RETURN(const std::string description, read_whole_file(cache_file("description.txt")));
  if (description != unique_description_) {
    return data_loss(cache_file("description.txt"), " does not match this dataset's description");
  }
  MS_ASSIGN_OR_RETURN(NpyArray doc, read_npy(cache_file("document_index.npy")));
  MS_ASSIGN_OR_RETURN(NpyArray sample, read_npy(cache_file("sample_index.npy")));
  MS_ASSIGN_OR_RETURN(NpyArray shuffle, read_npy(cache_file("shuffle_index.npy")));

  if (doc.dtype() != NpyDtype::kInt32 || doc.ndim() != 1 || doc.numel() == 0) {
    return data_loss(cache_file("document_index.npy"), ": expected a non-empty 1-D int32 array");
  }
  if ((sample.dtype() != NpyDtype::kInt32 && sample.dtype() != NpyDtype::kInt64) ||
      sample.ndim() != 2 || sample.shape()[1] != 2 || sample.shape()[0] < 1) {
    return data_loss(cache_file("sample_index.npy"), ": expected an [n + 1, 2] int32/int64 array");
  }
  const int64_t n = sample.shape()[0] - 1;
  if ((shuffle.dtype() != NpyDtype::kUint32 && shuffle.dtype() != NpyDtype::kInt64) ||
      shuffle.ndim() != 1 || shuffle.numel() != n) {
    return data_loss(cache_file("shuffle_index.npy"), ": expected ", n,
                     " uint32/int64 entries (sample_index has ", n + 1, " rows)");
  }
  if (num_samples_ && n < *num_samples_) {
    return data_loss(cache_file("sample_index.npy"), ": ", n, " samples, ", *num_samples_,
                     " requested");
  }
  // Values in range, so later reads can never leave the arrays or the documents.
  const int64_t n_seq = dataset_->num_sequences();
  const int32_t* d = doc.data<int32_t>();
  for (int64_t i = 0; i < doc.numel(); ++i) {
    if (d[i] < 0 || d[i] >= n_seq) {
      return data_loss(cache_file("document_index.npy"), ": entry ", i, " = ", d[i],
                       " is not a sequence of ", dataset_->path_prefix(), " (", n_seq, ")");
    }
  }
  int64_t prev = 0;
  for (int64_t r = 0; r <= n; ++r) {
    const int64_t pos = sample.int_at(2 * r);
    const int64_t off = sample.int_at(2 * r + 1);
    if (pos < prev || pos >= doc.numel() || off < 0 || off > dataset_->sequence_length(d[pos])) {
      return data_loss(cache_file("sample_index.npy"), ": row ", r, " = (", pos, ", ", off,
                       ") is out of range");
    }
    prev = pos;
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = shuffle.int_at(i);
    if (v < 0 || v >= n) {
      return data_loss(cache_file("shuffle_index.npy"), ": entry ", i, " = ", v,
                       " is not a sample id (", n, ")");
    }
  }
  document_index_ = std::move(doc);
  sample_index_ = std::move(sample);
  shuffle_index_ = std::move(shuffle);
  built_indices_ = false;
  return ok_status();
}

Status GPTDataset::get_text(int64_t idx, int32_t* text) const {
  MS_CHECK(idx >= 0 && idx < size(), "sample ", idx, " outside ", class_name_, " ",
           split_name(index_split_), " (", size(), " samples)");
  const int64_t target = config_->sequence_length + extra_;
  const int64_t j = shuffle_index_.int_at(idx);
  const int64_t d0 = sample_index_.int_at(2 * j), o0 = sample_index_.int_at(2 * j + 1);
  const int64_t d1 = sample_index_.int_at(2 * j + 2), o1 = sample_index_.int_at(2 * j + 3);
  const int32_t* doc = document_index_.data<int32_t>();
  int64_t pos = 0;
  auto append = [&](int64_t seq, int64_t offset, int64_t length) -> Status {
    const int64_t available = dataset_->sequence_length(seq) - offset;
    length = std::min({length, available, target - pos});
    if (length <= 0) return ok_status();
    const Status status = dataset_->get(seq, offset, length, text + pos);
    if (!status.ok()) {
      return Status(status.code(), str_cat("sample ", idx, " of the ", class_name_, " ", split_name(index_split_),
                                           " split: ", status.message()));
    }
    pos += length;
    return ok_status();
  };
  if (d0 == d1) {
    MS_RETURN_IF_ERROR(append(doc[d0], o0, o1 - o0 + extra_));
  } else {
    for (int64_t i = d0; i <= d1; ++i) {
      const int64_t offset = i == d0 ? o0 : 0;
      const int64_t length = i < d1 ? dataset_->sequence_length(doc[i]) - offset : o1 + extra_;
      MS_RETURN_IF_ERROR(append(doc[i], offset, length));
    }
  }
  for (; pos < target; ++pos) text[pos] = static_cast<int32_t>(config_->pad_token);
  return ok_status();
}

Status GPTDataset::get_sample(int64_t idx, const GptSampleView& out) const {
  const int64_t s = config_->sequence_length;
  thread_local std::vector<int32_t> text;
  text.resize(static_cast<size_t>(s + 1));
  MS_RETURN_IF_ERROR(get_text(idx, text.data()));
  const int64_t pad = config_->pad_token;
  // tokens = text[:-1], labels = text[1:] (without the extra token: labels = roll(text, -1)
  // with the last label set to pad).
  if (extra_ == 0) text[static_cast<size_t>(s)] = static_cast<int32_t>(pad);
  std::copy(text.begin(), text.begin() + s, out.tokens);
  std::copy(text.begin() + 1, text.begin() + s + 1, out.labels);
  get_ltor_masks_and_position_ids(out.tokens, s, config_->eod_token, config_->reset_position_ids,
                                  config_->reset_attention_mask, config_->eod_mask_loss,
                                  out.loss_mask, out.position_ids, out.doc_start,
                                  out.actual_seq_len);
  for (int64_t t = 0; t < s; ++t) {
    if (out.labels[t] == pad) {
      out.loss_mask[t] = 0.0f;
      out.labels[t] = 0;
    }
    if (out.tokens[t] == pad) out.tokens[t] = 0;
  }
  return ok_status();
}

}  // namespace mindspeed
