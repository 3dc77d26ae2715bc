// Rendezvous stores: MemoryStore and FileStore across threads (set/get/wait/add), timeout
// messages that name the missing ranks, make_store's specs, and a file: directory reused by run
// after run.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <unistd.h>

#include "comm_fixture.hpp"
#include "kiln/dist/file_store.hpp"
#include "kiln/dist/memory_store.hpp"
#include "kiln/dist/stores.hpp"
#include "kiln/errors.hpp"

namespace kiln::test {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::vector<std::uint8_t> bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string text(const std::vector<std::uint8_t>& b) { return {b.begin(), b.end()}; }

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("kiln-test-comm-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Every rank sets "<prefix>/rank<r>" and reads every other rank's value.
void exchange_across_threads(Store& store, int world) {
  std::vector<std::string> got(static_cast<std::size_t>(world * world));
  const auto errors = run_ranks(world, [&](int r) {
    store.set("ex/rank" + std::to_string(r), bytes("hello from " + std::to_string(r)));
    for (int p = 0; p < world; ++p) {
      got[static_cast<std::size_t>(r * world + p)] = text(store.get("ex/rank" + std::to_string(p), milliseconds(10000)));
    }
  });
  for (int r = 0; r < world; ++r) {
    BOOST_TEST(errors[static_cast<std::size_t>(r)] == "");
    for (int p = 0; p < world; ++p) BOOST_TEST(got[static_cast<std::size_t>(r * world + p)] == "hello from " + std::to_string(p));
  }
}

/// 4 threads x 50 add(1) must end at exactly 200 (and the last add() returns it).
void atomic_adds(Store& store) {
  std::vector<std::int64_t> last(4);
  const auto errors = run_ranks(4, [&](int r) {
    for (int k = 0; k < 50; ++k) last[static_cast<std::size_t>(r)] = store.add("counter", 1);
  });
  for (const auto& e : errors) BOOST_TEST(e == "");
  BOOST_TEST(*std::max_element(last.begin(), last.end()) == 200);
  BOOST_TEST(store.add("counter", 0) == 200);
  BOOST_TEST(text(store.get("counter", milliseconds(10))) == "200");
  BOOST_TEST(store.add("counter", -201) == -1);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(stores)

BOOST_AUTO_TEST_CASE(memory_store_exchange_and_add) {
  dist::MemoryStore store(8);
  exchange_across_threads(store, 8);
  atomic_adds(store);
  store.set("k", bytes("a"));
  store.set("k", bytes("b"));
  BOOST_TEST(text(store.get("k", milliseconds(0))) == "b");
}

BOOST_AUTO_TEST_CASE(memory_store_timeout_names_missing_ranks) {
  dist::MemoryStore store(8);
  std::vector<std::string> keys;
  for (int r = 0; r < 8; ++r) {
    keys.push_back("gloo/rank" + std::to_string(r));
    if (r != 3 && r != 5) store.set(keys.back(), bytes("x"));
  }
  const auto msg = error_text<CommError>([&] { store.wait(keys, milliseconds(50)); });
  BOOST_TEST(msg.find("rendezvous timed out after 0.05 s waiting for ranks 3, 5 of 8") != std::string::npos, msg);
  BOOST_TEST(msg.find("gloo/rank3, gloo/rank5") != std::string::npos, msg);
  const auto one = error_text<CommError>([&] { store.get("some/key", milliseconds(1000)); });
  BOOST_TEST(one.find("timed out after 1 s waiting for 1 key (missing keys: some/key in the in-memory store)") !=
                 std::string::npos, one);
}

BOOST_AUTO_TEST_CASE(file_store_exchange_and_add) {
  TempDir dir("fs");
  dist::FileStore store(dir.path / "nested" / "store", 8);
  BOOST_TEST(fs::is_directory(dir.path / "nested" / "store"));
  exchange_across_threads(store, 8);
  atomic_adds(store);
  // Keys with odd characters map to one flat file each and round-trip.
  store.set("a/b c:d", bytes(std::string("\0\x01\xff", 3)));
  BOOST_TEST(store.get("a/b c:d", milliseconds(0)).size() == 3u);
  BOOST_TEST(store.path_of("a/b c:d").parent_path() == dir.path / "nested" / "store");
  // A second store object on the same directory (another process, as far as it knows) sees it.
  dist::FileStore other(dir.path / "nested" / "store");
  BOOST_TEST(text(other.get("ex/rank7", milliseconds(0))) == "hello from 7");
  BOOST_TEST(other.add("counter", 2) == 1);
}

BOOST_AUTO_TEST_CASE(file_store_waits_for_late_writer) {
  TempDir dir("late");
  dist::FileStore store(dir.path, 2);
  std::thread writer([&] {
    dist::FileStore late(dir.path, 2);
    std::this_thread::sleep_for(milliseconds(100));
    late.set("r/rank1", bytes("late"));
  });
  const auto value = store.get("r/rank1", milliseconds(20000));
  writer.join();
  BOOST_TEST(text(value) == "late");
}

BOOST_AUTO_TEST_CASE(file_store_timeout_names_missing_ranks) {
  TempDir dir("timeout");
  dist::FileStore store(dir.path, 8);
  std::vector<std::string> keys;
  for (int r = 0; r < 8; ++r) {
    keys.push_back("job/rank" + std::to_string(r));
    if (r != 3 && r != 5) store.set(keys.back(), bytes("x"));
  }
  const auto msg = error_text<CommError>([&] { store.wait(keys, milliseconds(200)); });
  BOOST_TEST(msg.find("waiting for ranks 3, 5 of 8") != std::string::npos, msg);
  BOOST_TEST(msg.find("job/rank3, job/rank5 in file store " + dir.path.string()) != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(make_store_specs) {
  TempDir dir("make");
  RankInfo two;
  two.world_size = 2;
  two.source = "RANK/WORLD_SIZE";
  auto store = dist::make_store("file:" + dir.path.string(), two);
  BOOST_TEST(dynamic_cast<dist::FileStore*>(store.get()) != nullptr);
  BOOST_TEST(fs::is_directory(dir.path));

  RankInfo one;
  BOOST_TEST(dynamic_cast<dist::MemoryStore*>(dist::make_store("memory", one).get()) != nullptr);
  const auto mem = error_text<ConfigError>([&] { dist::make_store("memory", two); });
  BOOST_TEST(mem.find("store 'memory' only works inside one process, but the world has 2 ranks "
                      "(from RANK/WORLD_SIZE)") != std::string::npos, mem);
  const auto bad = error_text<ConfigError>([&] { dist::make_store("redis://x", one); });
  BOOST_TEST(bad.find("unknown rendezvous store 'redis://x'; use tcp://<host>:<port>") != std::string::npos, bad);
  const auto empty = error_text<ConfigError>([&] { dist::make_store("file:", one); });
  BOOST_TEST(empty.find("names no directory") != std::string::npos, empty);
  const auto io = error_text<IoError>([&] { dist::make_store("file:/proc/kiln-cannot-exist/x", one); });
  BOOST_TEST(io.find("cannot create the rendezvous store directory /proc/kiln-cannot-exist/x") != std::string::npos, io);
}

// One file: directory for run after run (stores.hpp): a run empties it once its ranks have
// connected, and on a failed start; a key only this rank writes, found already there, is refused.
BOOST_AUTO_TEST_CASE(a_file_store_is_emptied_of_its_keys_and_nothing_else) {
  TempDir dir("forget");
  dist::FileStore store(dir.path, 2);
  store.set("gloo/rank0", bytes("address"));
  store.set("kiln/agreement/rank1", bytes("facts"));
  BOOST_TEST(store.add("barrier", 1) == 1);  // a value and a lock file
  { std::ofstream(dir.path / "notes.txt") << "the user's own file"; }
  BOOST_TEST(dist::forget_rendezvous_keys(store) == 4u);
  BOOST_TEST(!fs::exists(store.path_of("gloo/rank0")));
  BOOST_TEST(!fs::exists(store.path_of("barrier")));
  BOOST_TEST(fs::exists(dir.path / "notes.txt"));
  BOOST_TEST(fs::is_directory(dir.path));
  BOOST_TEST(store.add("barrier", 1) == 1);  // counts from zero again
  dist::MemoryStore memory(1);
  memory.set("k", bytes("v"));
  BOOST_TEST(dist::forget_rendezvous_keys(memory) == 0u);  // lives and dies with its process
  BOOST_TEST(text(memory.get("k", milliseconds(0))) == "v");
}

BOOST_AUTO_TEST_CASE(a_key_only_this_rank_writes_is_refused_when_already_there) {
  TempDir dir("earlier");
  dist::FileStore store(dir.path, 4);
  const RankInfo rank2{2, 4, 2, 4, "RANK/WORLD_SIZE"};
  const std::string where = "file:" + dir.path.string();
  dist::refuse_earlier_keys(store, "kiln/agreement/rank2", rank2, where);  // absent: fine
  store.set("kiln/agreement/rank1", bytes("another rank's"));
  dist::refuse_earlier_keys(store, "kiln/agreement/rank2", rank2, where);
  store.set("kiln/agreement/rank2", bytes("an earlier run's"));
  const auto msg = error_text<ConfigError>([&] { dist::refuse_earlier_keys(store, "kiln/agreement/rank2", rank2, where); });
  BOOST_TEST(msg.find("rank 2 of 4: the rendezvous store " + where +
                      " already holds 'kiln/agreement/rank2', which only rank 2 writes, once per run: an earlier run "
                      "left it there") == 0u,
             msg);
  BOOST_TEST(msg.find("Empty the directory (rm " + dir.path.string() + "/k_*)") != std::string::npos, msg);
  BOOST_TEST(msg.find("nothing was written") != std::string::npos, msg);
}

BOOST_AUTO_TEST_CASE(a_start_that_fails_before_the_ranks_connected_forgets_the_keys) {
  TempDir dir("failed");
  dist::FileStore store(dir.path, 2);
  /// A start on `rank` that sets `key`, calls `more` and fails while the store is in use.
  const auto failed_start = [&](int rank, const std::string& key, const std::function<void(dist::CleanOnFailureStore&)>& more) {
    BOOST_CHECK_THROW(([&] {
                        dist::CleanOnFailureStore start(store, store, rank == 0);
                        if (!key.empty()) start.set(key, bytes("facts"));
                        more(start);
                        throw CommError("rendezvous timed out");
                      }()),
                      CommError);
  };
  store.set("left/by/an/earlier/run", bytes("x"));
  // Rank 1 failing on something else (a verdict) leaves its keys: the others may still wait for them.
  failed_start(1, "kiln/agreement/rank1", [](dist::CleanOnFailureStore& start) {
    BOOST_TEST(text(start.get("left/by/an/earlier/run", milliseconds(0))) == "x");
  });
  BOOST_TEST(fs::exists(store.path_of("kiln/agreement/rank1")));
  // A wait of zero only looks (refuse_earlier_keys); rank 1 that gave up waiting removes the
  // keys it set itself, and nothing it did not.
  failed_start(1, "kiln/agreement/rank1", [](dist::CleanOnFailureStore& start) {
    BOOST_CHECK_THROW(start.wait({"kiln/agreement/rank3"}, milliseconds(0)), CommError);
  });
  BOOST_TEST(fs::exists(store.path_of("kiln/agreement/rank1")));
  failed_start(1, "kiln/agreement/rank1", [](dist::CleanOnFailureStore& start) {
    BOOST_CHECK_THROW(start.wait({"kiln/agreement/rank3"}, milliseconds(1)), CommError);
  });
  BOOST_TEST(!fs::exists(store.path_of("kiln/agreement/rank1")));
  BOOST_TEST(fs::exists(store.path_of("left/by/an/earlier/run")));
  // Left normally, or dismissed once the ranks have connected: nothing is removed.
  {
    dist::CleanOnFailureStore start(store, store, true);
    start.set("kiln/agreement/rank0", bytes("facts"));
  }
  failed_start(0, "", [](dist::CleanOnFailureStore& start) { start.dismiss(); });
  BOOST_TEST(fs::exists(store.path_of("kiln/agreement/rank0")));
  // Rank 0 removes every key.
  failed_start(0, "", [](dist::CleanOnFailureStore&) {});
  BOOST_TEST(!fs::exists(store.path_of("kiln/agreement/rank0")));
  BOOST_TEST(!fs::exists(store.path_of("left/by/an/earlier/run")));
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace kiln::test
