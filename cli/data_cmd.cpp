// `pagegram data corpus|tokenizer|tokenize|info`: the data pipeline stages (data/FORMATS.md, data/corpus/README.md).
#include <cstdio>
#include <iostream>

#include "cli/commands.h"
#include "core/timer.h"
#include "data/pipeline.h"
#include "train/config.h"

namespace pg::cli {
namespace {

struct DataArgs {
  std::string config = std::string(PG_SOURCE_DIR) + "/configs/shape_b.yaml";
  std::vector<std::string> sets;
};

void add_config_options(CLI::App* cmd, DataArgs& a) {
  cmd->add_option("--config", a.config, "experiment config (its data and tokenizer sections are used)")
      ->capture_default_str();
  cmd->add_option("--set", a.sets, "override a key: --set tokenizer.vocab_size=8192 (repeatable)");
}

void print_summary(const data::TokenizeSummary& s) {
  std::printf("tokenizer  %s (%s)\n", s.tokenizer.model.c_str(), s.tokenizer.cache_hit ? "cached" : "trained");
  std::printf("store      %s (%s)\n", s.store_dir.c_str(), s.cache_hit ? "cached" : "written");
  std::printf("train      %12llu tokens  %9llu docs  %.2f bytes/token\n", (unsigned long long)s.train.tokens,
              (unsigned long long)s.train.docs, s.train.bytes_per_token());
  std::printf("held-out   %12llu tokens  %9llu docs  %.2f bytes/token\n", (unsigned long long)s.heldout.tokens,
              (unsigned long long)s.heldout.docs, s.heldout.bytes_per_token());
  std::printf("wall time  %.1f s\n", s.seconds);
}

}  // namespace

void register_data_commands(CLI::App& app) {
  CLI::App* data_cmd = app.add_subcommand("data", "build the corpus, train the tokenizer, tokenize");
  data_cmd->require_subcommand(1);
  {
    static DataArgs a;
    static bool quick = false;
    CLI::App* c = data_cmd->add_subcommand("corpus", "build the multilingual corpus from Debian/npm packages (cached)");
    add_config_options(c, a);
    c->add_flag("--quick", quick, "a tiny corpus of a few packages (smoke tests), in <cache>/corpus-quick");
    c->callback([] {
      ExperimentConfig cfg = load_experiment(a.config, a.sets);
      Timer t;
      data::build_corpus(cfg.data, quick, PG_SOURCE_DIR);
      std::printf("corpus ready in %s (%.1f s)\n", data::corpus_dir(cfg.data).c_str(), t.seconds());
    });
  }
  {
    static DataArgs a;
    CLI::App* c =
        data_cmd->add_subcommand("tokenizer", "train the sentencepiece tokenizer (cached by config + corpus)");
    add_config_options(c, a);
    c->callback([] {
      ExperimentConfig cfg = load_experiment(a.config, a.sets);
      Timer t;
      data::TokenizerPaths p = data::train_tokenizer(cfg.data, cfg.tokenizer);
      std::printf("tokenizer %s (%s, %.1f s)\n", p.model.c_str(), p.cache_hit ? "cached" : "trained", t.seconds());
    });
  }
  {
    static DataArgs a;
    CLI::App* c = data_cmd->add_subcommand("tokenize", "encode the corpus into train/held-out token stores (cached)");
    add_config_options(c, a);
    c->callback([] {
      ExperimentConfig cfg = load_experiment(a.config, a.sets);
      print_summary(data::tokenize(cfg.data, cfg.tokenizer, config_args_hint(a.config, a.sets)));
    });
  }
  {
    static DataArgs a;
    CLI::App* c = data_cmd->add_subcommand("info", "describe the dataset of a config (fails if not built)");
    add_config_options(c, a);
    c->callback([] {
      ExperimentConfig cfg = load_experiment(a.config, a.sets);
      data::DataSet ds = data::open_dataset(cfg.data, cfg.tokenizer, config_args_hint(a.config, a.sets));
      data::ValidationWindows val = ds.validation(cfg.model.context);
      data::TestStream test = ds.test_stream();
      std::printf("tokenizer   %s\n", ds.tokenizer_paths.model.c_str());
      std::printf("train       %llu tokens, %llu docs\n", (unsigned long long)ds.train->n_tokens(),
                  (unsigned long long)ds.train->n_docs());
      std::printf("held-out    %llu tokens, %llu docs\n", (unsigned long long)ds.heldout->n_tokens(),
                  (unsigned long long)ds.heldout->n_docs());
      std::printf("validation  %lld windows of %lld tokens\n", (long long)val.count(),
                  (long long)cfg.model.context + 1);
      std::printf("test stream %llu tokens\n", (unsigned long long)test.size());
    });
  }
}

}  // namespace pg::cli
