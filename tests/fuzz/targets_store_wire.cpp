// Targets for what a rank reads from other ranks through the rendezvous store: the TCP store's
// frames (a server decodes requests from any client that connects; a client decodes replies),
// the decimal counters that add() keeps, and each rank's facts for the agreement check.
#include <algorithm>

#include "counter_value.hpp"
#include "fuzz_target.hpp"
#include "kiln/errors.hpp"
#include "kiln/train/rank_agreement.hpp"
#include "tcp_wire.hpp"

namespace kiln::fuzz {
namespace {

namespace wire = dist::wire;

/// A decoded frame must encode back to the very bytes it came from: decode accepts only the
/// encoding Kiln writes (no trailing bytes, no second spelling of a field).
template <typename Message>
void expect_round_trip(const Message& message, Input body, const char* what) {
  std::vector<std::uint8_t> frame;
  try {
    frame = wire::encode(message);
  } catch (const kiln::CommError& e) {
    finding(std::string("a decoded ") + what + " does not encode again: " + e.what());
  }
  if (frame.size() != wire::kHeader + body.size() ||
      !std::equal(body.begin(), body.end(), frame.begin() + wire::kHeader))
    finding(std::string("a decoded ") + what + " encodes to other bytes than it was decoded from");
  const wire::FrameLength length = wire::frame_length(frame.data());
  if (!length.error.empty() || length.length != body.size())
    finding(std::string("the frame header of a re-encoded ") + what + " is wrong: " + length.error);
}

/// Input: byte 0 chooses request (even) or reply (odd); the rest is a frame body.
bool run_store_wire(Input input) {
  if (input.empty()) return false;
  bool accepted = false;
  const Input body = input.subspan(1);
  if (input[0] % 2 == 0) {
    const wire::Decoded decoded = wire::decode_request(body.data(), body.size());
    if (decoded.request.has_value() == !decoded.error.empty())
      finding("decode_request gave both or neither of a request and an error");
    if (decoded.request) expect_round_trip(*decoded.request, body, "request");
    accepted = decoded.request.has_value();
  } else {
    const wire::DecodedReply decoded = wire::decode_reply(body.data(), body.size());
    if (decoded.reply.has_value() == !decoded.error.empty())
      finding("decode_reply gave both or neither of a reply and an error");
    if (decoded.reply) expect_round_trip(*decoded.reply, body, "reply");
    accepted = decoded.reply.has_value();
  }
  if (body.size() >= wire::kHeader) {
    const wire::FrameLength length = wire::frame_length(body.data());
    if (length.error.empty() == (length.length == 0 || length.length > wire::kMaxFrame))
      finding("frame_length accepted a length out of range, or refused one in range");
  }
  return accepted;
}

Bytes body_of(const std::vector<std::uint8_t>& frame, std::uint8_t selector) {
  Bytes input{selector};
  input.insert(input.end(), frame.begin() + wire::kHeader, frame.end());
  return input;
}

std::vector<Bytes> store_wire_seeds() {
  wire::Request hello;
  hello.version = wire::kVersion;
  hello.rank = 3;
  wire::Request set{wire::Op::set, 0, 0, {"rank/1/addr"}, {'1', '0', '.', '0'}, 0, 0};
  wire::Request get{wire::Op::get, 0, 0, {"rank/0/addr"}, {}, 0, 30000};
  wire::Request add{wire::Op::add, 0, 0, {"barrier/epoch-2"}, {}, -5, 0};
  wire::Request wait{wire::Op::wait, 0, 0, {"a", "b", ""}, {}, 0, 604800000};
  wire::Reply value{wire::Status::value, {0, 255, 7}, 0, {}, {}};
  wire::Reply integer{wire::Status::integer, {}, -9000000000, {}, {}};
  wire::Reply timeout{wire::Status::timeout, {}, 0, {"rank/2/addr", "rank/3/addr"}, {}};
  wire::Reply error{wire::Status::error, {}, 0, {}, "rank 4 is not in this run"};
  std::vector<Bytes> seeds;
  for (const auto& request : {hello, set, get, add, wait}) seeds.push_back(body_of(wire::encode(request), 0));
  for (const auto& reply : {wire::Reply{}, value, integer, timeout, error})
    seeds.push_back(body_of(wire::encode(reply), 1));
  return seeds;
}

bool run_store_counter(Input input) {
  const std::vector<std::uint8_t> bytes(input.begin(), input.end());
  try {
    const std::int64_t value = dist::detail::parse_counter(bytes, "fuzz/counter", "the fuzz store");
    if (dist::detail::parse_counter(dist::detail::format_counter(value), "again", "here") != value)
      finding("a counter does not read back what format_counter wrote");
    return true;
  } catch (const kiln::CommError& e) {
    expect_named(e, "fuzz/counter");
    return false;
  }
}

std::vector<Bytes> store_counter_seeds() {
  return {Bytes{}, dist::detail::format_counter(0), dist::detail::format_counter(-9223372036854775807 - 1),
          dist::detail::format_counter(9223372036854775807), Bytes{'-', '1', '2'}};
}

/// Facts that decode must encode to bytes that decode to the same facts, and then go through the
/// comparison with another rank's and the verdict.
bool run_rank_facts(Input input) {
  const std::vector<std::uint8_t> bytes(input.begin(), input.end());
  try {
    const train::RankFacts facts = train::decode(bytes, "rank 1's facts");
    const train::RankFacts again = train::decode(train::encode(facts), "re-encoded facts");
    if (again.must_match != facts.must_match || again.should_match != facts.should_match ||
        again.close.size() != facts.close.size())
      finding("decoded facts do not survive encode and decode");
    train::RankFacts rank0;
    rank0.must_match["optimizer.lr"] = "0.001";
    rank0.close["data.train's samples"] = {3, 10, 12, 40};
    std::vector<train::FactDifferences> by_rank = {{}, train::compare(rank0, facts)};
    (void)train::agreement_verdict(by_rank);
    return true;
  } catch (const kiln::CommError& e) {
    expect_named(e, "rank 1's facts");
    return false;
  }
}

std::vector<Bytes> rank_facts_seeds() {
  train::RankFacts f;
  f.must_match["optimizer.lr"] = "0.001";
  f.must_match["run.run_dir"] = "\"/runs/x\"";
  f.close["data.train's samples"] = {3, 10.5, 12, -40, 7, 1e-300, 5, 9};
  f.should_match["model plugin 'mlp' (libkiln-model-mlp.so)"] = "0f0e40157289f67da355f0fac5cb7be7aeba0d0a";
  return {train::encode(f), train::encode(train::RankFacts{})};
}

const Target kTargets[] = {
    {"store_wire", "the TCP store's frames: kiln::dist::wire::decode_request, decode_reply, frame_length",
     run_store_wire, store_wire_seeds},
    {"store_counter", "kiln::dist::detail::parse_counter (add() counters read back from a store)",
     run_store_counter, store_counter_seeds},
    {"rank_facts", "kiln::train::decode (each rank's facts for the agreement check), compare and the verdict",
     run_rank_facts, rank_facts_seeds},
};

}  // namespace

std::span<const Target> store_wire_targets() { return kTargets; }

}  // namespace kiln::fuzz
