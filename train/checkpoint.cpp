// Implementation of train/checkpoint.h.
#include "train/checkpoint.h"

#include <cmath>
#include <filesystem>
#include <span>

#include "core/build_info.h"
#include "kernels/kernels.h"
#include "memory/table.h"

namespace pg {
namespace {

std::vector<uint64_t> shape_of(const ParamInfo& p) { return std::vector<uint64_t>(p.shape.begin(), p.shape.end()); }

void check_format(const h5::Group& r, const std::string& path) {
  if (!r.has_attr("format") || r.attr_string("format") != "pagegram-checkpoint")
    throw IoError(str(path, ": not a pagegram checkpoint (root attribute 'format' missing or different)"));
  const int64_t v = r.attr_int("format_version");
  if (v != kCheckpointVersion)
    throw IoError(str(path, ": checkpoint format version ", v, ", this build reads ", kCheckpointVersion));
}

// Refuses NaN/Inf anywhere in a tensor read from a checkpoint (a run resumed from it would carry them on).
void check_finite(std::span<const float> v, const std::string& path, const std::string& name) {
  for (size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw IoError(
          str(path, ":/", name, "[", i, "]: non-finite value ", v[i],
              " (hint: the checkpoint is corrupt or was saved from a diverged run; resume from an earlier one)"));
}

}  // namespace

void save_checkpoint(const std::string& path, const ExperimentConfig& cfg, const Transformer& model, AdamW* opt,
                     const TrainState& st, const SectionWriter& memory, int64_t memory_bytes) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  auto& m = const_cast<Transformer&>(model);
  h5::write_atomic(
      path,
      [&](const h5::Group& r) {
        r.set_attr("format", std::string("pagegram-checkpoint"));
        r.set_attr("format_version", kCheckpointVersion);
        r.set_attr("config", cfg::dump(cfg));
        r.set_attr("revision", std::string(build::kRevision));
        r.set_attr("kernels", std::string(kern::active_name()));
        r.set_attr("cpu", isa::cpu_description());
        r.set_attr("step", st.step);
        r.set_attr("tokens", st.tokens);
        r.set_attr("sampler_counter", static_cast<int64_t>(st.sampler_counter));
        r.set_attr("elapsed_s", st.elapsed_s);
        h5::Group params = r.create("params");
        std::span<float> all = m.params();
        for (const ParamInfo& pi : m.param_infos())
          params.write<float>(pi.name, std::span<const float>(all.data() + pi.offset, pi.size), shape_of(pi));
        if (opt) {
          h5::Group adam = r.create("adam");
          h5::Group gm = adam.create("m"), gv = adam.create("v");
          for (size_t i = 0; i < opt->views().size(); ++i) {
            const auto& v = opt->views()[i];
            gm.write<float>(v.name, std::span<const float>(opt->m(i)), {v.n});
            gv.write<float>(v.name, std::span<const float>(opt->v(i)), {v.n});
          }
        }
        if (memory) memory(r.create("memory"));
      },
      static_cast<int64_t>(model.params().size() * sizeof(float) * (opt ? 3 : 1)) + memory_bytes);
}

namespace {
// "<stem>.table-" for "<dir>/<stem>.h5" (the whole name when it has no .h5 extension).
std::string shard_prefix(const std::string& checkpoint) {
  const std::filesystem::path p(checkpoint);
  const std::string stem = p.extension() == ".h5" ? p.stem().string() : p.filename().string();
  return stem + ".table-";
}
}  // namespace

std::string table_shard_path(const std::string& checkpoint, int64_t step, const std::string& save_id, int shard,
                             int shards) {
  const std::filesystem::path p(checkpoint);
  return (p.parent_path() / str(shard_prefix(checkpoint), step, "-", save_id, "-", shard, "of", shards, ".h5"))
      .string();
}

std::string checkpoint_folder(const std::string& checkpoint) { return saved_shards_folder(checkpoint); }

std::vector<std::string> checkpoint_shard_files(const std::string& checkpoint) {
  h5::File f = h5::File::open(checkpoint);
  const h5::Group r = f.root();
  std::vector<std::string> out;
  if (!r.has("memory") || !r.sub("memory").has("table")) return out;
  const std::filesystem::path dir = checkpoint_folder(checkpoint);
  for (const std::string& name : saved_shard_names(r.sub("memory").sub("table"))) out.push_back((dir / name).string());
  return out;
}

std::vector<std::string> remove_stale_table_shards(const std::string& checkpoint,
                                                   const std::vector<std::string>& keep) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  const fs::path parent = fs::path(checkpoint).parent_path();
  const fs::path dir = parent.empty() ? fs::path(".") : parent;
  const std::string prefix = shard_prefix(checkpoint);
  std::error_code ec;
  std::vector<fs::path> stale;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(prefix, 0) != 0 || name.find(".h5") == std::string::npos) continue;
    bool kept = false;
    for (const std::string& k : keep) kept = kept || fs::path(k).filename() == name;
    if (!kept) stale.push_back(it->path());
  }
  for (const fs::path& p : stale)
    if (fs::remove(p, ec)) removed.push_back(p.string());
  return removed;
}

