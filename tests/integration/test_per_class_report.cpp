// `kiln eval --per-class`'s figures (core/cli/per_class_report.hpp) on hand-made logits: counts,
// precision/recall/F1 as scikit-learn defines them, ties to the lower class, a class never
// predicted (precision undefined: "-" and null), classes that never occur left out, the macro
// average over the classes with samples.
#include <boost/test/unit_test.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "json_lite.hpp"
#include "cli/per_class_report.hpp"

namespace {

using kiln::cli::PerClassReport;

// Four classes; labels and predictions (the argmax of each row):
//   label 0, predicted 0   label 0, predicted 1   label 1, predicted 1   label 2, predicted 1
//   label 1, tie of 0 and 1 -> 0
// Class 3 never occurs. Class 2 is never predicted.
const std::vector<std::int32_t> kLabels = {0, 0, 1, 2, 1};
const std::vector<float> kLogits = {
    5, 1, 0, 0,  //
    1, 5, 0, 0,  //
    0, 5, 1, 0,  //
    0, 5, 1, 0,  //
    3, 3, 0, 0,  //
};

PerClassReport report(const std::vector<std::string>& names) {
  PerClassReport r(4, names);
  r.add(2, kLabels.data(), kLogits.data());  // in two batches, as the loader gives them
  r.add(3, kLabels.data() + 2, kLogits.data() + 8);
  return r;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(per_class_report)

BOOST_AUTO_TEST_CASE(figures_follow_scikit_learns_definitions) {
  const std::vector<std::string> names = {"cat", "dog, big", "eel"};  // class 3 unnamed
  std::ostringstream table;
  report(names).write_table(table);
  BOOST_TEST(table.str() ==
             "class  name             samples  predicted  precision  recall      f1\n"
             "    0  cat                    2          2     0.5000  0.5000  0.5000\n"
             "    1  dog, big               2          3     0.3333  0.5000  0.4000\n"
             "    2  eel                    1          0          -  0.0000       -\n"
             "       macro average                           0.2778  0.3333  0.3000\n");

  const auto doc = kiln::test::json::parse(report(names).json());
  BOOST_REQUIRE(doc.items.size() == 3u);
  BOOST_TEST(doc.items[1].at("name").string == "dog, big");
  BOOST_TEST(doc.items[1].at("samples").number == 2.0);
  BOOST_TEST(doc.items[1].at("predicted").number == 3.0);
  BOOST_TEST(doc.items[1].at("precision").number == 1.0 / 3.0);
  BOOST_TEST(doc.items[1].at("recall").number == 0.5);
  BOOST_TEST((doc.items[2].at("precision").kind == kiln::test::json::Value::Kind::null));
  BOOST_TEST((doc.items[2].at("f1").kind == kiln::test::json::Value::Kind::null));
  BOOST_TEST(doc.items[2].at("recall").number == 0.0);
}

BOOST_AUTO_TEST_CASE(without_names_the_name_column_stays_empty_and_json_has_none) {
  const std::vector<std::string> none;
  std::ostringstream table;
  report(none).write_table(table);
  BOOST_TEST(table.str().find("\n    0                         2          2     0.5000") != std::string::npos, table.str());
  BOOST_TEST(kiln::test::json::parse(report(none).json()).items[0].find("name") == nullptr);
}

BOOST_AUTO_TEST_SUITE_END()
