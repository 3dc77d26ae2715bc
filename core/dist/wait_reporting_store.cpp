// WaitReportingStore (see kiln/dist/wait_reporting_store.hpp).
#include "kiln/dist/wait_reporting_store.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "missing_keys.hpp"

namespace kiln::dist {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

WaitReportingStore::WaitReportingStore(Store& inner, WaitReport report, int rank)
    : inner_(inner), report_(std::move(report)), rank_(rank) {}

template <class Call>
auto WaitReportingStore::in_slices(milliseconds timeout, Call call) {
  if (!report_.on() || timeout <= report_.every) return call(timeout);
  const auto start = Clock::now();
  const auto waited = [&] { return std::chrono::duration_cast<milliseconds>(Clock::now() - start); };
  for (milliseconds next_report = report_.every;; next_report += report_.every) {
    const bool last = timeout <= next_report;
    try {
      return call(std::max((last ? timeout : next_report) - waited(), milliseconds(0)));
    } catch (const detail::StoreTimeout& t) {
      // The last slice's error speaks of the whole wait, as an unsliced one would.
      if (last) throw detail::StoreTimeout(t.missing(), timeout, t.world_size(), t.where());
      report_.say(fmt::format("rank {} has waited {} at the rendezvous for {} (missing keys: {} in {}); it gives up after "
                          "{} ({})",
                          rank_, detail::format_duration(std::chrono::round<std::chrono::seconds>(waited())), detail::waited_for(t.missing(), t.world_size()),
                          fmt::join(t.missing(), ", "), t.where(), detail::format_duration(timeout), report_.timeout_from));
    }
  }
}

void WaitReportingStore::set(const std::string& key, const std::vector<std::uint8_t>& value) { inner_.set(key, value); }

std::vector<std::uint8_t> WaitReportingStore::get(const std::string& key, milliseconds timeout) {
  return in_slices(timeout, [&](milliseconds slice) { return inner_.get(key, slice); });
}

std::int64_t WaitReportingStore::add(const std::string& key, std::int64_t delta) { return inner_.add(key, delta); }

void WaitReportingStore::wait(const std::vector<std::string>& keys, milliseconds timeout) {
  in_slices(timeout, [&](milliseconds slice) { inner_.wait(keys, slice); });
}

}  // namespace kiln::dist