ExperimentConfig checkpoint_config(const std::string& path) {
  h5::File f = h5::File::open(path);
  h5::Group r = f.root();
  check_format(r, path);
  return parse_experiment(r.attr_string("config"), path + ":/config");
}

TrainState load_checkpoint(const std::string& path, Transformer& model, AdamW* opt, const SectionReader& memory) {
  h5::File f = h5::File::open(path);
  h5::Group r = f.root();
  check_format(r, path);
  h5::Group params = r.sub("params");
  std::span<float> all = model.params();
  for (const ParamInfo& pi : model.param_infos()) {
    const std::span<float> dst(all.data() + pi.offset, pi.size);
    params.read_into<float>(pi.name, dst, shape_of(pi));
    check_finite(dst, path, "params/" + pi.name);
  }
  if (opt) {
    h5::Group adam = r.sub("adam");
    h5::Group gm = adam.sub("m"), gv = adam.sub("v");
    for (size_t i = 0; i < opt->views().size(); ++i) {
      const auto& v = opt->views()[i];
      gm.read_into<float>(v.name, opt->m(i), {v.n});
      gv.read_into<float>(v.name, opt->v(i), {v.n});
      check_finite(opt->m(i), path, "adam/m/" + v.name);
      check_finite(opt->v(i), path, "adam/v/" + v.name);
      for (size_t j = 0; j < opt->v(i).size(); ++j)
        if (opt->v(i)[j] < 0.0f)
          throw IoError(str(path, ":/adam/v/", v.name, "[", j, "]: negative second moment ", opt->v(i)[j],
                            " (hint: the checkpoint is corrupt)"));
    }
  }
  if (memory) memory(r.sub("memory"));
  TrainState st;
  st.step = r.attr_int("step");
  st.tokens = r.attr_int("tokens");
  const int64_t counter = r.attr_int("sampler_counter");
  st.elapsed_s = r.attr_double("elapsed_s");
  // Attributes in range for the checkpoint's own config (the one it was trained with).
  const ExperimentConfig cfg = parse_experiment(r.attr_string("config"), path + ":/config");
  const int64_t total = cfg.train.total_steps();
  auto bad = [&](const char* attr, const std::string& v, const std::string& want) {
    return IoError(str(path, ": attribute '", attr, "' = ", v, ", expected ", want,
                       " (hint: the checkpoint is corrupt or edited)"));
  };
  if (st.step < 0 || st.step > total)
    throw bad("step", std::to_string(st.step), str("0..", total, " (train.steps of its config)"));
  if (st.tokens != st.step * cfg.train.tokens_per_step)
    throw bad("tokens", std::to_string(st.tokens),
              str("step x train.tokens_per_step = ", st.step * cfg.train.tokens_per_step));
  // The sampler draws one window start per window (rejection sampling redraws with probability < 2^-40 per window,
  // so a few draws of slack): a counter elsewhere would resume on other data.
  const int64_t windows = st.step * cfg.train.accum_steps(cfg.model.context) * cfg.train.micro_batch;
  if (counter < windows || counter > windows + 64)
    throw bad("sampler_counter", std::to_string(counter),
              str("step x windows per step = ", windows, " (the data position after step ", st.step, ")"));
  if (!std::isfinite(st.elapsed_s) || st.elapsed_s < 0) throw bad("elapsed_s", str(st.elapsed_s), "a finite time >= 0");
  st.sampler_counter = static_cast<uint64_t>(counter);
  return st;
}

}  // namespace pg
