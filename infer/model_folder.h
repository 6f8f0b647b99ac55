// A served model as one folder: what `generate` and `serve` need and nothing of the training corpus, so the folder
// copied to another machine serves there (docs/serving.md, "Model folder").
//
//   <dir>/checkpoint.h5     the trained model (weights, config, the fp32 table)
//   <dir>/checkpoint.table-*.h5   a table trained sharded by rows: the shard files its checkpoint maps
//   <dir>/tokenizer.model   its sentencepiece model
//   <dir>/table.pgt         the memory table as served from disk (models with a table; records the checkpoint
//                           table's info.table_xxh64, checked when served)
//
// `pagegram export --checkpoint C --model-dir DIR` writes it (each file through a temp file and a rename);
// `generate/serve --model DIR` reads it.
#pragma once
#include <string>
#include <vector>

#include "infer/table_export.h"

namespace pg {

struct ModelFolderPaths {
  std::string checkpoint, tokenizer, table;  // table empty: the model has none (or it is served from RAM)
};
// The files of a model folder. UserError naming the folder and the missing file.
ModelFolderPaths model_folder_paths(const std::string& dir);

// The tokenizer to serve a checkpoint with: `given` when set; else tokenizer.model beside the checkpoint; else the
// checkpoint config's model in the data cache. "" when none exists (then `why` says where it looked, with a hint).
std::string find_tokenizer(const std::string& checkpoint, const std::string& given, std::string* why);

struct ModelFolderOptions {
  std::string checkpoint;
  std::string dir;
  std::string tokenizer;  // default: find_tokenizer's
  TableQuantization quantization = TableQuantization::kNf4;
  std::vector<std::pair<std::string, std::string>> info;  // the table file's extra header info
  bool force = false;  // replace files of another kind in dir
};
struct ModelFolderResult {
  ModelFolderPaths paths;
  bool has_table = false;
  TableExportResult table;
};
ModelFolderResult write_model_folder(const ModelFolderOptions& o);

}  // namespace pg
