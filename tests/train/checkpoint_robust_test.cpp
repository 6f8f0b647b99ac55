// Checkpoints that are damaged or edited are refused with one line naming the file and what is wrong
// (non-finite tensors, attributes out of range, flipped bytes in small datasets), never resumed from.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <tuple>
#include <vector>
#include <fstream>
#include <string>

#include "core/build_info.h"
#include "core/h5.h"
#include "kernels/kernels.h"
#include "data/pipeline.h"
#include "train/checkpoint.h"
#include "train/config.h"
#include "train/trained_model.h"
#include "train/trainer.h"
#include "tests/test_util.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class CheckpointRobustness : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tiny_ = testing::TinyRun(
        "ckrobust", {"train.steps=4", "train.eval_interval=0", "train.eval_windows=8", "train.checkpoint_interval=0",
                     "memory.layout=pagegram", "memory.inject_layers=[0,1]", "memory.target_params=200000"});
    dir_ = tiny_.dir();
    cfg_ = tiny_.config("run");
    cfg_.train.threads = tiny_.base().train.threads;
    testing::TinyRun::train_run(cfg_, 2);
    good_ = (dir_ / "run" / "checkpoint.h5").string();
  }
  static void TearDownTestSuite() { tiny_.remove(); }

  // A copy of the good checkpoint edited through the HDF5 C API.
  static std::string edited(const std::string& name, const std::function<void(hid_t)>& edit) {
    const std::string p = (dir_ / (name + ".h5")).string();
    fs::copy_file(good_, p, fs::copy_options::overwrite_existing);
    const hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    EXPECT_GE(f, 0);
    edit(f);
    H5Fclose(f);
    return p;
  }
  static void set_int_attr(hid_t f, const char* name, int64_t v) {
    const hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    H5Awrite(a, H5T_NATIVE_INT64, &v);
    H5Aclose(a);
  }
  static void poke_float(hid_t f, const char* dataset, float value) {
    const hid_t d = H5Dopen2(f, dataset, H5P_DEFAULT);
    const hid_t space = H5Dget_space(d);
    hsize_t n = static_cast<hsize_t>(H5Sget_simple_extent_npoints(space));
    std::vector<float> v(n);
    H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    v[n / 2] = value;
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Sclose(space);
    H5Dclose(d);
  }
  // The error of resuming the training from checkpoint `p` ("" when it was accepted).
  static std::string resume_error(const std::string& p) {
    ExperimentConfig c = cfg_;
    c.train.out_dir = (dir_ / ("resume_" + fs::path(p).stem().string())).string();
    fs::create_directories(c.train.out_dir);
    fs::copy_file(p, c.train.out_dir + "/checkpoint.h5", fs::copy_options::overwrite_existing);
    fs::copy_file(dir_ / "run" / "log.h5", c.train.out_dir + "/log.h5", fs::copy_options::overwrite_existing);
    data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    opt.resume = true;
    try {
      train(c, ds, opt);
    } catch (const UserError& e) {
      return e.what();
    }
    return "";
  }
  static inline testing::TinyRun tiny_;
  static inline fs::path dir_;
  static inline ExperimentConfig cfg_;
  static inline std::string good_;
};

TEST_F(CheckpointRobustness, TheGoodCheckpointResumes) { EXPECT_EQ(resume_error(good_), ""); }

TEST_F(CheckpointRobustness, NonFiniteTensorsAreRefused) {
  const std::string nan = edited("nan", [](hid_t f) { poke_float(f, "params/blocks.0.w_qkv", NAN); });
  EXPECT_NE(resume_error(nan).find("params/blocks.0.w_qkv"), std::string::npos) << resume_error(nan);
  const std::string inf = edited("inf", [](hid_t f) { poke_float(f, "adam/v/final_norm", INFINITY); });
  EXPECT_NE(resume_error(inf).find("non-finite"), std::string::npos) << resume_error(inf);
}

