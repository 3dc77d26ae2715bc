// `kiln collectives` (see collectives_command.hpp).
#include "collectives_command.hpp"

#include <boost/program_options.hpp>

#include <filesystem>

#include "kiln/train/collective_report.hpp"

namespace kiln::cli {

namespace po = boost::program_options;

int run_collectives_command(const std::vector<std::string>& args, std::ostream& out) {
  po::options_description opts("kiln collectives options");
  std::string run_dir;
  int last = 4;
  opts.add_options()
      ("help,h", "show this help")
      ("run-dir", po::value(&run_dir)->required(), "the run whose ranks' records to compare (reads DIR/debug/rank<N>.json)")
      ("last,n", po::value(&last), "collectives listed per rank (default 4; 0: none)");
  po::variables_map vm;
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(args).options(opts).style(style).run(), vm);
  if (vm.count("help")) {
    out << "usage: kiln collectives --run-dir DIR [--last N]\n\n"
           "Compares the records of their latest collectives that the ranks of a multi-rank run wrote when\n"
           "it stopped on an error or by SIGTERM/SIGINT, and says which rank the others waited for\n"
           "(docs/distributed.md#which-rank-the-others-waited-for).\n\n"
        << opts;
    return 0;
  }
  po::notify(vm);
  if (last < 0) throw po::error("--last must be >= 0");

  const train::TraceSet set = train::read_traces(std::filesystem::path(run_dir) / "debug");
  out << train::verdict(set) << "\n\n";
  for (const std::string& line : train::rank_lines(set)) out << line << "\n";
  for (const std::string& note : set.notes) out << note << "\n";
  if (last == 0) return 0;
  for (const train::RankTrace& t : set.traces) {
    out << "\nrank " << t.rank << ", its latest collectives:\n";
    for (const std::string& line : train::entry_lines(t, static_cast<std::size_t>(last))) out << line << "\n";
  }
  return 0;
}

}  // namespace kiln::cli
