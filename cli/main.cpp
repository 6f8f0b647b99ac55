// The `pagegram` command line: subcommands for config, data, training, evaluation and the storage tools.
// User and I/O errors end here as one line on stderr and exit code 2; internal errors exit 3.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "core/build_info.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "core/progress.h"
#include "train/dist.h"

namespace {
// Ends the process with `code` after an error: with several data-parallel ranks every rank is ended (MPI_Abort)
// so none waits forever for a partner. A rank other than 0 waits a second first, so an error every rank meets
// (a bad config) is printed once, by rank 0, whose abort ends the others.
int fail(int code, const std::string& line) {
  const pg::dist::World& w = pg::dist::world();
  if (w.size > 1) {
    if (w.rank != 0) ::sleep(1);
    // One write: the ranks share the terminal (or pipe), and a line must not be cut by another rank's output.
    const std::string msg =
        line + " [rank " + std::to_string(w.rank) + " of " + std::to_string(w.size) + "; ending every rank]\n";
    if (::write(STDERR_FILENO, msg.data(), msg.size()) < 0) {
      // nothing more to do: the abort below still ends every rank
    }
    pg::dist::abort_all(code);
  }
  std::cerr << line << "\n";
  pg::dist::finalize();
  return code;
}
}  // namespace

int main(int argc, char** argv) {
  // A file size limit (ulimit -f) then fails the write with EFBIG, reported like a full disk, instead of killing us.
  std::signal(SIGXFSZ, SIG_IGN);
  // The AMX tile permission before anything installs a signal stack or starts a thread (kern::amx_request_permission;
  // nothing happens on a CPU without AMX).
  (void)pg::kern::amx_request_permission();
  try {
    // First of all: MPI when launched as ranks (mpirun, srun --mpi=pmix), and each rank's share of the cores
    // before any thread starts.
    pg::dist::init(&argc, &argv);
    pg::dist::pin_to_local_share();
  } catch (const pg::UserError& e) {
    return fail(2, std::string("error: ") + e.what());
  }
  // The libraries report progress and notes as lines (core/progress.h); the command line prints them on stderr,
  // once: data-parallel ranks do the same work, so only rank 0's are printed (errors are every rank's: fail()).
  pg::set_note_sink([](const std::string& line) {
    if (pg::dist::world().rank != 0) return;
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
  });
  CLI::App app{"pagegram: hashed n-gram memory tables (PageGram) research framework"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::function<std::string()>([] {
                         std::string kernels;
                         try {
                           kernels = std::string(pg::kern::active_name()) + " (bf16: " + pg::kern::bf16_name() + ")";
                           const pg::kern::AmxStatus& amx = pg::kern::amx_status();
                           if (amx.usable && !amx.note.empty()) kernels += "; amx: " + amx.note;
                           if (!amx.usable && pg::isa::cpu_has_amx_bf16()) kernels += "; amx not used: " + amx.reason;
                         } catch (const pg::UserError& e) {
                           kernels = std::string("unavailable: ") + e.what();
                         }
                         return std::string("pagegram ") + pg::build::kRevision + " (" + pg::build::kBuildType + "; " +
                                pg::build::kFlags + ")\nmpi: " + pg::dist::mpi_description() + "\nkernels: " + kernels +
                                " on " + pg::isa::cpu_description();
                       }));
  app.set_help_all_flag("--help-all", "help for every subcommand");
  pg::cli::register_commands(app, argc, argv);
  try {
    pg::kern::active();  // PAGEGRAM_ISA checked before any work (a bad value is one line, exit 2)
    if (std::getenv("PAGEGRAM_BF16")) pg::kern::active_bf16();  // and PAGEGRAM_BF16 when given
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // A command's own answer (CLI::RuntimeError(n), e.g. `sweep finished` = 1) keeps its code; bad arguments are 2.
    const int code = app.exit(e);
    const int rc = code == 0 ? 0 : dynamic_cast<const CLI::RuntimeError*>(&e) ? code : 2;
    if (rc != 0 && pg::dist::world().size > 1) pg::dist::abort_all(rc);
    pg::dist::finalize();
    return rc;
  } catch (const pg::ResourceError& e) {
    return fail(4, std::string("error: ") + e.what());
  } catch (const pg::UserError& e) {
    return fail(2, std::string("error: ") + e.what());
  } catch (const pg::InternalError& e) {
    return fail(3, std::string("bug: ") + e.what() + " (please report with the command line)");
  } catch (const std::bad_alloc&) {
    return fail(2, "error: out of memory (hint: reduce train.micro_batch or the table size)");
  } catch (const std::filesystem::filesystem_error& e) {  // a path the libraries did not check first
    return fail(2, std::string("error: ") + e.what());
  } catch (const std::exception& e) {  // anything else is ours to fix: one line, never an abort
    return fail(3, std::string("bug: ") + e.what() + " (please report with the command line)");
  }
  pg::dist::finalize();
  return 0;
}
