// Targets for the core's readers of files a run finds on disk: the JSON parser (safetensors
// headers, metrics.jsonl records), safetensors checkpoints and weights, the metrics.jsonl
// trim a resumed run does, the ranks' collective records `kiln collectives` reads, and a run
// directory's status.json.
#include <optional>

#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "kiln/io/json.hpp"
#include "kiln/io/run_status.hpp"
#include "kiln/io/metrics_trim.hpp"
#include "kiln/io/safetensors.hpp"
#include "kiln/train/collective_report.hpp"

namespace kiln::fuzz {
namespace {

/// Every string the parser accepted must come back unchanged through json_quoted(), the escape
/// Kiln's own JSON writers use (parsed strings are valid UTF-8, which json_quoted keeps as is).
void check_strings_round_trip(const io::JsonValue& value) {
  using Kind = io::JsonValue::Kind;
  auto check = [](const std::string& s) {
    const io::JsonValue again = io::parse_json(io::json_quoted(s), "json_quoted()");
    if (again.kind != Kind::string || again.text != s)
      finding("json_quoted() of a parsed string does not parse back to it: " + io::json_quoted(s));
  };
  if (value.kind == Kind::string) check(value.text);
  for (const auto& element : value.array) check_strings_round_trip(element);
  for (const auto& [key, element] : value.object) {
    check(key);
    check_strings_round_trip(element);
  }
}

bool run_json(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  // Whatever the bytes, json_quoted() must make a JSON string of them.
  try {
    if (io::parse_json(io::json_quoted(text), "quoted").kind != io::JsonValue::Kind::string)
      finding("json_quoted() did not make a JSON string");
  } catch (const kiln::Error& e) {
    finding(std::string("json_quoted() made text the parser rejects: ") + e.what());
  }
  try {
    const io::JsonValue value = io::parse_json(text, "fuzz.json");
    check_strings_round_trip(value);
    for (const auto& [key, element] : value.object) {
      try {
        (void)element.as_uint(key);
      } catch (const kiln::DataError& e) {
        expect_named(e, key);
      }
    }
    return true;
  } catch (const kiln::DataError& e) {
    expect_named(e, "fuzz.json");
    return false;
  }
}

std::vector<Bytes> json_seeds() {
  return {bytes_of(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},"__metadata__":{"k":"v"}})"),
          bytes_of(R"({"epoch": 3, "step": 18446744073709551615, "loss": -1.5e-3, "ok": true, "x": null})"),
          bytes_of(R"(["\u00e9\ud83d\ude00", "tab\there", [[[]]], {}, 0, -0.0, 1E+2])"),
          bytes_of("  \"caf\xc3\xa9\"  ")};
}

// ---- safetensors ------------------------------------------------------------------------------

bool run_safetensors(Input input) {
  const std::string path = scratch_dir() + "/fuzz.safetensors";
  write_bytes(path, input);
  try {
    const io::SafetensorsFile file = io::read_safetensors(path);
    for (const auto& [name, tensor] : file.tensors) (void)tensor.numel();
    return true;
  } catch (const kiln::Error& e) {
    expect_named(e, path);
    return false;
  }
}

std::vector<Bytes> safetensors_seeds() {
  const std::string path = scratch_dir() + "/seed.safetensors";
  const float weights[6] = {1, -2, 3.5f, 0, 1e-30f, -7};
  const std::uint16_t half[4] = {0x3c00, 0xbc00, 0x7bff, 0};
  const std::int64_t counts[2] = {5, -9};
  std::vector<Bytes> seeds;
  // Kiln's own writer: per-tensor and metadata checksums, as in a checkpoint.
  io::write_safetensors(path,
                        {{"layer.weight", DType::f32, {2, 3}, weights},
                         {"layer.bias", DType::bf16, {4}, half},
                         {"step", DType::i64, {2}, counts}},
                        {{"kiln.epoch", "3"}, {"kiln.run", "fuzz"}});
  seeds.push_back(read_bytes(path));
  // A file as PyTorch's safetensors writes it: no checksums, a scalar and an empty tensor.
  const Bytes plain = plain_safetensors(R"({"a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                                        R"("e":{"dtype":"F16","shape":[0,3],"data_offsets":[4,4]}})",
                                        4);
  seeds.push_back(plain);
  return seeds;
}

// ---- metrics.jsonl trim on resume -------------------------------------------------------------

bool run_metrics_trim(Input input) {
  const std::string path = scratch_dir() + "/metrics.jsonl";
  write_bytes(path, input);
  try {
    const std::int64_t dropped = io::drop_metrics_after(path, 2, 12);
    if (dropped < 0) finding("drop_metrics_after() returned a negative count");
    return true;
  } catch (const kiln::Error& e) {
    expect_named(e, path);
    return false;
  }
}

std::vector<Bytes> metrics_trim_seeds() {
  return {bytes_of("{\"epoch\": 1, \"step\": 6, \"loss\": 0.5}\n"
                   "{\"step\": 7, \"lr\": 0.1}\n"
                   "{\"epoch\": 3, \"step\": 18}\n"
                   "not json at all\n"
                   "{\"step\": 13, \"loss\""),
          bytes_of("{\"epoch\": 2}\n{\"epoch\": 2.5}\n{\"step\": -1}\n\n")};
}

