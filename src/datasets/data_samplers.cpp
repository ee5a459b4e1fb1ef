// Port of megatron/legacy/data/data_samplers.py: MegatronPretrainingSampler (see the header).
#include "datasets/data_samplers.h"

#include "core/check.h"

namespace mindspeed {

StatusOr<MegatronPretrainingSampler> MegatronPretrainingSampler::create(
    int64_t total_samples, int64_t consumed_samples, int64_t micro_batch_size,
    int64_t data_parallel_rank, int64_t data_parallel_size, bool drop_last) {
  if (total_samples <= 0) return invalid_argument("no sample to consume: ", total_samples);
  if (consumed_samples < 0 || consumed_samples >= total_samples) {
    return invalid_argument("no samples left to consume: consumed_samples ", consumed_samples,
                            " of ", total_samples, " (does the checkpoint's consumed sample "
                            "count exceed the dataset? raise --train-iters / --train-samples)");
  }
  if (micro_batch_size <= 0) {
    return invalid_argument("--micro-batch-size (", micro_batch_size, ") must be positive");
  }
  if (data_parallel_size <= 0 || data_parallel_rank < 0 || data_parallel_rank >= data_parallel_size) {
    return invalid_argument("data_parallel_rank (", data_parallel_rank,
                            ") should be smaller than data parallel size (", data_parallel_size, ")");
  }
  MegatronPretrainingSampler s;
  s.total_samples_ = total_samples;
  s.consumed_samples_ = consumed_samples;
  s.micro_batch_size_ = micro_batch_size;
  s.data_parallel_rank_ = data_parallel_rank;
  s.data_parallel_size_ = data_parallel_size;
  s.drop_last_ = drop_last;
  return s;
}

int64_t MegatronPretrainingSampler::num_micro_batches() const {
  const int64_t group = micro_batch_size_ * data_parallel_size_;
  const int64_t left = total_samples_ - consumed_samples_;
  return left / group + ((!drop_last_ && left % group != 0) ? 1 : 0);
}

std::vector<int64_t> MegatronPretrainingSampler::micro_batch(int64_t k) const {
  MS_CHECK(k >= 0 && k < num_micro_batches(), "micro-batch ", k, " of ", num_micro_batches());
  const int64_t group = micro_batch_size_ * data_parallel_size_;
  const int64_t group_begin = consumed_samples_ + k * group;
  const int64_t group_end = std::min(group_begin + group, total_samples_);
  std::vector<int64_t> ids;
  // batch[start_idx:end_idx] of the (possibly partial) group.
  const int64_t begin = group_begin + data_parallel_rank_ * micro_batch_size_;
  const int64_t end = std::min(begin + micro_batch_size_, group_end);
  for (int64_t i = begin; i < end; ++i) ids.push_back(i);
  return ids;
}

bool MegatronPretrainingSampler::next(std::vector<int64_t>* ids) {
  if (next_ >= num_micro_batches()) return false;
  *ids = micro_batch(next_++);
  return true;
}

int64_t MegatronPretrainingSampler::consumed_samples() const {
  return std::min(total_samples_, consumed_samples_ + next_ * micro_batch_size_ * data_parallel_size_);
}

Status fill_gpt_batch(const TopLevelDataset& dataset, const std::vector<int64_t>& ids, GptBatch* batch) {
  const int64_t b = static_cast<int64_t>(ids.size());
  const int64_t s = dataset.sequence_length();
  batch->micro_batch_size = b;
  batch->seq_length = s;
  batch->sample_ids = ids;
  const auto n = static_cast<size_t>(b * s);
  batch->tokens.resize(n);
  batch->labels.resize(n);
  batch->loss_mask.resize(n);
  batch->position_ids.resize(n);
  batch->doc_start.resize(n);
  batch->actual_seq_len.resize(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    const auto off = static_cast<size_t>(r * s);
    GptSampleView view;
    view.tokens = batch->tokens.data() + off;
    view.labels = batch->labels.data() + off;
    view.loss_mask = batch->loss_mask.data() + off;
    view.position_ids = batch->position_ids.data() + off;
    view.doc_start = batch->doc_start.data() + off;
    view.actual_seq_len = &batch->actual_seq_len[static_cast<size_t>(r)];
    MS_RETURN_IF_ERROR(dataset.get_sample(ids[static_cast<size_t>(r)], view));
  }
  return ok_status();
}

StatusOr<GptDataLoader> GptDataLoader::create(std::shared_ptr<const TopLevelDataset> dataset,
                                              int64_t consumed_samples, int64_t micro_batch_size,
                                              int64_t data_parallel_rank,
                                              int64_t data_parallel_size) {
  if (!dataset) return invalid_argument("GptDataLoader: no dataset");
  MS_ASSIGN_OR_RETURN(auto sampler,
                      MegatronPretrainingSampler::create(dataset->size(), consumed_samples,
                                                         micro_batch_size, data_parallel_rank,
                                                         data_parallel_size));
  return GptDataLoader(std::move(dataset), std::move(sampler));
}

StatusOr<bool> GptDataLoader::next(GptBatch* batch) {
  if (!sampler_.next(&ids_)) return false;
  MS_RETURN_IF_ERROR(fill_gpt_batch(*dataset_, ids_, batch));
  return true;
}

}  // namespace mindspeed