TEST_F(CheckpointRobustness, AttributesOutOfRangeAreRefused) {
  for (const auto& [attr, value, want] : std::vector<std::tuple<const char*, int64_t, const char*>>{
           {"step", -5, "'step' = -5"},
           {"step", 1000, "'step' = 1000"},
           {"sampler_counter", -1, "'sampler_counter'"},
           {"sampler_counter", 3, "(the data position after step"},  // an edited counter resumes on other data
           {"sampler_counter", 100000, "'sampler_counter' = 100000"},
           {"tokens", 7, "'tokens' = 7"}}) {
    const std::string p =
        edited(std::string(attr) + std::to_string(value), [&](hid_t f) { set_int_attr(f, attr, value); });
    const std::string e = resume_error(p);
    EXPECT_NE(e.find(want), std::string::npos) << attr << "=" << value << ": " << e;
  }
}

TEST_F(CheckpointRobustness, AFlippedByteInASmallDatasetIsCaught) {
  // the 32 weights of a norm: far below the old 4,096-value checksum threshold
  const std::string p = (dir_ / "flip.h5").string();
  fs::copy_file(good_, p, fs::copy_options::overwrite_existing);
  std::vector<float> w = h5::File::open(good_).root().sub("params").read<float>("blocks.1.mlp_norm");
  std::string bytes;
  {
    std::ifstream in(p, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string pat(reinterpret_cast<const char*>(w.data()), w.size() * sizeof(float));
  const size_t at = bytes.find(pat);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 9] ^= 0x01;
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_NE(resume_error(p).find("mlp_norm"), std::string::npos) << resume_error(p);
}

// Provenance across resumes: the log's `revisions` attribute keeps one "<revision>:<kernels>@<first step>" segment
// per build that wrote it.
TEST_F(CheckpointRobustness, TheLogKeepsTheRevisionOfEveryBuildThatWroteIt) {
  ExperimentConfig c = cfg_;
  c.train.out_dir = (dir_ / "revs").string();
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  opt.stop_after = 2;
  train(c, ds, opt);
  const std::string log = c.train.out_dir + "/log.h5";
  const std::string mine = std::string(build::kRevision) + ":" + kern::active_name();
  EXPECT_EQ(h5::File::open(log).root().attr_string("revisions"), mine + "@1");
  {  // pretend an older build wrote steps 1-2
    const hid_t f = H5Fopen(log.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    h5::Group(h5::Handle(H5Gopen2(f, "/", H5P_DEFAULT), [](hid_t id) { return H5Gclose(id); }), log, "/")
        .set_attr("revisions", std::string("0123456789ab:avx2@1"));
    H5Fclose(f);
  }
  opt.resume = true;
  opt.stop_after = 1;
  train(c, ds, opt);
  EXPECT_EQ(h5::File::open(log).root().attr_string("revisions"), "0123456789ab:avx2@1 " + mine + "@3");
}

// `pagegram eval` crashed (internal check "no learning-rate schedule set") on any checkpoint trained
// with memory.weight_decay > 0; the eval path now loads through load_trained_model.
TEST_F(CheckpointRobustness, EvalLoadsACheckpointTrainedWithTableWeightDecay) {
  ExperimentConfig c = cfg_;
  c.memory.weight_decay = 0.1;
  c.train.out_dir = (dir_ / "wd").string();
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  opt.stop_after = 2;
  train(c, ds, opt);
  TrainedModelOptions o;
  o.open_data = true;
  TrainedModel t = load_trained_model(c.train.out_dir + "/checkpoint.h5", o);
  ASSERT_TRUE(t.mem());
  ASSERT_TRUE(t.data);
  const double l = t.session->evaluate(t.data->validation(c.model.context), 4, *t.data->heldout);
  EXPECT_TRUE(std::isfinite(l));
  EXPECT_GT(l, 0.0);
}

}  // namespace
}  // namespace pg

