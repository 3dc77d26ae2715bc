// WaitReportingStore (kiln/dist/wait_reporting_store.hpp): a long wait reports the ranks it still
// waits for every `every`, and its final error speaks of the whole timeout; a key that arrives
// between two reports is returned; errors other than timeouts pass through at once; off, it waits
// in one piece. The slices follow the report times, not the clock, so the counts are exact.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "comm_fixture.hpp"
#include "kiln/dist/memory_store.hpp"
#include "kiln/dist/wait_reporting_store.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

using std::chrono::milliseconds;

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A store whose waits fail with a lost connection, counting the calls.
class BrokenStore final : public Store {
 public:
  int calls = 0;
  void set(const std::string&, const std::vector<std::uint8_t>&) override {}
  std::vector<std::uint8_t> get(const std::string&, milliseconds) override { fail(); }
  std::int64_t add(const std::string&, std::int64_t) override { return 0; }
  void wait(const std::vector<std::string>&, milliseconds) override { fail(); }

 private:
  [[noreturn]] void fail() {
    ++calls;
    throw CommError("rank 1 of 4 lost its connection to the rendezvous store");
  }
};

}  // namespace

BOOST_AUTO_TEST_SUITE(wait_reporting_store)

BOOST_AUTO_TEST_CASE(a_long_wait_reports_the_missing_ranks_then_fails_with_the_whole_timeout) {
  dist::MemoryStore inner(4);
  inner.set("gloo/rank0", bytes("x"));
  inner.set("gloo/rank1", bytes("x"));
  std::vector<std::string> reports;
  dist::WaitReportingStore store(inner, {milliseconds(100), [&](const std::string& m) { reports.push_back(m); }}, 1);
  const auto msg = error_text<CommError>(
      [&] { store.wait({"gloo/rank0", "gloo/rank1", "gloo/rank2", "gloo/rank3"}, milliseconds(350)); });
  // Slices end at 100, 200 and 300 ms (a report each) and at 350 ms (the error).
  BOOST_TEST_REQUIRE(reports.size() == 3u);
  for (const auto& r : reports) {
    BOOST_TEST(contains(r, "rank 1 has waited "), r);
    BOOST_TEST(contains(r, " at the rendezvous for ranks 2, 3 of 4 (missing keys: gloo/rank2, gloo/rank3 in the "
                           "in-memory store); it gives up after 0.35 s (dist.timeout_s)"),
               r);
  }
  BOOST_TEST(contains(msg, "rendezvous timed out after 0.35 s waiting for ranks 2, 3 of 4"), msg);
}

BOOST_AUTO_TEST_CASE(a_key_that_arrives_between_reports_is_returned) {
  dist::MemoryStore inner(2);
  std::vector<std::string> reports;
  // The report itself writes the key (the waiting thread holds no lock while it reports), so the
  // key is missing in the first slice and present in the second.
  dist::WaitReportingStore store(inner,
                                 {milliseconds(50),
                                  [&](const std::string& m) {
                                    reports.push_back(m);
                                    inner.set("kiln/agreement/rank1", bytes("facts"));
                                  }},
                                 0);
  const auto got = store.get("kiln/agreement/rank1", milliseconds(60'000));
  BOOST_TEST(std::string(got.begin(), got.end()) == "facts");
  BOOST_TEST_REQUIRE(reports.size() == 1u);
  BOOST_TEST(contains(reports[0], "rank 0 has waited "), reports[0]);
  BOOST_TEST(contains(reports[0], " at the rendezvous for rank 1 of 2 (missing keys: kiln/agreement/rank1"), reports[0]);
}

BOOST_AUTO_TEST_CASE(other_errors_pass_through_at_once) {
  BrokenStore inner;
  int reports = 0;
  dist::WaitReportingStore store(inner, {milliseconds(10), [&](const std::string&) { ++reports; }}, 1);
  const auto msg = error_text<CommError>([&] { store.wait({"gloo/rank2"}, milliseconds(60'000)); });
  BOOST_TEST(contains(msg, "lost its connection"), msg);
  BOOST_TEST(inner.calls == 1);
  BOOST_TEST(reports == 0);
}

BOOST_AUTO_TEST_CASE(off_or_short_waits_wait_in_one_piece) {
  dist::MemoryStore inner(2);
  int reports = 0;
  const auto count = [&](const std::string&) { ++reports; };
  dist::WaitReportingStore off(inner, {milliseconds(0), count}, 0);
  BOOST_TEST(contains(error_text<CommError>([&] { off.wait({"gloo/rank1"}, milliseconds(120)); }),
                      "timed out after 0.12 s waiting for rank 1 of 2"));
  dist::WaitReportingStore longer(inner, {milliseconds(500), count}, 0);
  BOOST_TEST(contains(error_text<CommError>([&] { longer.get("gloo/rank1", milliseconds(120)); }),
                      "timed out after 0.12 s waiting for rank 1 of 2"));
  BOOST_TEST(reports == 0);
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
