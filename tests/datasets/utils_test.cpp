// Split parsing, NumPy-exact normalization, blend lists, Python float repr / JSON, the
// data-flag -> config translation and the sample counts, against the Python model.
#include "datasets/utils.h"

#include <gtest/gtest.h>

#include <cmath>

#include "datasets/blended_megatron_dataset_builder.h"
#include "datasets/md5.h"
#include "datasets/python_json.h"
#include "test_datasets.h"

namespace mindspeed {
namespace {

using testing::ReferenceVectors;
const ReferenceVectors& ref() { return ReferenceVectors::gpt(); }

TEST(Split, ParseNormalizeAndMatrixMatchMegatron) {
  const auto ns = ref().ints("split_ranges_n");
  for (int k = 0; ref().has("split_" + std::to_string(k) + "_string"); ++k) {
    const std::string key = "split_" + std::to_string(k);
    std::string split = ref().str(key + "_string");
    for (auto& c : split) c = c == '_' ? ' ' : c;
    auto vec = parse_and_normalize_split(split);
    ASSERT_TRUE(vec.ok()) << split << ": " << vec.status().to_string();
    const auto expected_vec = ref().doubles(key + "_vector");
    for (int i = 0; i < 3; ++i) EXPECT_EQ((*vec)[i], expected_vec[i]) << split << " " << i;
    const SplitMatrix m = convert_split_vector_to_split_matrix(*vec);
    const auto& flat = ref().strings(key + "_matrix");
    const auto ranges = ref().ints(key + "_ranges");
    for (int i = 0; i < 3; ++i) {
      if (flat[2 * i] == "none") {
        EXPECT_FALSE(m[i].has_value()) << split << " " << i;
        continue;
      }
      ASSERT_TRUE(m[i].has_value()) << split << " " << i;
      EXPECT_EQ(m[i]->first, std::strtod(flat[2 * i].c_str(), nullptr)) << split << " " << i;
      EXPECT_EQ(m[i]->second, std::strtod(flat[2 * i + 1].c_str(), nullptr)) << split << " " << i;
      for (size_t j = 0; j < ns.size(); ++j) {
        const auto r = split_index_range(*m[i], ns[j]);
        EXPECT_EQ(r.first, ranges[j * 6 + 2 * i]) << split << " N=" << ns[j];
        EXPECT_EQ(r.second, ranges[j * 6 + 2 * i + 1]) << split << " N=" << ns[j];
      }
    }
  }
}

TEST(Split, HalfToEvenRoundingOfBoundaries) {
  // 0.5 * 17 = 8.5 -> 8 and 0.5 * 19 = 9.5 -> 10 (Python round), not 9 / 10 (round half up).
  EXPECT_EQ(split_index_range({0.0, 0.5}, 17).second, 8);
  EXPECT_EQ(split_index_range({0.0, 0.5}, 19).second, 10);
  EXPECT_EQ(split_index_range({0.5, 1.0}, 17).first, 8);
}

TEST(Split, BadStringsAreInvalidArgumentsNamingTheFlag) {
  // Empty comma-separated fields ("98,2,") are refused as Megatron's comma parse refuses them.
  for (const char* bad : {"90,x", "", ",,", "1,2,3,4", "0,0,0", "1.2.3,4", ".", "-1,2", "1e3",
                          "90;10", "98,2,", "98,,2", ",98,2", "98, 2 ,"}) {
    const auto r = parse_and_normalize_split(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "' was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--split"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  // Separators Megatron's regex also accepts.
  for (const char* ok : {"969, 30, 1", "3/1/1", "98 2", "100", " 1 ,1 ,1 "}) {
    EXPECT_TRUE(parse_and_normalize_split(ok).ok()) << ok;
  }
}

TEST(Normalize, NumpyPairwiseSumBitExact) {
  for (int n : {1, 7, 8, 9, 16, 17, 128, 129, 300}) {
    const std::string key = "sum_" + std::to_string(n);
    const auto values = ref().doubles(key + "_values");
    EXPECT_EQ(numpy_sum(values), ref().doubles(key + "_result")[0]) << n;
    if (ref().has(key + "_normalized")) {
      EXPECT_EQ(normalize(values), ref().doubles(key + "_normalized")) << n;
    }
  }
}

TEST(BlendList, WeightsAndPrefixes) {
  auto b = get_blend_from_list({"30", "/data/a", "70", " /data/b "});
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(b->has_value());
  EXPECT_EQ((*b)->prefixes, (std::vector<std::string>{"/data/a", "/data/b"}));
  EXPECT_EQ(*(*b)->weights, (std::vector<double>{30.0, 70.0}));
  b = get_blend_from_list({"/data/a", "/data/b"});
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE((*b)->weights.has_value());
  EXPECT_EQ((*b)->prefixes.size(), 2u);
  b = get_blend_from_list({"/data/a"});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->prefixes, std::vector<std::string>{"/data/a"});
  b = get_blend_from_list({});
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->has_value());
  EXPECT_FALSE(get_blend_from_list({"0.5", "/a", "/b"}).ok());          // odd list with a weight
  EXPECT_FALSE(get_blend_from_list({"-1", "/a", "2", "/b"}).ok());       // negative weight
}

TEST(PythonJson, FloatReprMatchesPython) {
  const auto& v = ref().strings("float_repr");
  for (size_t i = 0; i + 1 < v.size(); i += 2) {
    const double x = std::strtod(v[i].c_str(), nullptr);
    EXPECT_EQ(python_float_repr(x), v[i + 1]) << v[i];
  }
}

TEST(PythonJson, DumpsIndentAndEscapes) {
  PyJson obj = PyJson::object();
  obj.set("a", PyJson::integer(1));
  obj.set("b", PyJson::list({PyJson::floating(0.5), PyJson::null(), PyJson::list()}));
  obj.set("c", PyJson::object());
  obj.set("d", PyJson::string("x\"\\\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80\xff"));
  obj.set("e", PyJson::boolean(true));
  EXPECT_EQ(obj.dumps(4),
            "{\n    \"a\": 1,\n    \"b\": [\n        0.5,\n        null,\n        []\n    ],\n"
            "    \"c\": {},\n    \"d\": \"x\\\"\\\\\\n\\u0001\\u007f\\u00e9\\ud83d\\ude00\\udcff\",\n"
            "    \"e\": true\n}");
}

TEST(Md5, KnownDigests) {
  EXPECT_EQ(md5_hex(""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("The quick brown fox jumps over the lazy dog"), "9e107d9d372bb6826bd81d3542a419d6");
  std::string long_text(1000, 'a');
  EXPECT_EQ(md5_hex(long_text), "cabe45dcc9ae5b66ba86600cca6b8ba8");
  Md5 inc;
  for (int i = 0; i < 10; ++i) inc.update(std::string(100, 'a'));
  EXPECT_EQ(inc.hexdigest(), "cabe45dcc9ae5b66ba86600cca6b8ba8");
}

TEST(NumSamples, TrainValidTestFromIterations) {
  for (int k = 0; ref().has("num_samples_" + std::to_string(k)); ++k) {
    const auto v = ref().ints("num_samples_" + std::to_string(k));
    const std::optional<int64_t> train_samples = v[1] < 0 ? std::nullopt : std::optional<int64_t>(v[1]);
    const auto got = get_train_valid_test_num_samples(v[0], train_samples, v[2], v[3], v[4]);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ((*got)[0], v[5]) << k;
    EXPECT_EQ((*got)[1], v[6]) << k;
    EXPECT_EQ((*got)[2], v[7]) << k;
  }
  EXPECT_FALSE(get_train_valid_test_num_samples(10, std::nullopt, 0, 1, 8).ok());
  EXPECT_FALSE(get_train_valid_test_num_samples(10, std::nullopt, 5, 1, 0).ok());
}

TEST(GptDataConfig, FromArguments) {
  GptDataArgs args;
  args.seq_length = 128;
  args.data_path = {"/data/a"};
  auto cfg = gpt_dataset_config_from_args(args);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(*(*cfg)->split, "969, 30, 1");  // Megatron's legacy default, spaces included
  EXPECT_FALSE((*cfg)->mock);
  ASSERT_TRUE((*cfg)->split_matrix.has_value());
  EXPECT_DOUBLE_EQ((*(*cfg)->split_matrix)[0]->second, 0.969);

  GptDataArgs mock;
  mock.seq_length = 64;
  mock.mock_data = true;
  cfg = gpt_dataset_config_from_args(mock);
  ASSERT_TRUE(cfg.ok());
  EXPECT_TRUE((*cfg)->mock);
  EXPECT_EQ(*(*cfg)->split, "1,1,1");

  GptDataArgs per;
  per.seq_length = 64;
  per.train_data_path = {"/data/t"};
  per.valid_data_path = {"1", "/data/v1", "3", "/data/v2"};
  cfg = gpt_dataset_config_from_args(per);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_FALSE((*cfg)->split.has_value());
  EXPECT_FALSE((*cfg)->split_matrix.has_value());
  EXPECT_FALSE((*(*cfg)->blend_per_split)[2].has_value());

  per.split = "98,2,0";
  cfg = gpt_dataset_config_from_args(per);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("--split"), std::string::npos);

  GptDataArgs both = args;
  both.mock_data = true;
  EXPECT_FALSE(gpt_dataset_config_from_args(both).ok());
  GptDataArgs bad_seed = args;
  bad_seed.seed = int64_t{1} << 33;
  EXPECT_FALSE(gpt_dataset_config_from_args(bad_seed).ok());
  GptDataArgs bad_split = args;
  bad_split.split = "90,x";
  cfg = gpt_dataset_config_from_args(bad_split);
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("\"90,x\""), std::string::npos) << cfg.status().message();
}

}  // namespace
}  // namespace mindspeed
