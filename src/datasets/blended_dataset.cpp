// Port of megatron/core/datasets/blended_dataset.py (see the header).
#include "datasets/blended_dataset.h"

#include <filesystem>

#include "core/check.h"
#include "core/logging.h"
#include "datasets/helpers.h"
#include "datasets/md5.h"

namespace mindspeed {

std::string BlendedDataset::cache_file(const std::string& suffix) const {
  std::string dir = config_->path_to_cache;
  if (!dir.empty() && dir.back() != '/') dir += "/";
  return str_cat(dir, unique_description_hash_, "-BlendedDataset-", split_name(split_), "-", suffix);
}

StatusOr<std::shared_ptr<BlendedDataset>> BlendedDataset::create(
    std::vector<std::shared_ptr<GPTDataset>> datasets, std::vector<double> weights,
    int64_t size, std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role) {
  if (weights.size() != datasets.size()) {
    return invalid_argument("BlendedDataset: ", weights.size(), " weights for ", datasets.size(),
                            " datasets");
  }
  for (double w : weights) {
    if (!(w > 0)) return invalid_argument("BlendedDataset: blend weights must be positive, got ", w);
  }
  if (size < 0) return invalid_argument("BlendedDataset: negative size ", size);
  std::vector<double> normalized = normalize(weights);
  PyJson weights_json = PyJson::list();
  for (double w : normalized) weights_json.push_back(PyJson::floating(w));
  return create_impl(std::move(datasets), std::move(weights_json), std::move(normalized), {},
                     size, std::move(config), role);
}

StatusOr<std::shared_ptr<BlendedDataset>> BlendedDataset::create_exhaustive(
    std::vector<std::shared_ptr<GPTDataset>> datasets, std::vector<int64_t> counts,
    std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role) {
  if (counts.size() != datasets.size()) {
    return invalid_argument("BlendedDataset: ", counts.size(), " sizes for ", datasets.size(),
                            " datasets");
  }
  PyJson weights_json = PyJson::list();
  for (int64_t c : counts) {
    if (c <= 0) {
      return invalid_argument("BlendedDataset: every blended dataset must contribute samples, ",
                              "got a dataset with ", c, " (is a split of one prefix empty?)");
    }
    weights_json.push_back(PyJson::integer(c));
  }
  return create_impl(std::move(datasets), std::move(weights_json), {}, std::move(counts),
                     std::nullopt, std::move(config), role);
}

StatusOr<std::shared_ptr<BlendedDataset>> BlendedDataset::create_impl(
    std::vector<std::shared_ptr<GPTDataset>> datasets, PyJson weights_json,
    std::vector<double> weights, std::vector<int64_t> counts, std::optional<int64_t> size,
    std::shared_ptr<const GPTDatasetConfig> config, const IndexBuildRole& role) {
  if (datasets.empty() || datasets.size() >= 32767) {
    return invalid_argument("BlendedDataset: ", datasets.size(), " datasets (1 to 32766 allowed)");
  }
  for (const auto& d : datasets) {
    MS_CHECK(d != nullptr);
    if (d->split() != datasets[0]->split()) {
      return internal_error("BlendedDataset: datasets of different splits");
    }
  }
  if (datasets.size() == 1 && role.log) {
    log_warning("Building a BlendedDataset for a single MegatronDataset");
  }
  std::shared_ptr<BlendedDataset> bd(new BlendedDataset());
  bd->datasets_ = std::move(datasets);
  bd->config_ = std::move(config);
  bd->split_ = bd->datasets_[0]->split();

  PyJson id = PyJson::object();
  id.set("class", PyJson::string("BlendedDataset"));
  PyJson list = PyJson::list();
  for (const auto& d : bd->datasets_) list.push_back(d->unique_identifiers());
  id.set("datasets", std::move(list));
  id.set("split", PyJson::string(split_name(bd->split_)));
  id.set("weights", std::move(weights_json));
  id.set("size", size ? PyJson::integer(*size) : PyJson::null());
  bd->unique_description_ = id.dumps(4);
  bd->unique_description_hash_ = md5_hex(bd->unique_description_);

  const bool use_cache = !bd->config_->path_to_cache.empty();
  const char* what = split_name(bd->split_);
  if (use_cache) {
    std::error_code ec;
    const bool hit = std::filesystem::is_regular_file(bd->cache_file("description.txt"), ec) &&
                     std::filesystem::is_regular_file(bd->cache_file("dataset_index.npy"), ec) &&
                     std::filesystem::is_regular_file(bd->cache_file("dataset_sample_index.npy"), ec);
    if (hit) {
      if (role.log) log_info("Load the BlendedDataset indices");
      const Status st = bd->load_indices();
      if (st.ok()) return bd;
      log_warning(str_cat("the cached BlendedDataset ", what, " indices are unusable (",
                          st.message(), "); ",
                          role.build_on_this_rank ? "rebuilding them" : "building them in memory"));
    } else if (!role.build_on_this_rank) {
      log_warning(str_cat("no cached BlendedDataset ", what, " indices in ",
                          bd->config_->path_to_cache, "; building them in memory"));
    }
  }

  if (role.log) log_info("Build and save the BlendedDataset indices");
  bd->built_indices_ = true;
  std::pair<std::vector<int16_t>, std::vector<int64_t>> built =
      size ? build_blending_indices(weights, *size) : build_exhaustive_blending_indices(counts);
  NpyArray dataset_index = NpyArray::from_vector(std::move(built.first));
  NpyArray dataset_sample_index = NpyArray::from_vector(std::move(built.second));
  MS_RETURN_IF_ERROR(bd->check_indices(dataset_index, dataset_sample_index, "the blend"));
  bd->dataset_index_ = std::move(dataset_index);
  bd->dataset_sample_index_ = std::move(dataset_sample_index);

  if (use_cache && role.build_on_this_rank) {
    std::error_code ec;
    std::filesystem::create_directories(bd->config_->path_to_cache, ec);
    if (ec) {
      return failed_precondition("cannot create the dataset cache folder ",
                                 bd->config_->path_to_cache, ": ", ec.message(),
                                 "; pass a writable folder with --data-cache-path");
    }
    MS_RETURN_IF_ERROR(write_npy(bd->cache_file("dataset_index.npy"), bd->dataset_index_));
    MS_RETURN_IF_ERROR(write_npy(bd->cache_file("dataset_sample_index.npy"), bd->dataset_sample_index_));
    MS_RETURN_IF_ERROR(write_file_atomic(bd->cache_file("description.txt"), bd->unique_description_));
  } else if (!use_cache && role.log) {
    log_warning("Cannot save the BlendedDataset indexes because path_to_cache is None");
  }
  return bd;
}

Status BlendedDataset::check_indices(const NpyArray& dataset_index,
                                     const NpyArray& dataset_sample_index,
                                     const std::string& origin) const {
  if (dataset_index.dtype() != NpyDtype::kInt16 || dataset_index.ndim() != 1 ||
      dataset_sample_index.dtype() != NpyDtype::kInt64 || dataset_sample_index.ndim() != 1 ||
      dataset_index.numel() != dataset_sample_index.numel()) {
    return data_loss(origin, ": expected int16 and int64 1-D indices of equal length");
  }
  const int16_t* di = dataset_index.data<int16_t>();
  const int64_t* si = dataset_sample_index.data<int64_t>();
  const auto n_datasets = static_cast<int64_t>(datasets_.size());
  for (int64_t i = 0; i < dataset_index.numel(); ++i) {
    if (di[i] < 0 || di[i] >= n_datasets) {
      return data_loss(origin, ": sample ", i, " names dataset ", di[i], " of ", n_datasets);
    }
    if (si[i] < 0 || si[i] >= datasets_[static_cast<size_t>(di[i])]->size()) {
      // Megatron: "The {split} blend oversamples the contributing datasets ..."
      return failed_precondition(
          "The ", split_name(split_), " blend oversamples the contributing datasets: it needs ",
          "sample ", si[i], " of dataset ", di[i], " (",
          datasets_[static_cast<size_t>(di[i])]->low_level_dataset().path_prefix(), "), which has ",
          datasets_[static_cast<size_t>(di[i])]->size(), " samples (", origin, ")");
    }
  }
  return ok_status();
}

Status BlendedDataset::load_indices() {
  MS_ASSIGN_OR_RETURN(const std::string description, read_whole_file(cache_file("description.txt")));
  if (description != unique_description_) {
    return data_loss(cache_file("description.txt"), " does not match this blend's description");
  }
  MS_ASSIGN_OR_RETURN(NpyArray di, read_npy(cache_file("dataset_index.npy")));
  MS_ASSIGN_OR_RETURN(NpyArray si, read_npy(cache_file("dataset_sample_index.npy")));
  MS_RETURN_IF_ERROR(check_indices(di, si, cache_file("*.npy")));
  dataset_index_ = std::move(di);
  dataset_sample_index_ = std::move(si);
  built_indices_ = false;
  return ok_status();
}

Status BlendedDataset::get_sample(int64_t idx, const GptSampleView& out) const {
  MS_CHECK(idx >= 0 && idx < size(), "sample ", idx, " outside the ", split_name(split_),
           " blend (", size(), " samples)");
  const int16_t d = dataset_index_.data<int16_t>()[idx];
  const int64_t s = dataset_sample_index_.data<int64_t>()[idx];
  return datasets_[static_cast<size_t>(d)]->get_sample(s, out);
}

}  // namespace mindspeed