namespace pg {
namespace {
// A held-out token store copied over the train store (or the reverse) is refused by its header's split.
TEST_F(CheckpointRobustness, ATokenStoreOfTheOtherSplitIsRefused) {
  const data::TokenizeSummary t = data::tokenize(cfg_.data, cfg_.tokenizer);
  const std::string backup = t.train_path + ".orig";
  std::filesystem::copy_file(t.train_path, backup, std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(t.heldout_path, t.train_path, std::filesystem::copy_options::overwrite_existing);
  std::string err;
  try {
    data::open_dataset(cfg_.data, cfg_.tokenizer);
  } catch (const IoError& e) {
    err = e.what();
  }
  std::filesystem::rename(backup, t.train_path);
  EXPECT_NE(err.find("header field 'split' at byte offset 72 is 1, not 0 (train)"), std::string::npos) << err;
  EXPECT_NO_THROW(data::open_dataset(cfg_.data, cfg_.tokenizer));
}
}  // namespace
}  // namespace pg

namespace pg {
namespace {
// A model too big for this machine is refused from its config before anything is allocated (it used to
// try to allocate 1.6 TB and end in an internal check).
TEST_F(CheckpointRobustness, AModelTooBigForMemoryIsRefusedBeforeAllocating) {
  ExperimentConfig c = cfg_;
  c.model.d_model = 16384;
  c.model.heads = 16;
  c.model.vocab = c.tokenizer.vocab_size;
  c.train.out_dir = (dir_ / "huge").string();
  std::string what;
  EXPECT_GT(estimate_training_bytes(c, &what), int64_t{100} << 30) << what;
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  try {
    train(c, ds, opt);
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("GiB are available"), std::string::npos) << e.what();
  }
  // and the tiny run itself is estimated small
  EXPECT_LT(estimate_training_bytes(cfg_), int64_t{1} << 30);
}
}  // namespace
}  // namespace pg

namespace pg {
namespace {
// A run whose loss explodes (train.lr = 10) stops as diverged (it used to end "finished", exit 0).
TEST_F(CheckpointRobustness, ARunWhoseLossExplodesStopsAsDiverged) {
  ExperimentConfig c = cfg_;
  c.train.lr = 10.0;
  c.train.steps = 40;
  c.train.checkpoint_interval = 1;
  c.train.out_dir = (dir_ / "lr10").string();
  data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
  TrainOptions opt;
  opt.progress = false;
  std::string err;
  try {
    train(c, ds, opt);
  } catch (const UserError& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("training diverged at step"), std::string::npos) << err;
  EXPECT_EQ(h5::File::open(c.train.out_dir + "/log.h5").root().attr_string("status"), "diverged");
  // whatever checkpoint was written holds finite values (it is accepted by the strict reader)
  if (std::filesystem::exists(c.train.out_dir + "/checkpoint.h5")) {
    Transformer m(c.model, c.train.micro_batch);
    EXPECT_NO_THROW(load_checkpoint(c.train.out_dir + "/checkpoint.h5", m, nullptr, [](const h5::Group&) {}));
  }
}

TEST_F(CheckpointRobustness, AnEmptyOutDirIsRefused) {
  EXPECT_THROW(load_experiment(PG_SOURCE_DIR "/configs/tiny.yaml", {"train.out_dir="}), ConfigError);
}
}  // namespace
}  // namespace pg

