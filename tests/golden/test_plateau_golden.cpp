// Golden test: the plateau schedule's rule (core/train/lr_plateau.hpp) against PyTorch's
// ReduceLROnPlateau on the metric sequences in plateau_golden.bin (written by
// make_plateau_golden.py, which says how Kiln's keys map onto PyTorch's). After every epoch the
// rate Kiln would train the next epoch at must be PyTorch's, to f32 precision: a reduction one
// epoch early or late, a missed floor or a cooldown counted differently all fail here.
#define KILN_TEST_MODULE test_plateau_golden
#include "kiln_test_main.hpp"

#include <cmath>
#include <string>

#include "golden_file.hpp"
#include "kiln/train/lr_plateau.hpp"

namespace {

using kiln::test::GoldenArray;
using kiln::train::EpochMetrics;
using kiln::train::Goal;
using kiln::train::LrPlateau;
using kiln::train::PlateauOptions;

}  // namespace

BOOST_AUTO_TEST_CASE(every_rate_matches_pytorch_reduce_lr_on_plateau) {
  const auto golden = kiln::test::load_golden("plateau_golden.bin", "make_plateau_golden.py");
  int cases = 0, reductions = 0;
  for (int n = 0; golden.count("case" + std::to_string(n) + ".options"); ++n, ++cases) {
    const std::string name = "case" + std::to_string(n);
    const std::vector<double>& o = golden.at(name + ".options").values;
    const std::vector<double>& metric = golden.at(name + ".metric").values;
    const std::vector<double>& want = golden.at(name + ".lr").values;
    BOOST_TEST_REQUIRE(o.size() == 8u);
    BOOST_TEST_REQUIRE(metric.size() == want.size());
    PlateauOptions options;
    const bool max = o[6] == 1.0;
    options.metric = {max ? "eval_accuracy" : "eval_loss", max ? Goal::max : Goal::min, "test"};
    options.factor = o[1];
    options.patience = static_cast<std::int64_t>(o[2]);
    options.cooldown = static_cast<std::int64_t>(o[3]);
    options.min_lr = o[4];
    options.min_delta = o[5];
    options.relative = o[7] == 1.0;
    const double base = o[0];
    LrPlateau plateau(options, base);
    for (std::size_t e = 0; e < metric.size(); ++e) {
      EpochMetrics m;
      (max ? m.eval_accuracy : m.eval_loss) = metric[e];
      const bool said = plateau.update(static_cast<std::int64_t>(e), m).has_value();
      const double got = base * plateau.scale();
      BOOST_TEST(std::abs(got - want[e]) <= 1e-6 * want[e],
                 name << " epoch " << e + 1 << " (metric " << metric[e] << "): rate " << got << ", PyTorch "
                      << want[e]);
      // A line is said exactly when the rate changed.
      const bool changed = e > 0 ? std::abs(want[e] - want[e - 1]) > 1e-6 * want[e] : want[e] != base;
      BOOST_TEST(said == changed, name << " epoch " << e + 1);
      reductions += said;
    }
  }
  BOOST_TEST(cases == 7);
  BOOST_TEST(reductions == 29);  // the generator's 5 + 2 + 3 + 7 (abs) + 2 + 3 + 7 (rel): the sequences do reduce
}