// ---- the ranks' collective records (<run_dir>/debug/rank<N>.json) ----------------------------

bool run_collective_record(Input input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  try {
    const train::RankTrace t = train::parse_rank_trace(text, "debug/rank0.json");
    // An accepted record goes through the whole analysis, alone and next to a peer one
    // collective behind it (so sequence numbers are compared and a rank is found behind).
    train::TraceSet set;
    set.world = t.world;
    set.traces.push_back(t);
    (void)train::verdict(set);
    if (t.world > 1) {
      train::RankTrace peer = t;
      peer.rank = t.rank == 0 ? 1 : 0;
      if (!peer.entries.empty()) peer.entries.pop_back();
      peer.issued = peer.entries.empty() ? 0 : peer.entries.back().seq;
      set.traces.push_back(peer);
      (void)train::verdict(set);
    }
    (void)train::rank_lines(set);
    (void)train::entry_lines(t, 8);
    return true;
  } catch (const kiln::DataError& e) {
    expect_named(e, "debug/rank0.json");
    return false;
  }
}

std::vector<Bytes> collective_record_seeds() {
  train::RankTrace t;
  t.rank = 1;
  t.world = 3;
  t.host = "vm";
  t.pid = 4242;
  t.communicator = "gloo ring over tcp (host vm)";
  t.reason = "collective #3 timed out after 5 s";
  t.phase = "training";
  t.epoch = 1;
  t.epochs = 2;
  t.step = 7;
  t.steps = 468;
  t.started_ms = 1'796'470'706'256;
  t.written_ms = 1'796'470'709'269;
  t.issued = 3;
  for (std::int64_t seq = 1; seq <= 3; ++seq) {
    train::CollectiveEntry e;
    e.seq = seq;
    e.op = seq == 2 ? "broadcast(root 0)" : "all_reduce(sum)";
    e.dtype = "f32";
    e.count = 101770;
    e.purpose = "gradients, bucket 0";
    e.phase = "training";
    e.epoch = 1;
    e.step = seq;
    e.issued_ms = t.started_ms + seq * 10;
    e.wait_ms = e.issued_ms + 1;
    e.end_ms = seq < 3 ? e.issued_ms + 4 : -1;
    t.entries.push_back(e);
  }
  train::RankTrace empty = t;
  empty.rank = 0;
  empty.entries.clear();
  empty.issued = 0;
  empty.reason = "received SIGTERM";
  return {bytes_of(train::to_json(t)), bytes_of(train::to_json(empty))};
}

// ---- <run_dir>/status.json, read by `kiln runs` and the --nproc supervisor -------------------------

bool run_run_status(Input input) {
  const std::string dir = scratch_dir();
  write_bytes(dir + "/status.json", input);
  // Never an exception: a file it cannot read as its own is "none" (the supervisor leaves it alone).
  const std::optional<io::RunStatus> s = io::read_run_status(dir);
  if (!s) return false;
  // What it accepted, written again, reads back the same.
  write_bytes(dir + "/status.json", bytes_of(io::run_status_json(*s)));
  const std::optional<io::RunStatus> again = io::read_run_status(dir);
  if (!again || again->state != s->state || again->epoch != s->epoch || again->epochs != s->epochs ||
      again->step != s->step || again->message != s->message || again->pid != s->pid || again->host != s->host ||
      again->final_test_accuracy.has_value() != s->final_test_accuracy.has_value()) {
    finding("a status.json it accepted does not read back the same once written again");
  }
  return true;
}

std::vector<Bytes> run_status_seeds() {
  io::RunStatus s;
  s.state = "failed";
  s.epoch = 2;
  s.epochs = 3;
  s.step = 1874;
  s.message = "epoch 3/3 step 2/937: the training loss is nan (on this rank)";
  s.pid = 4540;
  s.host = "vm";
  s.started = 1796579458.495027;
  s.updated = 1796579458.536720;
  io::RunStatus done = s;
  done.state = "completed";
  done.message.clear();
  done.final_test_accuracy = 0.8565;
  return {bytes_of(io::run_status_json(s)), bytes_of(io::run_status_json(done))};
}

const Target kTargets[] = {
    {"json", "kiln::io::parse_json (safetensors headers, metrics.jsonl records) and json_quoted",
     run_json, json_seeds},
    {"safetensors", "kiln::io::read_safetensors (checkpoints, [model] init weights)", run_safetensors,
     safetensors_seeds},
    {"metrics_trim", "kiln::io::drop_metrics_after (metrics.jsonl when a run resumes)", run_metrics_trim,
     metrics_trim_seeds},
    {"collective_record", "kiln::train::parse_rank_trace and the analysis of `kiln collectives`",
     run_collective_record, collective_record_seeds},
    {"run_status", "kiln::io::read_run_status (status.json: `kiln runs`, the --nproc supervisor)", run_run_status,
     run_status_seeds},
};

}  // namespace

std::span<const Target> core_io_targets() { return kTargets; }

}  // namespace kiln::fuzz
