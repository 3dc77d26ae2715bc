// The ranks' agreement check before training (kiln/train/rank_agreement.hpp): the facts' wire
// format, which differences stop a run and which only warn, the sample digest's tolerance, the
// verdict's text, and the exchange through a store by three ranks on threads. The same check
// between real processes is in tests/multirank (ranks_that_run_something_else_stop_at_the_start).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <unistd.h>

#include "kiln/dist/memory_store.hpp"
#include "kiln/errors.hpp"
#include "kiln/plugin/build_id.hpp"
#include "kiln/sdk/crc32c.hpp"
#include "kiln/train/class_names.hpp"
#include "kiln/train/rank_agreement.hpp"
#include "kiln/train/run_facts.hpp"
#include "train_fixture.hpp"

namespace {

using namespace kiln;
using namespace kiln::train;

RankFacts sample_facts() {
  RankFacts f;
  f.must_match["optimizer.lr"] = "0.001";
  f.must_match["kiln"] = "0.2.0 (contract abc)";
  f.close["data.train's samples"] = {3, 10.0, 12.0, 40.0, 7, -1.0, 5.0, 9.0};
  f.should_match["model plugin 'mlp' (libkiln-model-mlp.so)"] = "0f0e40";
  return f;
}

/// Samples whose value i is `scale * (i - 3)`, label index % 10; `reverse` stores them backwards.
class RampSource final : public DataSource {
 public:
  explicit RampSource(float scale, bool reverse = false) : scale_(scale), reverse_(reverse) {}
  std::string_view name() const override { return "ramp"; }
  DatasetInfo describe() const override { return {{6}, DType::f32, 10, 100, "ramp"}; }
  void read(std::int64_t index, std::uint64_t, const SampleSlot& out) const override {
    auto* v = static_cast<float*>(out.data);
    for (int i = 0; i < 6; ++i) v[reverse_ ? 5 - i : i] = scale_ * static_cast<float>(i - 3 + index);
    *out.label = static_cast<std::int32_t>(index % 10);
  }

 private:
  float scale_;
  bool reverse_;
};

}  // namespace

BOOST_AUTO_TEST_SUITE(rank_agreement)

BOOST_AUTO_TEST_CASE(facts_survive_the_store_byte_for_byte) {
  RankFacts f = sample_facts();
  f.must_match["run.run_dir"] = std::string("\"a\0b:7:\"", 8);  // a NUL and the separator inside a value
  const RankFacts back = decode(encode(f), "rank 1's facts");
  BOOST_TEST((back.must_match == f.must_match));
  BOOST_TEST((back.should_match == f.should_match));
  BOOST_TEST((back.close == f.close));
}

BOOST_AUTO_TEST_CASE(damaged_facts_are_named) {
  auto bytes = encode(sample_facts());
  for (std::size_t cut : {std::size_t{1}, std::size_t{5}, bytes.size() - 1}) {
    const std::vector<std::uint8_t> part(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(cut));
    BOOST_CHECK_EXCEPTION(decode(part, "rank 3's facts"), CommError, [](const CommError& e) {
      return std::string(e.what()).find("rank 3's facts in the rendezvous store are damaged") != std::string::npos;
    });
  }
  bytes[0] = 'x';
  BOOST_CHECK_THROW(decode(bytes, "rank 3's facts"), CommError);
}

BOOST_AUTO_TEST_CASE(differences_in_config_and_data_are_errors_in_builds_warnings) {
  const RankFacts a = sample_facts();
  BOOST_TEST(compare(a, a).errors.empty());
  BOOST_TEST(compare(a, a).warnings.empty());

  RankFacts b = a;
  b.must_match["optimizer.lr"] = "0.01";
  b.must_match.erase("kiln");
  b.must_match["loader.extra"] = "1";
  b.should_match.begin()->second = "99c1";
  const FactDifferences d = compare(a, b);
  BOOST_TEST_REQUIRE(d.errors.size() == 3u);
  BOOST_TEST(d.errors[0] == "no kiln where rank 0 has 0.2.0 (contract abc)");
  BOOST_TEST(d.errors[1] == "loader.extra = 1 where rank 0 has none");
  BOOST_TEST(d.errors[2] == "optimizer.lr = 0.01 where rank 0 has 0.001");
  BOOST_TEST_REQUIRE(d.warnings.size() == 1u);
  BOOST_TEST(d.warnings[0] == "model plugin 'mlp' (libkiln-model-mlp.so): build 99c1 where rank 0 has 0f0e40");
}

