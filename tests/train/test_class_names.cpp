// Class names (core/train/class_names.hpp): the contract check on what a source describes, the
// comparison that catches two splits or a checkpoint numbering classes differently, the summary
// ranks compare, and the JSON form checkpoints keep.
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "kiln/errors.hpp"
#include "kiln/train/class_names.hpp"

namespace {

using kiln::train::ClassNames;

kiln::DatasetInfo info_with(ClassNames names, std::int64_t classes) {
  kiln::DatasetInfo info;
  info.num_classes = classes;
  info.class_names = std::move(names);
  return info;
}

std::string check_error(const kiln::DatasetInfo& info) {
  try {
    kiln::train::check_class_names(info, "csv", "data.train");
  } catch (const kiln::DataError& e) {
    return e.what();
  }
  return "<no error>";
}

std::string parse_error(const std::string& value) {
  try {
    (void)kiln::train::parse_class_names({{kiln::train::kClassNamesKey, value}}, "ckpt/model.safetensors");
  } catch (const kiln::DataError& e) {
    return e.what();
  }
  return "<no error>";
}

}  // namespace

BOOST_AUTO_TEST_SUITE(class_names)

BOOST_AUTO_TEST_CASE(a_source_names_at_most_its_classes_each_with_a_printable_name) {
  BOOST_TEST(check_error(info_with({}, 10)) == "<no error>");
  BOOST_TEST(check_error(info_with({"cat", "dog"}, 3)) == "<no error>");  // class 2 unnamed: allowed
  BOOST_TEST(check_error(info_with({"a", "b", "c"}, 2)) ==
             "data source 'csv' ([data.train]) names 3 classes but has only 2 (num_classes); a source names at most "
             "its classes");
  BOOST_TEST(check_error(info_with({"a", ""}, 2)) == "data source 'csv' ([data.train]): the name of class 1 is empty (\"\")");
  BOOST_TEST(check_error(info_with({"a", "two\nlines"}, 2)) ==
             "data source 'csv' ([data.train]): the name of class 1 holds a control character (\"two\\nlines\")");
  BOOST_TEST(check_error(info_with({"caf\xc3\xa9, \"quoted\""}, 1)) == "<no error>");  // UTF-8, commas and quotes pass
  // A Latin-1 folder name: the checkpoint's JSON would keep it as "caf\u00e9", which reads back
  // as other bytes, and the run could not be resumed or evaluated on its own data.
  BOOST_TEST(check_error(info_with({"a", "caf\xe9"}, 2)) ==
             "data source 'csv' ([data.train]): the name of class 1 is not UTF-8 (rename it, e.g. with convmv -f "
             "latin1 -t utf8) (\"caf\\u00e9\")");
}

BOOST_AUTO_TEST_CASE(lists_agree_where_both_name_a_class_and_the_first_difference_is_named) {
  using kiln::train::class_names_conflict;
  const ClassNames train = {"n001", "n002", "n003"};
  BOOST_TEST(!class_names_conflict(train, "[data.train]", train, "[data.eval]"));
  BOOST_TEST(!class_names_conflict(train, "[data.train]", {}, "[data.eval]"));  // unknown: nothing to compare
  // A split without the last class numbers the others alike.
  BOOST_TEST(!class_names_conflict(train, "[data.train]", {"n001", "n002"}, "[data.eval]"));
  // One without a middle class shifts every later class down by one.
  const auto c = class_names_conflict(train, "[data.train]", {"n001", "n003"}, "[data.eval]");
  BOOST_REQUIRE(c.has_value());
  BOOST_TEST(*c == "class 1 is \"n002\" in [data.train] but \"n003\" in [data.eval]");
}

BOOST_AUTO_TEST_CASE(the_summary_tells_lists_with_equal_ends_apart) {
  using kiln::train::class_names_summary;
  const std::string a = class_names_summary({"cat", "dog", "eel"});
  BOOST_TEST(a.rfind("3 names, \"cat\" ... \"eel\", crc32c ", 0) == 0u, a);
  BOOST_TEST(class_names_summary({"cat", "cow", "eel"}) != a);
  BOOST_TEST(class_names_summary({"cat", "dog", "eel"}) == a);
  BOOST_TEST(class_names_summary({}) == "no names");
  BOOST_TEST(kiln::train::class_names_brief({"cat", "dog", "eel"}) == "; 3 classes named \"cat\" ... \"eel\"");
  BOOST_TEST(kiln::train::class_names_brief({}) == "");
}

BOOST_AUTO_TEST_CASE(the_checkpoint_form_reads_back_exactly_and_refuses_anything_else) {
  const ClassNames names = {"T-shirt/top", "tench, Tinca tinca", "say \"hi\"", "back\\slash", "caf\xc3\xa9"};
  const std::string json = kiln::train::class_names_json(names);
  BOOST_TEST(json == R"(["T-shirt/top","tench, Tinca tinca","say \"hi\"","back\\slash","café"])");
  const ClassNames back = kiln::train::parse_class_names({{kiln::train::kClassNamesKey, json}}, "f");
  BOOST_TEST(back == names, boost::test_tools::per_element());
  BOOST_TEST(kiln::train::parse_class_names({{"format", "pt"}}, "f").empty());  // written without names

  BOOST_TEST(parse_error(R"({"a":1})").find("ckpt/model.safetensors: metadata 'class_names' is not a JSON array; "
                                            "the checkpoint is damaged") == 0u);
  BOOST_TEST(parse_error(R"(["a",2])") ==
             "ckpt/model.safetensors: metadata 'class_names': entry 1 is not a class name; the checkpoint is damaged; "
             "use an earlier one (kiln train --resume <dir>, kiln eval --checkpoint <dir>)");
  BOOST_TEST(parse_error(R"(["a",""])").find("entry 1 is not a class name") != std::string::npos);
  BOOST_TEST(parse_error(R"(["a\n"])").find("entry 0 is not a class name") != std::string::npos);
  BOOST_TEST(parse_error(R"(["a")").find("ckpt/model.safetensors: metadata 'class_names'") == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
