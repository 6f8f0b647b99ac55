// Implementation of infer/table_export.h.
#include "infer/table_export.h"

#include <algorithm>
#include <memory>

#include "core/error.h"
#include "core/text.h"
#include "core/timer.h"
#include "data/hash.h"
#include "data/pipeline.h"
#include "memory/table.h"
#include "memory/row_spread.h"
#include "storage/layout_spec.h"
#include "train/config.h"
#include "train/memory_injector.h"
#include "train/trained_model.h"

namespace pg {

std::string table_fingerprint(const MemoryTable& table) {
  const std::span<const float> v = table.values();
  return data::hex64(data::xxh64_bytes(v.data(), v.size_bytes()));
}

std::string saved_table_fingerprint(const std::string& checkpoint, const MemoryTable& table) {
  const h5::File f = h5::File::open(checkpoint);
  const h5::Group g = f.root().sub("memory").sub("table");
  const int64_t rows = table.layout().rows(), w = table.layout().width();
  const SavedTable saved(g, rows, w);
  const int64_t per = std::max<int64_t>(1, (int64_t{64} << 20) / (w * static_cast<int64_t>(sizeof(float))));
  std::vector<float> buf(static_cast<size_t>(std::min(per, rows) * w));
  data::Xxh64Stream digest;
  for (int64_t r0 = 0; r0 < rows; r0 += per) {
    const int64_t n = std::min(per, rows - r0);
    table.read_saved_rows(saved, r0, n, buf.data());
    digest.update(buf.data(), static_cast<size_t>(n * w) * sizeof(float));
  }
  return data::hex64(digest.digest());
}

void check_table_fingerprint(const std::string& table_path, const std::string& checkpoint,
                             const std::string& fingerprint) {
  const std::string in_file = TableFileReader::read_header(table_path).identity_value("info.table_xxh64");
  if (!in_file.empty() && in_file != fingerprint)
    throw UserError(str("--table ", table_path, ": exported from another checkpoint than ", checkpoint,
                        " (its table_xxh64 ", in_file, ", this checkpoint's table ", fingerprint,
                        ") (hint: export this checkpoint's table: pagegram export --checkpoint ", checkpoint,
                        " --out T.pgt)"));
}

TableExportResult export_table(const TableExportOptions& o, const std::string& out) {
  if (o.checkpoint.empty() == o.config.empty()) throw UserError("export: give exactly one of --checkpoint or --config");
  if (o.synthetic_params > 0 && o.checkpoint.empty())
    throw UserError("export: --synthetic-params needs --checkpoint (the trained rows to place)");
  if (o.eval_windows < 0 || (o.eval_windows > 0 && o.checkpoint.empty()))
    throw UserError("export: --eval-windows takes a count >= 0 and needs --checkpoint");
  TableExportResult r;
  Timer t;
  TableWriteOptions w;
  w.progress = true;
  w.quantization = o.quantization;
  w.info = o.info;
  ExperimentConfig cfg;
  TrainedModel tm;  // with a checkpoint
  std::unique_ptr<data::DataSet> ds;  // Engram-faithful hashing and the held-out comparison
  std::unique_ptr<MemoryLayout> own;  // with a config, or the large table of a synthetic file
  const MemoryLayout* L = nullptr;
  if (!o.checkpoint.empty()) {
    // A plain export streams the table from the checkpoint slab by slab (it never holds the whole table: a table
    // trained sharded over ranks need not fit one process); the held-out comparison and a synthetic spread need it
    // all.
    const bool stream = o.eval_windows == 0 && o.synthetic_params <= 0;
    tm =
        load_trained_model(o.checkpoint, {.open_data = o.eval_windows > 0, .table_ready = true, .table_rows = !stream});
    if (!tm.mem())
      throw UserError(str("export: ", o.checkpoint, " was trained without a memory table (memory.layout none)"));
    cfg = tm.cfg();
    ds = std::move(tm.data);
    L = &tm.mem()->table().layout();
    w.info.push_back({"source", o.checkpoint});
    w.info.push_back({"table_xxh64", stream ? std::string(16, '0') : table_fingerprint(tm.mem()->table())});
    w.info.push_back({"step", std::to_string(tm.state().step)});
    w.info.push_back({"tokens", std::to_string(tm.state().tokens)});
    if (o.synthetic_params > 0) {
      own = make_storage_layout(cfg.memory, cfg.model.d_model, FlashLayoutSpec{L->name(), 0}, o.synthetic_params,
                                ds && ds->tokenizer ? ds->tokenizer->pieces() : std::vector<std::string>{});
      const RowSpread spread(*L, *own);
      const float* v = tm.mem()->table().values().data();
      const int64_t width = L->width();
      w.info.push_back({"synthetic_params", std::to_string(own->target_params())});
      w.info.push_back({"trained_params", std::to_string(L->target_params())});
      r.header = write_table_file(
          out, *own,
          [&](int64_t r0, int64_t n, float* dst) {
            for (int64_t i = 0; i < n; ++i) {
              const int64_t t = spread.inverse(r0 + i);
              if (t >= 0) std::copy(v + t * width, v + (t + 1) * width, dst + i * width);
              else std::fill(dst + i * width, dst + (i + 1) * width, 0.0f);
            }
          },
          w);
      L = own.get();
    } else {
      const h5::File f = h5::File::open(o.checkpoint);
      const h5::Group g = f.root().sub("memory").sub("table");
      const MemoryTable& table = tm.mem()->table();
      const SavedTable saved(g, L->rows(), L->width());
      if (saved.completed_step() != tm.state().step)  // a training saved between the two opens
        throw UserError(str("export: ", o.checkpoint, " was replaced while it was read (step ", tm.state().step,
                            ", then ", saved.completed_step(), ") (hint: a training is saving it; export again)"));
      data::Xxh64Stream digest;  // the table_fingerprint of the materialized table, row by row
      w.finish_info = [&](std::vector<std::pair<std::string, std::string>>& info) {
        for (auto& [k, v] : info)
          if (k == "table_xxh64") v = data::hex64(digest.digest());
      };
      r.header = write_table_file(
          out, *L,
          [&](int64_t r0, int64_t n, float* dst) {
            table.read_saved_rows(saved, r0, n, dst);
            digest.update(dst, static_cast<size_t>(n * L->width()) * sizeof(float));
          },
          w);
    }
  } else {
    cfg = load_experiment(o.config, o.sets);
    if (!cfg.memory.enabled())
      throw UserError(str("export: ", o.config, " has memory.layout none (hint: --set memory.layout=pagegram)"));
    if (cfg.memory.hash.engram_faithful)
      ds = std::make_unique<data::DataSet>(data::open_dataset(cfg.data, cfg.tokenizer, o.config));
    own = make_storage_layout(cfg.memory, cfg.model.d_model, FlashLayoutSpec{cfg.memory.layout, 0}, 0,
                              ds && ds->tokenizer ? ds->tokenizer->pieces() : std::vector<std::string>{});
    L = own.get();
    w.info.push_back({"source", str(o.config, " (", o.fill, " table)")});
    r.header = export_table_file(out, *L, nullptr, o.fill, static_cast<uint64_t>(cfg.train.seed), w);
  }
  r.layout_report = L->parity_report();
  r.write_seconds = t.seconds();
  if (o.verify) {
    Timer tv;
    verify_table_file(out, *L, o.quantization);
    r.verify_seconds = tv.seconds();
  }
  if (o.eval_windows > 0) {
    data::ValidationWindows val = ds->validation(cfg.model.context);
    r.eval_windows = std::min<int64_t>(o.eval_windows, val.count());
    Timer te;
    const MemoryLayout& T = tm.mem()->table().layout();  // the trained table (also for a synthetic file)
    r.loss = compare_table_loss(tm.mem()->table().values(), T.rows(), T.width(),
                                {TableQuantization::kNf4, TableQuantization::kMxfp8},
                                [&] { return tm.session->evaluate(val, r.eval_windows, *ds->heldout); });
    r.eval_seconds = te.seconds();
  }
  return r;
}

}  // namespace pg