BOOST_AUTO_TEST_CASE(sample_digests_forgive_rounding_but_not_other_samples) {
  const std::vector<double> a = {3, 10.0, 12.0, 40.0};
  std::vector<double> b = a;
  b[1] += 1e-7;  // another rounding of the same values
  BOOST_TEST(digests_agree(a, b));
  b = a;
  b[0] = 4;  // another label
  BOOST_TEST(!digests_agree(a, b));
  b = a;
  b[3] = 41.0;  // the same values in another place
  BOOST_TEST(!digests_agree(a, b));
  b = a;
  b[1] = std::nan("");
  BOOST_TEST(!digests_agree(a, b));
  BOOST_TEST(!digests_agree(a, {3, 10.0, 12.0}));
}

BOOST_AUTO_TEST_CASE(the_digest_reads_eight_samples_and_sees_order_and_scale) {
  const RampSource plain(1.0f), scaled(1.0f + 1e-6f), flipped(1.0f, true), other(2.0f);
  const auto info = plain.describe();
  const auto d = sample_digest(plain, info, 42);
  BOOST_TEST_REQUIRE(d.size() == 32u);
  BOOST_TEST(d[0] == 0.0);      // sample 0's label
  BOOST_TEST(d[28] == 9.0);     // sample 99's label
  BOOST_TEST(d[1] == -3.0);     // sum of -3..2
  BOOST_TEST(digests_agree(d, sample_digest(scaled, info, 42)));
  BOOST_TEST(!digests_agree(d, sample_digest(flipped, info, 42)));
  BOOST_TEST(!digests_agree(d, sample_digest(other, info, 42)));
}

BOOST_AUTO_TEST_CASE(the_verdict_names_the_first_ranks_and_counts_the_rest) {
  std::vector<FactDifferences> by_rank(7);
  BOOST_TEST(agreement_verdict(by_rank).empty());
  by_rank[2].errors = {"a = 1 where rank 0 has 2", "b", "c", "d", "e"};
  for (int r = 3; r < 7; ++r) by_rank[static_cast<std::size_t>(r)].errors = {"x"};
  by_rank[1].warnings = {"only a warning"};
  const std::string v = agreement_verdict(by_rank);
  BOOST_TEST(v.find("the ranks do not run the same training: rank 2: a = 1 where rank 0 has 2; b; c (and 2 more); "
                    "rank 3: x; rank 4: x; rank 5: x; 1 more ranks differ.") == 0u, v);
  BOOST_TEST(v.find("rank 1") == std::string::npos, v);
  BOOST_TEST(v.find("nothing was written") != std::string::npos, v);
}

