// Part of test_train_errors: exceptions thrown by a plugin after construction, here a data
// source's read() on a loader worker thread, reach the user as one line that names the plugin,
// its library and the method, with exit status 1 whatever was thrown.
#define KILN_TEST_MODULE test_train_errors
#include "kiln_test_main.hpp"


#include "kiln_process.hpp"

namespace {

namespace fs = std::filesystem;
using kiln::test::run_kiln;
using kiln::test::scratch_dir;

// Console logging at warn, so stderr holds the error line alone (info lines go to stderr too).
kiln::test::KilnResult train_on(const std::string& data_plugin) {
  return run_kiln(scratch_dir(), {"train", "--config", kiln::test::fixture_data_config(data_plugin).string(), "--plugin-path",
                                  kiln::test::fixture_dir(data_plugin).string(), "--run-dir",
                                  (scratch_dir() / ("run-" + data_plugin)).string(), "--set", "log.level=warn"});
}

BOOST_AUTO_TEST_CASE(std_exception_from_read_names_plugin_library_and_method) {
  const auto r = train_on("throws-std");
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.err ==
             "kiln: error: data plugin 'throws-std' (libkiln-fixture-throws-std.so), read(): bad magic number "
             "0x1234 in the sample header\n");
}

BOOST_AUTO_TEST_CASE(non_exception_type_from_read_is_a_plugin_error_not_an_abort) {
  const auto r = train_on("throws-int");
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.err ==
             "kiln: error: data plugin 'throws-int' (libkiln-fixture-throws-int.so), read(): threw an exception of "
             "type 'int', which is not a std::exception (plugins must throw kiln::Error or std::exception; report "
             "this to the plugin's authors)\n");
}

BOOST_AUTO_TEST_CASE(sdk_file_error_reads_as_path_line_column) {
  const auto r = train_on("throws-file-error");
  BOOST_TEST(r.status == 1);
  BOOST_TEST(r.err ==
             "kiln: error: data plugin 'throws-file-error' (libkiln-fixture-throws-file-error.so), read(): "
             "rows.csv:12:7: expected 5 fields, found 4\n");
}

}  // namespace
