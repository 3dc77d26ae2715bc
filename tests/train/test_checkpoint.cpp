// Checkpoints: safetensors round trip and validation, and the promise that matters — a run
// resumed from an epoch-1 checkpoint ends with bit-identical weights to the uninterrupted run.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/plugin/registry.hpp"
#include "kiln/train/checkpoint.hpp"
#include "kiln/train/run_identity.hpp"
#include "kiln/train/trainer.hpp"
#include "train_fixture.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("kiln-ckpt-test-" + std::to_string(::getpid()) + "-" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string data_error(const fs::path& p) {
  try {
    kiln::io::read_safetensors(p);
  } catch (const kiln::DataError& e) {
    return e.what();
  }
  return "<no error>";
}

using Run = kiln::test::PluginRun;

/// Trains the MLP on 640 Fashion-MNIST samples for `epochs`, checkpointing into `ckpt`, resuming
/// from `resume` if given; returns the final parameter values.
std::vector<double> train(std::int64_t epochs, const fs::path& ckpt, const fs::path& resume, std::int64_t keep = 3,
                          kiln::train::RunIdentity identity = {}, std::vector<std::string> class_names = {}) {
  Run run;
  using R = kiln::plugin::Registry;
  run.parts.backend = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  run.parts.comm = run.make(KILN_KIND_COMMUNICATOR, "local", "", &R::create_communicator);
  run.parts.precision = run.make(KILN_KIND_PRECISION, "fp32", "", &R::create_precision);
  run.parts.model = run.make(KILN_KIND_MODEL, "mlp", "hidden = [16]\ndropout = 0.2", &R::create_model);
  run.parts.train_data = run.make(KILN_KIND_DATA, "mnist", "limit = 640", &R::create_data);
  kiln::CommContext cc;
  cc.backend = run.parts.backend.get();
  run.parts.comm->connect(cc);

  kiln::train::TrainerOptions o;
  o.epochs = epochs;
  o.seed = 7;
  o.train_loader.shard.batch = 32;
  o.train_loader.shard.seed = 7;
  o.optimizer_type = "adam";
  o.optimizer_table = kiln::test::core_table("optimizer", "lr = 0.01", kiln::train::optimizer_schema("adam"));
  o.schedule_type = "cosine";
  o.schedule_table = kiln::test::core_table("schedule", "", kiln::train::schedule_schema("constant"));
  o.progress = kiln::io::Progress::Mode::never;
  o.checkpoint_dir = ckpt;
  o.checkpoint_every = 1;
  o.checkpoint_keep = keep;
  o.run_identity = std::move(identity);
  o.class_names = std::move(class_names);
  o.resume_from = resume;
  auto model = run.parts.model;
  kiln::train::Trainer trainer(run.parts, o, kiln::RankInfo{}, nullptr);
  trainer.run();
  std::vector<double> out;
  for (const auto& p : model->parameters()) {
    const auto v = kiln::test::read(p.value);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// Flips one bit inside tensor `name`'s bytes in a Kiln-written safetensors file (its header is
/// compact JSON: "name":{"dtype":..,"shape":[..],"data_offsets":[begin,end]}).
void flip_tensor_byte(const fs::path& file, const std::string& name) {
  std::string bytes = slurp(file);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = (header << 8) | static_cast<unsigned char>(bytes[static_cast<std::size_t>(i)]);
  const std::size_t entry = bytes.find("\"" + name + "\":{");
  BOOST_TEST_REQUIRE(entry != std::string::npos);
  const std::size_t offsets = bytes.find("\"data_offsets\":[", entry) + 16;
  const std::size_t begin = std::stoull(bytes.substr(offsets));
  bytes[8 + header + begin + 3] ^= 0x10;
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
}

std::string inspect_error(const fs::path& checkpoint) {
  try {
    kiln::train::inspect_checkpoint(checkpoint);
  } catch (const kiln::DataError& e) {
    return e.what();
  }
  return "<no error>";
}

BOOST_AUTO_TEST_SUITE(checkpoint)

BOOST_AUTO_TEST_CASE(safetensors_round_trip_keeps_names_shapes_values_metadata) {
  const fs::path dir = fresh_dir("roundtrip");
  const std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 5.0f, 6.0f};
  const std::vector<std::int32_t> b = {7, 8, 9};
  kiln::io::write_safetensors(dir / "x.safetensors",
                              {{"layer.weight", kiln::DType::f32, {2, 3}, a.data()},
                               {"labels", kiln::DType::i32, {3}, b.data()}},
                              {{"format", "pt"}});
  const auto f = kiln::io::read_safetensors(dir / "x.safetensors");
  BOOST_TEST(f.metadata.at("format") == "pt");
  const kiln::Tensor& w = f.tensors.at("layer.weight");
  BOOST_TEST((w.shape() == kiln::Shape{2, 3}));
  BOOST_TEST(std::memcmp(w.data(), a.data(), a.size() * 4) == 0);
  BOOST_TEST(f.tensors.at("labels").data_as<std::int32_t>()[2] == 9);
  // The data section starts 8-byte aligned (header padded with spaces).
  BOOST_TEST(fs::file_size(dir / "x.safetensors") % 4 == 0u);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(corrupt_safetensors_are_data_errors_naming_the_file) {
  const fs::path dir = fresh_dir("corrupt");
  const std::vector<float> a = {1, 2, 3, 4};
  const fs::path good = dir / "good.safetensors";
  kiln::io::write_safetensors(good, {{"w", kiln::DType::f32, {4}, a.data()}}, {});
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
  };
  BOOST_TEST(data_error(write("short.safetensors", bytes.substr(0, 5))).find("too short") != std::string::npos);
  BOOST_TEST(data_error(write("trunc.safetensors", bytes.substr(0, bytes.size() - 4))).find("data buffer") !=
             std::string::npos);
  std::string bad_json = bytes;
  bad_json[9] = '[';
  BOOST_TEST(data_error(write("json.safetensors", bad_json)).find("invalid JSON") != std::string::npos);
  std::string huge = bytes;
  huge[7] = '\x7f';
  BOOST_TEST(data_error(write("huge.safetensors", huge)).find("does not fit") != std::string::npos);
  std::string dtype = bytes;
  dtype.replace(dtype.find("F32"), 3, "F8X");
  BOOST_TEST(data_error(write("dtype.safetensors", dtype)).find("dtype 'F8X'") != std::string::npos);
  std::string extra = bytes + "abcd";
  BOOST_TEST(data_error(write("extra.safetensors", extra)).find("cover 16 of the 20 data bytes") != std::string::npos);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(resuming_from_epoch_one_reproduces_the_uninterrupted_run) {
  const fs::path dir = fresh_dir("resume");
  // The uninterrupted run keeps every checkpoint; its epoch-1 checkpoint is what an interrupted
  // run of the same config would have left behind.
  const auto straight = train(3, dir / "a", {});
  const auto latest = kiln::train::latest_checkpoint(dir / "a");
  BOOST_REQUIRE(latest.has_value());
  BOOST_TEST(latest->filename() == "epoch-0003");
  const auto resumed = train(3, dir / "b", dir / "a" / "epoch-0001");
  BOOST_REQUIRE(resumed.size() == straight.size());
  std::size_t differ = 0;
  for (std::size_t i = 0; i < straight.size(); ++i) differ += straight[i] != resumed[i];
  BOOST_TEST(differ == 0u, differ << " of " << straight.size() << " parameters differ after resuming");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(only_the_newest_checkpoints_are_kept_and_partials_are_ignored) {
  const fs::path dir = fresh_dir("keep");
  (void)train(3, dir, {}, 2);
  BOOST_TEST(!fs::exists(dir / "epoch-0001"));
  BOOST_TEST(fs::exists(dir / "epoch-0002" / "trainer.safetensors"));
  BOOST_TEST(fs::exists(dir / "epoch-0003" / "model.safetensors"));
  fs::create_directories(dir / ".partial-epoch-0004");
  fs::create_directories(dir / "epoch-0009");  // incomplete: no files
  BOOST_TEST(kiln::train::latest_checkpoint(dir)->filename() == "epoch-0003");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(checkpoints_order_by_epoch_and_step_past_the_padding) {
  // As text, "epoch-10000" sorts before "epoch-2500": a run past epoch 9999 had its newest
  // checkpoints pruned as the oldest, and eval and --resume auto took an old one.
  const fs::path dir = fresh_dir("order");
  for (const char* name : {"epoch-10000", "epoch-2500", "epoch-0003-step-00000100", "epoch-0003",
                           "epoch-10000-step-123456789", "epoch-0003-step-00000099"}) {
    fs::create_directories(dir / name);
    std::ofstream(dir / name / "model.safetensors") << "x";
    std::ofstream(dir / name / "trainer.safetensors") << "x";
  }
  fs::create_directories(dir / "epoch-99999");        // incomplete: no files
  fs::create_directories(dir / "epoch-0004.old");     // not a name Kiln writes: never pruned
  fs::create_directories(dir / "epoch-0005-step-");   // nor this
  std::vector<std::string> names;
  for (const auto& p : kiln::train::checkpoints_oldest_first(dir, true)) names.push_back(p.filename().string());
  BOOST_TEST(names == (std::vector<std::string>{"epoch-0003", "epoch-0003-step-00000099", "epoch-0003-step-00000100",
                                                "epoch-2500", "epoch-10000", "epoch-10000-step-123456789"}),
             boost::test_tools::per_element());
  BOOST_TEST(kiln::train::checkpoints_oldest_first(dir, false).back().filename() == "epoch-99999");
  BOOST_TEST(kiln::train::latest_checkpoint(dir)->filename() == "epoch-10000-step-123456789");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_of_another_model_is_refused_by_name) {
  const fs::path dir = fresh_dir("mismatch");
  (void)train(1, dir / "a", {});
  Run run;
  using R = kiln::plugin::Registry;
  run.parts.backend = run.make(KILN_KIND_BACKEND, "cpu", "threads = 1", &R::create_backend);
  auto model = run.make(KILN_KIND_MODEL, "mlp", "hidden = [32]", &R::create_model);
  kiln::ModelBuildContext ctx;
  ctx.backend = run.parts.backend.get();
  ctx.max_batch = 4;
  model->build(ctx);
  auto opt = kiln::train::make_optimizer(
      "adam", kiln::test::core_table("optimizer", "", kiln::train::optimizer_schema("adam")));
  std::string msg;
  try {
    kiln::train::load_checkpoint(dir / "a" / "epoch-0001", *run.parts.backend, *model, *opt);
  } catch (const kiln::DataError& e) {
    msg = e.what();
  }
  BOOST_TEST(msg.find("tensor 'layers.0.weight' is f32(16, 784) but the model's is f32(32, 784)") != std::string::npos,
             msg);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(every_tensor_carries_a_checksum_and_a_flipped_byte_is_refused_naming_it) {
  const fs::path dir = fresh_dir("flip");
  (void)train(1, dir, {});
  const fs::path ckpt = dir / "epoch-0001";
  const auto weights = kiln::io::read_safetensors(ckpt / "model.safetensors");
  BOOST_TEST(weights.checksummed);
  BOOST_TEST(kiln::io::read_safetensors(ckpt / "trainer.safetensors").checksummed);
  // The checksum keys are checked and removed; what is left is the metadata callers asked for.
  BOOST_TEST(weights.metadata.count(kiln::io::checksum_key("layers.0.weight")) == 0u);
  BOOST_TEST(inspect_error(ckpt) == "<no error>");

  flip_tensor_byte(ckpt / "model.safetensors", "layers.0.weight");
  const std::string msg = inspect_error(ckpt);
  BOOST_TEST(msg.find((ckpt / "model.safetensors").string() + ": tensor 'layers.0.weight' does not match its "
                      "checksum") != std::string::npos, msg);
  BOOST_TEST(msg.find(kiln::train::kDamagedHint) != std::string::npos,
             msg);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_file_without_checksums_still_loads) {
  // What PyTorch's safetensors writes: no __metadata__ at all.
  const fs::path dir = fresh_dir("nocrc");
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  const float w[2] = {1.5f, -2.5f};
  bytes += header + std::string(reinterpret_cast<const char*>(w), sizeof w);
  std::ofstream(dir / "torch.safetensors", std::ios::binary) << bytes;
  const auto f = kiln::io::read_safetensors(dir / "torch.safetensors");
  BOOST_TEST(!f.checksummed);
  BOOST_TEST(f.tensors.at("w").data_as<float>()[1] == -2.5f);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(nonsense_trainer_metadata_is_a_data_error_naming_the_file) {
  // Rewritten through Kiln's writer, so the checksums are right: the value itself is the damage.
  const fs::path dir = fresh_dir("meta");
  (void)train(1, dir, {});
  const fs::path file = dir / "epoch-0001" / "trainer.safetensors";
  auto f = kiln::io::read_safetensors(file);
  std::vector<kiln::io::TensorRecord> records;
  for (const auto& [name, t] : f.tensors) records.push_back({name, t.dtype(), t.shape(), t.data()});
  f.metadata["epochs_done"] = "x";
  kiln::io::write_safetensors(file, records, f.metadata);
  const std::string msg = inspect_error(dir / "epoch-0001");
  BOOST_TEST(msg == file.string() + ": metadata 'epochs_done' = 'x' is not a non-negative whole number; the "
                                    "checkpoint is damaged; use an earlier one (kiln train --resume <dir>, kiln "
                                    "eval --checkpoint <dir>)");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_flipped_bit_in_the_position_metadata_is_refused) {
  // '1' (0x31) -> '0' (0x30) is one bit: before the metadata had a checksum of its own, this
  // resumed a run with an epoch still to do as if it had none done, silently.
  const fs::path dir = fresh_dir("metaflip");
  (void)train(1, dir, {});
  const fs::path file = dir / "epoch-0001" / "trainer.safetensors";
  BOOST_TEST(kiln::io::read_safetensors(file).metadata_checksummed);
  std::string bytes = slurp(file);
  const std::size_t at = bytes.find("\"epochs_done\":\"1\"");
  BOOST_TEST_REQUIRE(at != std::string::npos);
  bytes[at + 15] = '0';
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const std::string msg = inspect_error(dir / "epoch-0001");
  BOOST_TEST(msg.find(file.string() + ": the header's metadata does not match its checksum (CRC-32C ") == 0u, msg);
  BOOST_TEST(msg.find(kiln::train::kDamagedHint) != std::string::npos,
             msg);
  // A file written without the metadata checksum (an older Kiln) still loads: its tensors are
  // still verified, and the value is what the file says.
  bytes[at + 15] = '1';
  const std::size_t key = bytes.find("\"kiln.metadata.crc32c\"");
  BOOST_TEST_REQUIRE(key != std::string::npos);
  bytes.replace(key, 22, "\"kiln.metadata.other\"\x20");  // same length: offsets stay valid
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes;
  const auto old = kiln::io::read_safetensors(file);
  BOOST_TEST(!old.metadata_checksummed);
  BOOST_TEST(old.checksummed);
  BOOST_TEST(old.metadata.at("epochs_done") == "1");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_non_finite_precision_value_is_refused_even_with_valid_checksums) {
  // Rewritten through Kiln's writer, so the checksums are right: the metadata itself is the damage.
  const fs::path dir = fresh_dir("nan");
  (void)train(1, dir, {});
  const fs::path file = dir / "epoch-0001" / "trainer.safetensors";
  auto f = kiln::io::read_safetensors(file);
  std::vector<kiln::io::TensorRecord> records;
  for (const auto& [name, t] : f.tensors) records.push_back({name, t.dtype(), t.shape(), t.data()});
  f.metadata["precision.loss_scale"] = "nan";
  kiln::io::write_safetensors(file, records, f.metadata);
  BOOST_TEST(inspect_error(dir / "epoch-0001") ==
             file.string() + ": metadata 'precision.loss_scale' = 'nan' is not a finite number; the checkpoint is "
                             "damaged; use an earlier one (kiln train --resume <dir>, kiln eval --checkpoint <dir>)");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_newest_intact_checkpoint_is_found_past_a_damaged_newest) {
  const fs::path dir = fresh_dir("fallback");
  (void)train(2, dir, {});
  BOOST_TEST(kiln::train::latest_intact_checkpoint(dir)->dir.filename() == "epoch-0002");
  flip_tensor_byte(dir / "epoch-0002" / "trainer.safetensors", "exp_avg.layers.0.weight");
  const auto intact = kiln::train::latest_intact_checkpoint(dir);
  BOOST_REQUIRE(intact.has_value());
  BOOST_TEST(intact->dir.filename() == "epoch-0001");
  BOOST_TEST(intact->state.epochs_done == 1);
  flip_tensor_byte(dir / "epoch-0001" / "model.safetensors", "head.bias");
  BOOST_TEST(!kiln::train::latest_intact_checkpoint(dir).has_value());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_checkpoint_file_that_is_not_a_file_is_damaged_and_skipped) {
  // A read error left a stream exception ("basic_filebuf::underflow ...") that named no file,
  // ended kiln as an internal error and stopped --resume auto's fallback; a named pipe hung it.
  const fs::path dir = fresh_dir("not-a-file");
  (void)train(2, dir, {});
  fs::remove(dir / "epoch-0002" / "model.safetensors");
  fs::create_directories(dir / "epoch-0002" / "model.safetensors");
  BOOST_TEST(inspect_error(dir / "epoch-0002") == (dir / "epoch-0002" / "model.safetensors").string() +
                                                      " is a directory, not a file; " + kiln::train::kDamagedHint);
  const auto intact = kiln::train::latest_intact_checkpoint(dir);
  BOOST_REQUIRE(intact.has_value());
  BOOST_TEST(intact->dir.filename() == "epoch-0001");
  fs::remove(dir / "epoch-0001" / "trainer.safetensors");
  BOOST_REQUIRE(::mkfifo((dir / "epoch-0001" / "trainer.safetensors").c_str(), 0600) == 0);
  BOOST_TEST(inspect_error(dir / "epoch-0001") == (dir / "epoch-0001" / "trainer.safetensors").string() +
                                                      " is a FIFO (named pipe), not a file; " + kiln::train::kDamagedHint);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_run_identity_is_recorded_and_differences_are_named) {
  const fs::path dir = fresh_dir("identity");
  (void)train(1, dir, {}, 3, {{"model.hidden", "[16]"}, {"world_size", "1"}});
  const auto st = kiln::train::inspect_checkpoint(dir / "epoch-0001");
  BOOST_TEST(st.run.at("model.hidden") == "[16]");
  const auto diffs = kiln::train::identity_differences(st.run, {{"model.hidden", "[32]"}, {"seed", "7"}});
  BOOST_REQUIRE(diffs.size() == 3u);
  BOOST_TEST(diffs[0] == "checkpoint was written with model.hidden = [16], this run has [32]");
  BOOST_TEST(diffs[1] == "checkpoint was written with seed = none, this run has 7");
  BOOST_TEST(diffs[2] == "checkpoint was written with world_size = 1, this run has none");
  BOOST_TEST(kiln::train::param_text(kiln::ParamValue(std::vector<std::int64_t>{128, 64})) == "[128, 64]");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(the_class_names_travel_with_the_weights) {
  // In model.safetensors' own metadata (the file a user takes elsewhere), read back by inspect
  // and by load; a run without names writes no key.
  const fs::path dir = fresh_dir("class-names");
  const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
  (void)train(2, dir / "named", {}, 3, {}, names);
  const auto meta = kiln::io::read_safetensors(dir / "named" / "epoch-0001" / "model.safetensors").metadata;
  BOOST_TEST(meta.at("class_names").rfind("[\"T-shirt/top\",\"Trouser\",", 0) == 0u);
  BOOST_TEST(kiln::train::inspect_checkpoint(dir / "named" / "epoch-0001").class_names == names,
             boost::test_tools::per_element());
  (void)train(1, dir / "unnamed", {});
  BOOST_TEST(kiln::io::read_safetensors(dir / "unnamed" / "epoch-0001" / "model.safetensors").metadata.count(
                 "class_names") == 0u);
  BOOST_TEST(kiln::train::inspect_checkpoint(dir / "unnamed" / "epoch-0001").class_names.empty());
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