BOOST_AUTO_TEST_CASE(every_rank_stops_with_the_same_message_when_one_differs) {
  for (const bool differ : {false, true}) {
    dist::MemoryStore store(3);
    std::vector<std::string> caught(3);
    std::vector<std::thread> ranks;
    for (int r = 0; r < 3; ++r) {
      ranks.emplace_back([&, r] {
        RankFacts f = sample_facts();
        if (differ && r == 2) f.must_match["optimizer.lr"] = "0.01";
        try {
          check_ranks_agree(store, RankInfo{r, 3, r, 3, "test"}, f, std::chrono::seconds(20));
        } catch (const ConfigError& e) {
          caught[static_cast<std::size_t>(r)] = e.what();
        }
      });
    }
    for (auto& t : ranks) t.join();
    for (int r = 0; r < 3; ++r) {
      const std::string& got = caught[static_cast<std::size_t>(r)];
      if (!differ) {
        BOOST_TEST(got.empty(), "rank " << r << ": " << got);
      } else {
        BOOST_TEST(got == caught[0], "rank " << r);
        BOOST_TEST(got.find("rank 2: optimizer.lr = 0.01 where rank 0 has 0.001.") != std::string::npos, got);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(plugin_keys_are_compared_but_paths_class_names_and_the_backends) {
  // run_facts.cpp's keys_not_compared: a data table's keys are compared except its paths (a
  // node-local copy of the dataset) and class names (compared as a summary); model.init is read
  // by rank 0 alone; [backend] keys choose how a node computes.
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln-test-run-facts-{}", ::getpid());
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libplugin.so") << "stands in for a library";
  plugin::PluginInfo data_info{"ramp", KILN_KIND_DATA, "1.0"};
  data_info.library = dir / "libplugin.so";
  data_info.params = {{"path", KILN_PARAM_PATH, "\"\"", nullptr, "", nullptr, nullptr, 0},
                      {"mean", KILN_PARAM_FLOAT, "0.0", nullptr, "", nullptr, nullptr, 0},
                      {"class_names", KILN_PARAM_STRING_LIST, "[]", nullptr, "", nullptr, nullptr, 0}};
  plugin::PluginInfo backend_info{"cpu", KILN_KIND_BACKEND, "1.0"};
  backend_info.library = data_info.library;
  backend_info.params = {{"threads", KILN_PARAM_INT, "0", nullptr, "", nullptr, nullptr, 0}};
  const RampSource source(1.0f);
  const CoreTables core;
  const auto facts_of = [&](const std::string& path, double mean, std::int64_t threads, const std::string& init) {
    PluginChoice data{"data.train", &data_info, ParamMap("data.train")};
    data.params.set("path", path, "test");
    data.params.set("mean", mean, "test");
    data.params.set("class_names", std::vector<std::string>{"a", "b"}, "test");
    PluginChoice backend{"backend", &backend_info, ParamMap("backend")};
    backend.params.set("threads", threads, "test");
    ParamMap model_host("model");
    model_host.set("init", init, "test");
    model_host.set("init_strict", true, "test");
    RunFactsInput in;
    in.core = &core;
    in.plugins = {&data, &backend};
    in.model_host = &model_host;
    in.data = {DataSplit{"data.train", &source, source.describe()}};
    return run_facts(in);
  };
  const RankFacts rank0 = facts_of("/data/ramp", 0.5, 2, "/weights/a.safetensors");
  BOOST_TEST(rank0.must_match.at("data.train.mean") == "0.5");
  BOOST_TEST(rank0.must_match.at("data.train.type") == "ramp 1.0");
  BOOST_TEST(rank0.must_match.at("backend.type") == "cpu 1.0");
  BOOST_TEST(rank0.must_match.at("model.init_strict") == "true");
  // The split's class names as a summary of what the source reports (RampSource: none), not the list.
  BOOST_TEST(rank0.must_match.at("data.train.class_names") == class_names_summary(source.describe().class_names));
  for (const char* key : {"data.train.path", "backend.threads", "model.init"}) {
    BOOST_TEST(!rank0.must_match.count(key), key);
  }
  const FactDifferences elsewhere = compare(rank0, facts_of("/scratch/ramp", 0.5, 8, "/home/b/a.safetensors"));
  BOOST_TEST(elsewhere.errors.empty(), fmt::format("{}", fmt::join(elsewhere.errors, "; ")));
  const FactDifferences other_mean = compare(rank0, facts_of("/data/ramp", 0.25, 2, "/weights/a.safetensors"));
  BOOST_TEST_REQUIRE(other_mean.errors.size() == 1u);
  BOOST_TEST(other_mean.errors[0] == "data.train.mean = 0.25 where rank 0 has 0.5");
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_loaded_library_has_a_build_id_and_a_file_without_one_its_crc) {
  const std::string core = plugin::core_build_id();
  BOOST_TEST(!core.empty());
  BOOST_TEST(core.find_first_not_of("0123456789abcdef") == std::string::npos, core);  // the linker wrote one
  const auto dir = std::filesystem::temp_directory_path() / fmt::format("kiln-test-build-id-{}", ::getpid());
  std::filesystem::create_directories(dir);
  const auto file = dir / "not-a-library";
  const std::string text = "no ELF here";
  std::ofstream(file) << text;
  BOOST_TEST(plugin::build_id_of(file) == fmt::format("crc32c:{:08x}", io::crc32c(text.data(), text.size())));
  BOOST_CHECK_THROW(plugin::build_id_of(dir / "missing"), IoError);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()