namespace pg {
namespace {
// On --resume, a log whose per-step arrays do not all have the length of their step array (/train,
// /eval, /scalars/*, /collisions) is refused with one line naming the file, the dataset and both lengths; the log
// is left as it was (it used to be truncated to the shortest array and written back misaligned, exit 0).
TEST_F(CheckpointRobustness, ALogWhoseArraysDisagreeWithTheirStepsIsRefused) {
  // Replaces dataset `name` of `file` by a copy with `delta` rows more (< 0: fewer; the last rows go, a new row
  // repeats the last), of the same type and the same shape otherwise.
  auto resize_rows = [](const std::string& file, const std::string& name, int delta) {
    const hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(d, 0) << name;
    const hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    const int rank = H5Sget_simple_extent_ndims(space);
    ASSERT_GE(rank, 1);
    std::vector<hsize_t> dims(rank);
    H5Sget_simple_extent_dims(space, dims.data(), nullptr);
    size_t row = H5Tget_size(type);
    for (int i = 1; i < rank; ++i) row *= dims[i];
    std::vector<char> bytes(row * dims[0]);
    H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    ASSERT_GE(static_cast<int64_t>(dims[0]) + delta, 0);
    const std::vector<char> last(bytes.end() - static_cast<std::ptrdiff_t>(row), bytes.end());
    for (int i = 0; i < delta; ++i) bytes.insert(bytes.end(), last.begin(), last.end());
    dims[0] = static_cast<hsize_t>(static_cast<int64_t>(dims[0]) + delta);
    bytes.resize(row * dims[0]);
    H5Sclose(space);
    H5Dclose(d);
    H5Ldelete(f, name.c_str(), H5P_DEFAULT);
    const hid_t s2 = H5Screate_simple(rank, dims.data(), nullptr);
    const hid_t d2 = H5Dcreate2(f, name.c_str(), type, s2, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    ASSERT_GE(d2, 0);
    if (dims[0] > 0) H5Dwrite(d2, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data());
    H5Dclose(d2);
    H5Sclose(s2);
    H5Tclose(type);
    H5Fclose(f);
  };
  const h5::Group good = h5::File::open((dir_ / "run" / "log.h5").string()).root();
  ASSERT_TRUE(good.has("collisions")) << "the tiny PageGram run logs collision statistics";
  const std::string scalar = good.sub("scalars").children().front();
  const uint64_t train_rows = good.sub("train").dataset_shape("step")[0],
                 eval_rows = good.sub("eval").dataset_shape("step")[0],
                 scalar_rows = good.sub("scalars").sub(scalar).dataset_shape("step")[0],
                 coll_rows = good.sub("collisions").dataset_shape("step")[0];
  ASSERT_EQ(train_rows, 2u);
  auto rows = [](uint64_t n) { return str(n, n == 1 ? " row" : " rows"); };
  int n = 0;
  for (const auto& [dataset, delta, want] : std::vector<std::tuple<std::string, int, std::string>>{
           {"train/loss", -1, str("/train/loss: ", rows(train_rows - 1), ", but /train/step has ", train_rows)},
           {"train/lr", +1, str("/train/lr: ", rows(train_rows + 1), ", but /train/step has ", train_rows)},
           {"train/step", -1, str(", but /train/step has ", train_rows - 1)},
           {"eval/loss", -1, str("/eval/loss: ", rows(eval_rows - 1), ", but /eval/step has ", eval_rows)},
           {"scalars/" + scalar + "/value", -1,
            str("/scalars/", scalar, "/value: ", rows(scalar_rows - 1), ", but /scalars/", scalar, "/step has ",
                scalar_rows)},
           {"collisions/touched_rows", -1,
            str("/collisions/touched_rows: ", rows(coll_rows - 1), ", but /collisions/step has ", coll_rows)}}) {
    const fs::path run = dir_ / ("misaligned" + std::to_string(n++));
    fs::remove_all(run);
    fs::create_directories(run);
    fs::copy_file(good_, run / "checkpoint.h5");
    fs::copy_file(dir_ / "run" / "log.h5", run / "log.h5");
    resize_rows((run / "log.h5").string(), dataset, delta);
    const std::string before = testing::slurp(run / "log.h5");
    ExperimentConfig c = cfg_;
    c.train.out_dir = run.string();
    data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    opt.resume = true;
    std::string err;
    bool resource = false;
    try {
      train(c, ds, opt);
    } catch (const UserError& e) {
      err = e.what();
      resource = dynamic_cast<const ResourceError*>(&e) != nullptr;
    }
    EXPECT_NE(err.find((run / "log.h5").string() + ":/"), std::string::npos) << dataset << ": " << err;
    EXPECT_NE(err.find(want), std::string::npos) << dataset << ": " << err;
    EXPECT_NE(err.find("(hint: "), std::string::npos) << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
    EXPECT_FALSE(resource) << "bad input (exit 2), not a resource error (exit 4): " << err;
    EXPECT_EQ(testing::slurp(run / "log.h5"), before) << dataset << ": the log was written back";
  }
}
}  // namespace
}  // namespace pg
