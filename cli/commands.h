// Registration of every `pagegram` subcommand; each command's body lives in a cli/*.cpp file.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "core/text.h"

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
// "<config> --set <a=b> ..." as the user gave them, each word shell-quoted: the arguments of a command shown in a hint.
inline std::string config_args_hint(const std::string& config, const std::vector<std::string>& sets) {
  std::string h = shell_quote(config);
  for (const auto& s : sets) h += " --set " + shell_quote(s);
  return h;
}
}  // namespace pg::cli
