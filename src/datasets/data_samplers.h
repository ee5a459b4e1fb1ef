// Which samples each data-parallel rank reads, and the micro-batches built from them.
// Port of megatron/legacy/data/data_samplers.py: MegatronPretrainingSampler
// (--dataloader-type single, Megatron's default) and the collation of GPTDataset samples that
// torch's DataLoader does in build_pretraining_data_loader.
//
// The sampler walks sample ids consumed_samples, consumed_samples + 1, ... in groups of
// micro_batch_size * data_parallel_size; DP rank r takes ids [r * mbs, (r + 1) * mbs) of each
// group. A global batch is num_microbatches consecutive groups. With drop_last (the default) an
// incomplete last group is dropped.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/status.h"
#include "datasets/megatron_dataset.h"

namespace mindspeed {

class MegatronPretrainingSampler {
 public:
  /// Megatron's checks: total_samples > 0, consumed_samples < total_samples,
  /// micro_batch_size > 0, 0 <= data_parallel_rank < data_parallel_size.
  static StatusOr<MegatronPretrainingSampler> create(int64_t total_samples,
                                                     int64_t consumed_samples,
                                                     int64_t micro_batch_size,
                                                     int64_t data_parallel_rank,
                                                     int64_t data_parallel_size,
                                                     bool drop_last = true);

  /// Micro-batches this rank yields from consumed_samples on (the same count on every rank).
  int64_t num_micro_batches() const;
  /// Sample ids of this rank's k-th micro-batch (k from 0). Only the last micro-batch with
  /// drop_last = false can be shorter than micro_batch_size (or even empty on high ranks).
  std::vector<int64_t> micro_batch(int64_t k) const;
  /// Iteration: fills the next micro-batch; false once exhausted.
  bool next(std::vector<int64_t>* ids);
  /// Samples consumed by all DP ranks so far (consumed_samples + groups yielded * mbs * dp).
  int64_t consumed_samples() const;

 private:
  MegatronPretrainingSampler() = default;
  int64_t total_samples_ = 0;
  int64_t consumed_samples_ = 0;
  int64_t micro_batch_size_ = 0;
  int64_t data_parallel_rank_ = 0;
  int64_t data_parallel_size_ = 0;
  bool drop_last_ = true;
  int64_t next_ = 0;  // micro-batches yielded by next()
};

/// One micro-batch for one DP rank, row-major [b, s] (b = micro-batch size, s = seq length).
struct GptBatch {
  int64_t micro_batch_size = 0;               ///< b (rows actually filled)
  int64_t seq_length = 0;                     ///< s
  std::vector<int64_t> sample_ids;            ///< [b] ids in the top-level dataset
  std::vector<int32_t> tokens;                ///< [b, s]
  std::vector<int32_t> labels;                ///< [b, s]
  std::vector<float> loss_mask;               ///< [b, s]
  std::vector<int32_t> position_ids;          ///< [b, s]
  std::vector<int32_t> doc_start;             ///< [b, s] key j visible from query t iff doc_start <= j <= t
  std::vector<std::vector<int32_t>> actual_seq_len;  ///< [b][docs] cumulative document ends
};

/// Reads the samples `ids` of `dataset` into `batch` (resizing it); the collate step of
/// Megatron's DataLoader. The error of a sample that cannot be read (TopLevelDataset::get_sample).
Status fill_gpt_batch(const TopLevelDataset& dataset, const std::vector<int64_t>& ids, GptBatch* batch);

/// build_pretraining_data_loader for --dataloader-type single: a sampler over `dataset`
/// plus collation. next() gives this DP rank's micro-batches in order.
class GptDataLoader {
 public:
  static StatusOr<GptDataLoader> create(std::shared_ptr<const TopLevelDataset> dataset,
                                        int64_t consumed_samples, int64_t micro_batch_size,
                                        int64_t data_parallel_rank, int64_t data_parallel_size);
  /// The next micro-batch; false once the dataset is exhausted; the error of a sample that
  /// cannot be read (a stored value that is not a token id).
  StatusOr<bool> next(GptBatch* batch);
  const MegatronPretrainingSampler& sampler() const { return sampler_; }

 private:
  GptDataLoader(std::shared_ptr<const TopLevelDataset> d, MegatronPretrainingSampler s)
      : dataset_(std::move(d)), sampler_(std::move(s)) {}
  std::shared_ptr<const TopLevelDataset> dataset_;
  MegatronPretrainingSampler sampler_;
  std::vector<int64_t> ids_;
};

}  // namespace mindspeed
