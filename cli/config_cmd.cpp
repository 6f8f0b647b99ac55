// `pagegram config show FILE [--set k=v ...]` prints the resolved config; `config keys` lists every key.
#include <iostream>

#include "cli/commands.h"
#include "core/sysinfo.h"
#include "train/config.h"

namespace pg::cli {

void register_config_commands(CLI::App& app) {
  CLI::App* cfg_cmd = app.add_subcommand("config", "show resolved configs and the list of keys");
  cfg_cmd->require_subcommand(1);
  {
    CLI::App* show = cfg_cmd->add_subcommand("show", "print the fully resolved config (bases and --set applied)");
    static std::string file;
    static std::vector<std::string> sets;
    show->add_option("file", file, "config YAML file")->required();
    show->add_option("--set", sets, "override a key: --set model.layers=4 (repeatable)");
    show->callback([] {
      ExperimentConfig c = load_experiment(file, sets);
      std::string what;
      const int64_t need = estimate_training_bytes(c, &what);
      std::cout << cfg::dump(c) << "\n# estimated training memory: " << need / (1024 * 1024) << " MiB (" << what
                << "); available now: " << available_memory_bytes() / (1024 * 1024) << " MiB\n";
    });
  }
  {
    CLI::App* keys = cfg_cmd->add_subcommand("keys", "list every config key with its type, default and meaning");
    keys->callback([] {
      ExperimentConfig c;
      cfg::Helper h;
      c.visit(h);
      for (const auto& l : h.lines) std::cout << l << "\n";
    });
  }
}

void register_commands(CLI::App& app, int argc, char** argv) {
  register_config_commands(app);
  register_data_commands(app);
  register_train_commands(app, argc, argv);
  register_storage_commands(app);
  register_sweep_commands(app);
  register_infer_commands(app);
}

}  // namespace pg::cli
