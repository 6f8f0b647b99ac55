// Held-out loss by collision class (eval/collision_class.h) on tiny trained checkpoints: the classes partition the
// positions, their mean equals `pagegram eval`'s loss, the replay finds the run's training windows, and a larger
// table leaves more positions clean.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "eval/collision_class.h"
#include "tests/test_util.h"
#include "train/config.h"
#include "train/trained_model.h"
#include "train/trainer.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

class CollisionClass : public ::testing::Test {
 protected:
  static std::string train_tiny(const std::string& tag, const std::string& layout, int64_t params) {
    const ExperimentConfig cfg = load_experiment(
        testing::kTinyConfig, testing::with_sets(testing::tiny_fixture_sets(dir_),
                                                 {"train.steps=3", "train.eval_interval=0", "train.eval_windows=8",
                                                  "train.checkpoint_interval=0", "memory.layout=" + layout,
                                                  "memory.target_params=" + std::to_string(params),
                                                  "train.out_dir=" + (dir_ / tag).string()}));
    data::tokenize(cfg.data, cfg.tokenizer);
    data::DataSet ds = data::open_dataset(cfg.data, cfg.tokenizer);
    TrainOptions opt;
    opt.progress = false;
    train(cfg, ds, opt);
    return (dir_ / tag / "checkpoint.h5").string();
  }
  static void SetUpTestSuite() { dir_ = testing::make_temp_dir("collision_class"); }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
};

TEST_F(CollisionClass, ClassesPartitionThePositionsAndAverageToTheHeldOutLoss) {
  const std::string ck = train_tiny("engram", "engram", 40000);
  TrainedModel tm = load_trained_model(ck, {.open_data = true});
  const ExperimentConfig& cfg = tm.cfg();
  const CollisionClassReport r = loss_by_collision_class(tm, 12);
  EXPECT_EQ(r.windows, 12);
  EXPECT_EQ(r.positions, 12 * cfg.model.context);
  EXPECT_EQ(r.train_windows, 3 * cfg.train.accum_steps(cfg.model.context) * cfg.train.micro_batch);
  EXPECT_GT(r.touched_rows, 0);
  EXPECT_GT(r.shared_rows, 0);
  ASSERT_EQ(r.orders.size(), cfg.memory.orders.size());
  for (const CollisionClassRow& o : r.orders) {
    EXPECT_EQ(o.heads_per_order, cfg.memory.heads);
    EXPECT_EQ(o.positions[0] + o.positions[1] + o.positions[2], r.positions);
    EXPECT_NEAR(o.loss_sum[0] + o.loss_sum[1] + o.loss_sum[2], r.mean_loss * static_cast<double>(r.positions),
                1e-6 * static_cast<double>(r.positions));
    EXPECT_EQ(o.owner_positions[0] + o.owner_positions[1] + o.owner_positions[2], r.positions);
    EXPECT_GE(o.owner_positions[0], o.positions[0]);  // a clean position owns its rows
    EXPECT_LE(o.owner_positions[2], o.positions[2]);  // owned by others in every head: foreign in every head
  }
  const data::ValidationWindows val = tm.data->validation(cfg.model.context);
  const double loss = tm.session->evaluate(val, 12, *tm.data->heldout);
  EXPECT_NEAR(r.mean_loss, loss, 1e-9);
  EXPECT_NE(format_collision_class_table(r).find("engram"), std::string::npos);
}

TEST_F(CollisionClass, ALargerTableLeavesMorePositionsClean) {
  double clean[2], all[2];
  int i = 0;
  for (int64_t params : {20000, 4000000}) {
    TrainedModel tm =
        load_trained_model(train_tiny("size" + std::to_string(params), "engram", params), {.open_data = true});
    const CollisionClassReport r = loss_by_collision_class(tm, 8);
    clean[i] = r.orders[0].share(0);
    all[i++] = r.orders[0].share(2);
  }
  EXPECT_LT(clean[0], clean[1]) << "bigram clean share, small vs large table";
  // 381 rows for 3,072 training positions: every row is shared, every position's heads all foreign; 62,388 rows:
  // a row gets ~0.8 lookups, so most positions have some foreign head of 8 but rarely all.
  EXPECT_GT(all[0], 0.9);
  EXPECT_LT(all[1], 0.1);
}

TEST_F(CollisionClass, ACheckpointWithoutATableIsRefused) {
  TrainedModel tm = load_trained_model(train_tiny("none", "none", 40000), {.open_data = true});
  EXPECT_THROW(loss_by_collision_class(tm, 4), UserError);
}

}  // namespace
}  // namespace pg
