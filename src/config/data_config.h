// DataConfig: where the tokens come from (Megatron's data and tokenizer flags).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mindspeed {

struct DataConfig {
  bool mock_data = false;                    ///< --mock-data
  std::vector<std::string> data_path;        ///< --data-path [w1] p1 [w2 p2 ...]
  std::vector<std::string> train_data_path;  ///< --train-data-path
  std::vector<std::string> valid_data_path;  ///< --valid-data-path
  std::vector<std::string> test_data_path;   ///< --test-data-path
  std::string split;                         ///< --split; empty = Megatron's default
  std::string data_cache_path;               ///< --data-cache-path
  /// --tokenizer-type; GPT2BPETokenizer when not given (pretrain_gpt.py's args_defaults).
  std::string tokenizer_type = "GPT2BPETokenizer";
  std::string vocab_file;                    ///< --vocab-file
  std::string merge_file;                    ///< --merge-file
  std::string tokenizer_model;               ///< --tokenizer-model
  std::string tokenizer_name_or_path;        ///< --tokenizer-name-or-path (PretrainedFromHF: a directory)
  int64_t vocab_size = 0;                    ///< --vocab-size (NullTokenizer)
  int64_t vocab_extra_ids = 0;               ///< --vocab-extra-ids (SentencePieceTokenizer, PretrainedFromHF)
  bool reset_position_ids = false;           ///< --reset-position-ids
  bool reset_attention_mask = false;         ///< --reset-attention-mask
  bool eod_mask_loss = false;                ///< --eod-mask-loss
  /// MindSpeed-LLM's --no-shared-storage: each node builds and caches the dataset indices on
  /// its own file system (its first tensor-parallel rank 0), instead of global rank 0 for all.
  bool no_shared_storage = false;
  /// MindSpeed-LLM's --handler-name: the pretraining handler preprocess_data applied to the
  /// datasets (checked by name; the indexed datasets are read as they are).
  std::string handler_name;
};

}  // namespace mindspeed
