// Registration of every `pagegram` subcommand; each command's body lives in a cli/*.cpp file.
#pragma once
#include <CLI/CLI.hpp>

namespace pg::cli {
void register_commands(CLI::App& app, int argc, char** argv);
void register_config_commands(CLI::App& app);
void register_data_commands(CLI::App& app);
void register_train_commands(CLI::App& app, int argc, char** argv);
// collisions, addresses, export, flashsim, iobench (cli/storage_cmd.cpp)
void register_storage_commands(CLI::App& app);
// sweep run|status|slurm|collect (cli/sweep_cmd.cpp)
void register_sweep_commands(CLI::App& app);
// generate, serve, bench generate (cli/infer_cmd.cpp)
void register_infer_commands(CLI::App& app);
}  // namespace pg::cli
