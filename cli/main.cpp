// The `pagegram` command line: subcommands for config, data, training, evaluation and the storage tools.
// User and I/O errors end here as one line on stderr and exit code 2; internal errors exit 3.
#include <CLI/CLI.hpp>
#include <csignal>
#include <functional>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "core/kernels.h"

int main(int argc, char** argv) {
  // A file size limit (ulimit -f) then fails the write with EFBIG, reported like a full disk, instead of killing us.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"pagegram: hashed n-gram memory tables (PageGram) research framework"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>([] {
                         std::string kernels;
                         try {
                           kernels = pg::kern::active_name();
                         } catch (const pg::UserError& e) {
                           kernels = std::string("unavailable: ") + e.what();
                         }
                         return std::string("pagegram ") + pg::build::kRevision + " (" + pg::build::kBuildType + "; " +
                                pg::build::kFlags + ")\nkernels: " + kernels + " on " + pg::isa::cpu_description();
                       }));
  app.set_help_all_flag("--help-all", "help for every subcommand");
  pg::cli::register_commands(app, argc, argv);
  try {
    pg::kern::active();  // PAGEGRAM_ISA checked before any work (a bad value is one line, exit 2)
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const pg::ResourceError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 4;
  } catch (const pg::UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  } catch (const pg::InternalError& e) {
    std::cerr << "bug: " << e.what() << " (please report with the command line)\n";
    return 3;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of memory (hint: reduce train.micro_batch or the table size)\n";
    return 2;
  }
  return 0;
}
