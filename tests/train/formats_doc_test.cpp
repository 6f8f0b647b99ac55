// train/FORMATS.md against the files the trainer writes: a tiny run with a PageGram table (evaluation, collision
// statistics, checkpoint) and one without a table; every group, dataset and attribute of checkpoint.h5 and log.h5
// is named in the document, and every name the document's checkpoint and run-log tables list is written by one of
// the runs. The memory table's own datasets are documented in memory/README.md and checked against it.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "core/h5.h"
#include "core/text.h"
#include "data/pipeline.h"
#include "sweep/spec.h"
#include "tests/test_util.h"
#include "train/trainer.h"

namespace pg {
namespace {

namespace fs = std::filesystem;

// Every object path (groups and datasets) under the root and every attribute as "<object path>@<name>".
struct Walk {
  std::set<std::string> objects, attrs;
};
herr_t on_attr(hid_t, const char* name, const H5A_info_t*, void* op) {
  auto* p = static_cast<std::pair<Walk*, std::string>*>(op);
  p->first->attrs.insert(p->second + "@" + name);
  return 0;
}
herr_t on_object(hid_t obj, const char* name, const H5O_info_t*, void* op) {
  Walk* w = static_cast<Walk*>(op);
  const std::string path = std::string(name) == "." ? "/" : "/" + std::string(name);
  if (path != "/") w->objects.insert(path);
  std::pair<Walk*, std::string> ctx{w, path};
  const hid_t o = H5Oopen(obj, name, H5P_DEFAULT);
  H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, on_attr, &ctx);
  H5Oclose(o);
  return 0;
}
Walk walk(const std::string& file) {
  const h5::File f = h5::File::open(file);
  const h5::Group root = f.root();
  Walk w;
  H5Ovisit2(root.id(), H5_INDEX_NAME, H5_ITER_NATIVE, on_object, &w, H5O_INFO_BASIC);
  return w;
}

// A written path in the document's terms: tensor names, scalar series and block numbers become placeholders.
std::string generic(const std::string& path) {
  static const std::vector<std::pair<std::regex, std::string>> rules = {
      {std::regex("^/params/[^/@]+"), "/params/<name>"},
      {std::regex("^/adam/(m|v)/[^/@]+"), "/adam/$1/<name>"},
      {std::regex("^/scalars/[^/@]+"), "/scalars/<name>"},
  };
  std::string s = path;
  for (const auto& [re, to] : rules) s = std::regex_replace(s, re, to);
  return s;
}

// Every word the document writes in backticks, also split at '/', '=', ',', spaces and braces ({a,b,c} lists).
std::set<std::string> doc_words(const std::string& doc) {
  std::set<std::string> out;
  static const std::regex tick("`([^`]+)`");
  for (auto it = std::sregex_iterator(doc.begin(), doc.end(), tick); it != std::sregex_iterator(); ++it) {
    std::string t = (*it)[1];
    out.insert(t);
    for (char& c : t)
      if (c == '{' || c == '}' || c == ',' || c == '/' || c == '=' || c == ' ') c = ' ';
    std::istringstream ss(t);
    for (std::string w; ss >> w;) out.insert(w);
  }
  return out;
}

class TrainFormats : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = testing::make_temp_dir("formats");
    for (const char* layout : {"pagegram", "none"}) {
      ExperimentConfig c = load_experiment(
          testing::kTinyConfig,
          testing::with_sets(
              testing::tiny_fixture_sets(dir_),
              {"train.steps=4", "train.eval_interval=2", "train.eval_windows=8", "train.checkpoint_interval=2",
               "train.log_interval=1", std::string("memory.layout=") + layout, "memory.target_params=200000",
               "memory.inject_layers=[0, 1]", "train.out_dir=" + (dir_ / layout).string()}));
      data::tokenize(c.data, c.tokenizer);
      data::DataSet ds = data::open_dataset(c.data, c.tokenizer);
      TrainOptions opt;
      opt.progress = false;
      train(c, ds, opt);
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static inline fs::path dir_;
};

TEST_F(TrainFormats, EveryWrittenNameIsDocumented) {
  const std::set<std::string> doc = doc_words(read_file(std::string(PG_SOURCE_DIR) + "/train/FORMATS.md"));
  const std::set<std::string> mem = doc_words(read_file(std::string(PG_SOURCE_DIR) + "/memory/README.md"));
  for (const char* run : {"pagegram", "none"})
    for (const char* file : {"checkpoint.h5", "log.h5"}) {
      const Walk w = walk((dir_ / run / file).string());
      EXPECT_FALSE(w.objects.empty());
      for (const std::string& o : w.objects) {
        const std::string g = generic(o);
        const std::string leaf = g.substr(g.rfind('/') + 1);
        const bool in_memory = g.rfind("/memory/", 0) == 0;
        if (in_memory) {
          EXPECT_TRUE(mem.count(leaf)) << file << ": " << o << " is not in memory/README.md";
        } else {
          EXPECT_TRUE(doc.count(leaf) || doc.count(g)) << file << ": " << o << " is not in train/FORMATS.md";
        }
      }
      for (const std::string& a : w.attrs) {
        const std::string name = a.substr(a.find('@') + 1);
        const std::string obj = generic(a.substr(0, a.find('@')));
        const std::set<std::string>& d = obj.rfind("/memory", 0) == 0 ? mem : doc;
        EXPECT_TRUE(d.count(name)) << file << ": attribute '" << name << "' of " << obj << " is not documented";
      }
    }
}

TEST_F(TrainFormats, EveryDocumentedNameIsWritten) {
  const std::string doc = read_file(std::string(PG_SOURCE_DIR) + "/train/FORMATS.md");
  std::set<std::string> objects, attrs;  // generic object paths and attribute names of both runs' files
  for (const char* run : {"pagegram", "none"})
    for (const char* file : {"checkpoint.h5", "log.h5"}) {
      const Walk w = walk((dir_ / run / file).string());
      for (const auto& o : w.objects) objects.insert(generic(o));
      for (const auto& a : w.attrs) attrs.insert(a.substr(a.find('@') + 1));
    }
  // Table rows "| `<path>` | ...": the path (braces expanded) is written; in an "attributes" row every plain
  // identifier in backticks in the second cell is an attribute written somewhere.
  static const std::regex row(R"(^\| `([^`]+)`( attributes)? \| ([^|]*)\|)");
  static const std::regex ident(R"(`([a-z_]+)`)");
  int rows = 0;
  std::istringstream in(doc);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, row)) continue;
    ++rows;
    const std::string path = m[1];
    if (m[2].matched) {
      const std::string cell = m[3];
      for (auto it = std::sregex_iterator(cell.begin(), cell.end(), ident); it != std::sregex_iterator(); ++it) {
        const std::string name = (*it)[1];
        if (name == "avx2" || name == "avx512") continue;  // values, not names
        EXPECT_TRUE(attrs.count(name)) << "documented attribute '" << name << "' (row " << path << ") is not written";
      }
      continue;
    }
    if (path.find("...") != std::string::npos) {  // a group documented elsewhere (or below): the group exists
      EXPECT_TRUE(objects.count(path.substr(0, path.find("/...")))) << path;
      continue;
    }
    if (path.front() != '/') {  // the collision table's dataset names, relative to /collisions
      EXPECT_TRUE(objects.count("/collisions/" + path)) << "documented /collisions/" << path << " is not written";
      continue;
    }
    const auto lb = path.find('{');
    if (lb == std::string::npos) {
      EXPECT_TRUE(objects.count(path)) << "documented " << path << " is not written";
      continue;
    }
    const std::string prefix = path.substr(0, lb), list = path.substr(lb + 1, path.find('}') - lb - 1);
    std::istringstream ls(list);
    for (std::string w; std::getline(ls, w, ',');)
      EXPECT_TRUE(objects.count(prefix + w)) << "documented " << prefix << w << " is not written";
  }
  EXPECT_GE(rows, 15);  // the checkpoint's, the run log's and the collision table's rows were read
}

}  // namespace
}  // namespace pg
