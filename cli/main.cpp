// The `pagegram` command line: subcommands for config, data, training, evaluation and the storage tools.
// User and I/O errors end here as one line on stderr and exit code 2.
#include <CLI/CLI.hpp>
#include <iostream>

#include "core/error.h"

int main(int argc, char** argv) {
  CLI::App app{"pagegram: hashed n-gram memory tables (PageGram) research framework"};
  app.require_subcommand(1);
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const pg::UserError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
