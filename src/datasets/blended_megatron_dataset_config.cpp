// Port of blended_megatron_dataset_config.py: BlendedMegatronDatasetConfig.__post_init__.
#include "datasets/blended_megatron_dataset_config.h"

namespace mindspeed {

PyJson TokenizerIdentity::to_json() const {
  PyJson obj = PyJson::object();
  obj.set("class", PyJson::string(class_name));
  PyJson paths = PyJson::list();
  for (const auto& p : tokenizer_path) paths.push_back(p ? PyJson::string(*p) : PyJson::null());
  obj.set("tokenizer_path", std::move(paths));
  for (const auto& [k, v] : options) obj.set(k, PyJson::string(v));
  return obj;
}

Status BlendedMegatronDatasetConfig::finalize() {
  if (random_seed < 0 || random_seed > 0xffffffffll) {
    return invalid_argument("--seed (", random_seed, ") must be between 0 and 2**32 - 1 ",
                            "(NumPy RandomState seeds the dataset shuffles)");
  }
  if (sequence_length <= 1) {
    return invalid_argument("--seq-length (", sequence_length, ") must be at least 2");
  }
  const bool per_split =
      blend_per_split.has_value() &&
      ((*blend_per_split)[0].has_value() || (*blend_per_split)[1].has_value() ||
       (*blend_per_split)[2].has_value());
  if (per_split) {
    if (blend.has_value()) {
      return invalid_argument("--data-path cannot be combined with --train-data-path / ",
                              "--valid-data-path / --test-data-path; use one or the other");
    }
    if (split.has_value()) {
      return invalid_argument("--split (\"", *split, "\") cannot be combined with ",
                              "--train-data-path / --valid-data-path / --test-data-path: each ",
                              "split then uses its own data in full; drop --split");
    }
    for (int i = 0; i < kNumSplits; ++i) {
      const auto& b = (*blend_per_split)[i];
      if (b && b->weights && b->weights->size() != b->prefixes.size()) {
        return invalid_argument("--", split_name(static_cast<Split>(i)),
                                "-data-path: weights and prefixes must be equal in number");
      }
    }
    split_matrix = std::nullopt;
    mock = false;
    return ok_status();
  }
  blend_per_split = std::nullopt;
  if (blend.has_value()) {
    if (blend->weights && blend->weights->size() != blend->prefixes.size()) {
      return invalid_argument("--data-path: weights and prefixes must be equal in number");
    }
    if (!split.has_value()) {
      return invalid_argument("--split must be given with --data-path (Megatron's default is ",
                              "\"969, 30, 1\")");
    }
    mock = false;
  } else {
    mock = true;
    split = "1,1,1";  // an arbitrary even split, as Megatron uses for mock data
  }
  MS_ASSIGN_OR_RETURN(const auto vector, parse_and_normalize_split(*split));
  split_matrix = convert_split_vector_to_split_matrix(vector);
  return ok_status();
}

}  // namespace mindspeed
