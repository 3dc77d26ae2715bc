// The progress display: its text (durations, SI rates, ETA, bar, both line layouts) as pure
// functions, and when it prints what, driven by an injected clock into a temporary FILE*, as a
// terminal and as a pipe. No real time is measured anywhere.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <string>

#include "kiln/io/progress.hpp"
#include "kiln/io/progress_format.hpp"

namespace {

using kiln::io::Progress;
using kiln::io::ProgressStatus;

/// A tmpfile() the display writes to, read back whole.
struct Capture {
  std::FILE* file = std::tmpfile();
  ~Capture() { std::fclose(file); }
  std::string text() const {
    std::fflush(file);
    std::string out;
    std::rewind(file);
    for (int c; (c = std::fgetc(file)) != EOF;) out.push_back(static_cast<char>(c));
    return out;
  }
};

/// A clock the test moves by hand.
struct FakeClock {
  double t = 1000;
  std::function<double()> fn() {
    return [this] { return t; };
  }
};

ProgressStatus sample_status() {
  ProgressStatus s;
  s.phase = "epoch 3/10";
  s.done = 25;
  s.total = 100;
  s.elapsed_s = 10;
  s.samples = 52100;
  s.values = {{"loss", "0.4321"}, {"lr", "0.001"}};
  return s;
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

BOOST_AUTO_TEST_SUITE(progress_format)

BOOST_AUTO_TEST_CASE(durations) {
  BOOST_TEST(kiln::io::format_duration(0) == "00:00");
  BOOST_TEST(kiln::io::format_duration(65.4) == "01:05");
  BOOST_TEST(kiln::io::format_duration(3599.4) == "59:59");
  BOOST_TEST(kiln::io::format_duration(3725) == "1:02:05");
  BOOST_TEST(kiln::io::format_duration(-1) == "--:--");
  BOOST_TEST(kiln::io::format_duration(std::nan("")) == "--:--");
}

BOOST_AUTO_TEST_CASE(si_rates_keep_three_digits) {
  BOOST_TEST(kiln::io::format_si(950) == "950");
  BOOST_TEST(kiln::io::format_si(5210) == "5.21k");
  BOOST_TEST(kiln::io::format_si(12345) == "12.3k");
  BOOST_TEST(kiln::io::format_si(999.7) == "1.00k");  // not "1000"
  BOOST_TEST(kiln::io::format_si(1.5e6) == "1.50M");
}

BOOST_AUTO_TEST_CASE(eta_from_the_mean_step_rate) {
  BOOST_TEST(!kiln::io::eta_seconds(0, 100, 5).has_value());  // no step done: no rate yet
  BOOST_TEST(!kiln::io::eta_seconds(10, 0, 5).has_value());   // total unknown
  BOOST_TEST(*kiln::io::eta_seconds(25, 100, 10) == 30.0);
  BOOST_TEST(*kiln::io::eta_seconds(100, 100, 40) == 0.0);
}

BOOST_AUTO_TEST_CASE(bar_is_clamped) {
  BOOST_TEST(kiln::io::format_bar(0.5, 10) == "[#####.....]");
  BOOST_TEST(kiln::io::format_bar(0, 4) == "[....]");
  BOOST_TEST(kiln::io::format_bar(1.7, 4) == "[####]");
  BOOST_TEST(kiln::io::format_bar(std::nan(""), 4) == "[....]");
}

BOOST_AUTO_TEST_CASE(live_and_plain_layouts) {
  const ProgressStatus s = sample_status();
  BOOST_TEST(kiln::io::format_live(s) ==
             "epoch 3/10 [#####...............] 25/100  25% 00:10<00:30 | 5.21k samples/s | loss 0.4321 | lr 0.001");
  BOOST_TEST(kiln::io::format_plain(s) ==
             "epoch 3/10 step 25/100 (25%) elapsed 00:10 eta 00:30 | 5.21k samples/s | loss 0.4321 | lr 0.001");
  // Cut to the terminal's width so it never wraps (a wrapped line cannot be redrawn in place).
  BOOST_TEST(kiln::io::format_live(s, 20) == "epoch 3/10 [#####...");
  ProgressStatus unknown = s;
  unknown.total = 0;
  BOOST_TEST(kiln::io::format_plain(unknown) == "epoch 3/10 step 25 elapsed 00:10 | 5.21k samples/s | loss 0.4321 | lr 0.001");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(progress_display)

BOOST_AUTO_TEST_CASE(off_a_terminal_a_plain_line_when_nothing_was_printed_for_every_s) {
  Capture out;
  FakeClock clock;
  Progress p({.mode = Progress::Mode::automatic, .out = out.file, .every_s = 10, .terminal = false, .clock = clock.fn()});
  BOOST_TEST(!p.live());
  BOOST_TEST(p.shows_updates());
  p.begin("epoch 1/2", 100);
  clock.t += 9.9;
  BOOST_TEST(!p.due());
  clock.t += 0.1;  // 10 s since the display started
  BOOST_TEST(p.due());
  p.update(50, 500, {{"loss", "1.0000"}});
  BOOST_TEST(!p.due());  // just printed
  clock.t += 5;
  p.line("epoch   1/2  train loss 0.9000");  // any line restarts the wait
  clock.t += 9;
  BOOST_TEST(!p.due());
  clock.t += 1;
  BOOST_TEST(p.due());
  BOOST_TEST(out.text() ==
             "epoch 1/2 step 50/100 (50%) elapsed 00:10 eta 00:10 | 50 samples/s | loss 1.0000\n"
             "epoch   1/2  train loss 0.9000\n");
}

BOOST_AUTO_TEST_CASE(every_s_zero_prints_every_update) {
  Capture out;
  FakeClock clock;
  Progress p({.out = out.file, .every_s = 0, .terminal = false, .clock = clock.fn()});
  p.begin("eval  1/1", 3);
  for (int i = 1; i <= 3; ++i) {
    BOOST_TEST(p.due());
    clock.t += 1;
    p.update(i, 10.0 * i, {});
  }
  const std::string text = out.text();
  BOOST_TEST(count(text, "\n") == 3u);
  BOOST_TEST(text.find('\r') == std::string::npos);
  BOOST_TEST(text.find("eval  1/1 step 3/3 (100%) elapsed 00:03 eta 00:00 | 10 samples/s\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(on_a_terminal_one_line_redrawn_in_place_and_erased_by_a_permanent_line) {
  Capture out;
  FakeClock clock;
  Progress p({.out = out.file, .terminal = true, .width = 0, .clock = clock.fn()});
  BOOST_TEST(p.live());
  p.begin("epoch 1/1", 4);
  BOOST_TEST(p.due());  // nothing on screen yet
  clock.t += 1;
  p.update(1, 8, {});
  clock.t += 0.1;
  BOOST_TEST(!p.due());  // at most one redraw per 0.2 s
  clock.t += 0.1;
  BOOST_TEST(p.due());
  p.update(2, 16, {});
  p.line("done");
  const std::string text = out.text();
  BOOST_TEST(count(text, "\r\033[2K") == 3u);  // two redraws and the erase before "done"
  BOOST_TEST(count(text, "\n") == 1u);          // only the permanent line ends one
  BOOST_TEST(text.find("\r\033[2Kepoch 1/1 [##########..........] 2/4  50% 00:01<00:01 | 13 samples/s") !=
             std::string::npos);
  BOOST_TEST(text.ends_with("\r\033[2Kdone\n"));
  // clear() only erases a line that is shown: before other output to the same terminal.
  p.clear();
  BOOST_TEST(out.text() == text);
  clock.t += 1;
  p.update(3, 24, {});
  p.clear();
  BOOST_TEST(out.text().ends_with("\r\033[2K"));
  BOOST_TEST(count(out.text(), "\n") == 1u);
}

BOOST_AUTO_TEST_CASE(always_redraws_off_a_terminal_never_shows_only_permanent_lines) {
  Capture always_out, never_out, other_rank_out;
  FakeClock clock;
  Progress always({.mode = Progress::Mode::always, .out = always_out.file, .terminal = false, .clock = clock.fn()});
  BOOST_TEST(always.live());
  Progress never({.mode = Progress::Mode::never, .out = never_out.file, .every_s = 0, .terminal = true,
                  .clock = clock.fn()});
  BOOST_TEST(!never.due());
  never.update(1, 1, {});
  never.line("epoch line");
  BOOST_TEST(never_out.text() == "epoch line\n");
  Progress other_rank({.enabled = false, .out = other_rank_out.file, .every_s = 0, .terminal = false,
                       .clock = clock.fn()});
  BOOST_TEST(!other_rank.due());
  other_rank.update(1, 1, {});
  other_rank.line("epoch line");
  BOOST_TEST(other_rank_out.text().empty());
}

BOOST_AUTO_TEST_SUITE_END()

}  // namespace
