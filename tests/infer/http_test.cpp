// Completions and the HTTP server (infer/completion.h, infer/http.h): the sampling filters against their rules
// computed from the logits, log-probabilities, stop strings held back and cut, and the server end to end over
// loopback with a real HTTP client: several clients at once give what each gets alone, streaming events add up to
// the reply, bad requests get a JSON error and the server goes on, an oversized body is refused from its length.
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <thread>

#include "infer/completion.h"
#include "infer/http.h"
#include "infer/serve.h"
#include "tests/tiny_run.h"

namespace pg {
namespace {

using json = nlohmann::json;

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    run_ = testing::TinyRun("http", {"train.steps=6", "train.eval_interval=0", "train.checkpoint_interval=0",
                                     "memory.layout=pagegram", "memory.target_params=200000"});
    testing::TinyRun::train_run(run_.config("run"));
  }
  static void TearDownTestSuite() { run_.remove(); }
  static std::unique_ptr<Engine> engine() {
    EngineOptions o;
    o.checkpoint = (run_.dir() / "run" / "checkpoint.h5").string();
    o.progress = false;
    o.max_batch = 16;
    return open_engine(o);
  }
  static inline testing::TinyRun run_;
};

std::vector<int32_t> some_prompt(int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  uint32_t x = 7;
  for (auto& t : p) t = static_cast<int32_t>((x = x * 1664525u + 1013904223u) >> 22);  // < 1024
  return p;
}

TEST_F(HttpTest, SamplingFiltersFollowTheirRulesOnTheLogits) {
  std::unique_ptr<Engine> e = engine();
  const std::vector<int32_t> p = some_prompt(12);
  auto tokens = [&](const SamplingOptions& so, int n, std::vector<std::vector<float>>* logits = nullptr,
                    std::vector<std::vector<int32_t>>* hist = nullptr) {
    const int64_t s = e->open(so);
    e->feed(s, p);
    std::vector<int32_t> out;
    std::vector<int32_t> h = p;
    const int64_t ids[1] = {s};
    for (int i = 0; i < n; ++i) {
      if (logits) logits->emplace_back(e->logits(s).begin(), e->logits(s).end());
      if (hist) hist->push_back(h);
      out.push_back(e->step(ids)[0]);
      h.push_back(out.back());
    }
    e->close(s);
    return out;
  };
  SamplingOptions greedy{0.0, 0, 0};
  const std::vector<int32_t> g = tokens(greedy, 12);
  // A nucleus smaller than any one token, or min_p = 1, leaves the most probable token: greedy at any temperature.
  SamplingOptions nucleus{1.5, 0, 5};
  nucleus.top_p = 1e-9;
  EXPECT_EQ(tokens(nucleus, 12), g);
  SamplingOptions minp{1.5, 0, 5};
  minp.min_p = 1.0;
  EXPECT_EQ(tokens(minp, 12), g);
  // Repetition penalty, greedy: the argmax of the logits with every distinct token of the last n penalized once.
  SamplingOptions rep = greedy;
  rep.repetition_penalty = 1.7;
  rep.repeat_last_n = 5;
  std::vector<std::vector<float>> lg;
  std::vector<std::vector<int32_t>> hs;
  const std::vector<int32_t> r = tokens(rep, 12, &lg, &hs);
  int differ = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    std::vector<double> w(lg[i].begin(), lg[i].end());
    std::vector<int32_t> last(hs[i].end() - 5, hs[i].end());
    std::sort(last.begin(), last.end());
    last.erase(std::unique(last.begin(), last.end()), last.end());
    for (int32_t t : last) w[t] = w[t] > 0 ? w[t] / 1.7 : w[t] * 1.7;
    const int32_t want = static_cast<int32_t>(std::max_element(w.begin(), w.end()) - w.begin());
    EXPECT_EQ(r[i], want) << "step " << i;
    differ += std::max_element(lg[i].begin(), lg[i].end()) - lg[i].begin() != want;
  }
  EXPECT_GT(differ, 0) << "the penalty never changed a choice: the test does not test it";
  // Seeded: the same options and seed give the same tokens; top-p in (0, 1) samples among several tokens.
  SamplingOptions np{1.0, 0, 9};
  np.top_p = 0.9;
  EXPECT_EQ(tokens(np, 16), tokens(np, 16));
  // Options out of range are one line naming the option.
  for (auto [key, so] : std::vector<std::pair<std::string, SamplingOptions>>{{"top_p",
                                                                              [] {
                                                                                SamplingOptions s;
                                                                                s.top_p = 0;
                                                                                return s;
                                                                              }()},
                                                                             {"min_p",
                                                                              [] {
                                                                                SamplingOptions s;
                                                                                s.min_p = 1.5;
                                                                                return s;
                                                                              }()},
                                                                             {"repetition_penalty",
                                                                              [] {
                                                                                SamplingOptions s;
                                                                                s.repetition_penalty = 0;
                                                                                return s;
                                                                              }()},
                                                                             {"logprobs", [] {
                                                                                SamplingOptions s;
                                                                                s.logprobs = 21;
                                                                                return s;
                                                                              }()}}) {
    try {
      e->open(so);
      ADD_FAILURE() << key << " was accepted";
    } catch (const UserError& err) {
      EXPECT_NE(std::string(err.what()).find(key), std::string::npos) << err.what();
    }
  }
}

TEST_F(HttpTest, LogprobsAreTheLogSoftmaxOfTheLogits) {
  std::unique_ptr<Engine> e = engine();
  SamplingOptions so{0.9, 0, 3};
  so.logprobs = 4;
  const int64_t s = e->open(so);
  e->feed(s, some_prompt(10));
  const int64_t ids[1] = {s};
  for (int i = 0; i < 5; ++i) {
    const std::vector<float> lg(e->logits(s).begin(), e->logits(s).end());
    const int32_t t = e->step(ids)[0];
    double mx = *std::max_element(lg.begin(), lg.end()), sum = 0;
    for (float v : lg) sum += std::exp(v - mx);
    const TokenLogprobs& lp = e->last_logprobs(s);
    EXPECT_EQ(lp.token, t);
    EXPECT_NEAR(lp.logprob, lg[t] - mx - std::log(sum), 1e-9);
    ASSERT_EQ(lp.top.size(), 4u);
    EXPECT_EQ(lp.top[0].first, std::max_element(lg.begin(), lg.end()) - lg.begin());
    for (size_t k = 1; k < 4; ++k) EXPECT_GE(lp.top[k - 1].second, lp.top[k].second);
  }
}

TEST(StopScan, HoldsBackWhatMayStartAStopStringAndCutsAtIt) {
  bool stopped = false;
  StopScan a({"END", "\n\n"});
  EXPECT_EQ(a.update("hello E", false, stopped), "hello ");  // "E" may begin "END"
  EXPECT_FALSE(stopped);
  EXPECT_EQ(a.update("hello EN", false, stopped), "");
  EXPECT_EQ(a.update("hello ENx", false, stopped), "ENx");  // it did not
  EXPECT_EQ(a.update("hello ENx\n", false, stopped), "");  // "\n" may begin "\n\n"
  EXPECT_EQ(a.update("hello ENx\nA", false, stopped), "\nA");
  EXPECT_EQ(a.update("hello ENx\nA\n\nmore", false, stopped), "");  // cut at the stop string, never past it
  EXPECT_TRUE(stopped);
  EXPECT_EQ(a.released(), "hello ENx\nA");
  StopScan b({"END"});
  EXPECT_EQ(b.update("abc EN", true, stopped), "abc EN");  // final: everything not a stop string
  EXPECT_FALSE(stopped);
  // An incomplete UTF-8 character (the first byte of "é") and a replacement character wait for the next token.
  StopScan c({});
  EXPECT_EQ(c.update("caf\xC3", false, stopped), "caf");
  EXPECT_EQ(c.update("caf\xC3\xA9", false, stopped), "\xC3\xA9");
  EXPECT_EQ(c.update("caf\xC3\xA9 \xEF\xBF\xBD", false, stopped), " ");
  EXPECT_EQ(c.update("caf\xC3\xA9 \xE2\x82\xAC", false, stopped), "\xE2\x82\xAC");
}

TEST_F(HttpTest, CompletionsBatchedGiveWhatEachGetsAloneAndStopWhereAsked) {
  std::unique_ptr<Engine> e = engine();
  Completions comp(*e, 8);
  auto run = [&](CompletionParams p, std::string* finish = nullptr) {
    auto j = comp.submit(std::move(p));
    CompletionChunk c;
    std::string text;
    while (comp.next(*j, c)) {
      text += c.text;
      if (finish && !c.finish.empty()) *finish = c.finish;
    }
    return text;
  };
  auto params = [&](uint64_t seed, int64_t n) {
    CompletionParams p;
    p.prompt = e->encode("the quick brown fox");
    p.sampling = {1.0, 0, seed};
    p.max_tokens = n;
    p.ignore_eos = true;
    return p;
  };
  std::vector<std::string> alone;
  for (uint64_t s = 0; s < 6; ++s) alone.push_back(run(params(s, 20)));
  std::vector<std::string> together(6);
  std::vector<std::thread> ts;
  for (uint64_t s = 0; s < 6; ++s) ts.emplace_back([&, s] { together[s] = run(params(s, 20)); });
  for (auto& t : ts) t.join();
  EXPECT_EQ(together, alone);
  EXPECT_NE(alone[0], alone[1]);
  // A stop string taken from the unconstrained text: the completion ends before it.
  const std::string full = alone[2];
  ASSERT_GE(full.size(), 8u);
  const std::string stop = full.substr(full.size() / 2, 3);
  CompletionParams p = params(2, 20);
  p.stop = {stop};
  std::string finish;
  EXPECT_EQ(run(p, &finish), full.substr(0, full.find(stop)));
  EXPECT_EQ(finish, "stop");
  finish.clear();
  EXPECT_EQ(run(params(2, 20), &finish), full);
  EXPECT_EQ(finish, "length");
  // A cancelled completion ends and its session closes.
  auto j = comp.submit(params(1, 100000));
  CompletionChunk c;
  ASSERT_TRUE(comp.next(*j, c));
  comp.cancel(*j);
  std::string last;
  while (comp.next(*j, c)) last = c.finish;
  EXPECT_EQ(last, "cancelled");
  EXPECT_THROW(comp.submit(CompletionParams{}), UserError);  // no prompt
}

// The server on a free port of the loopback interface, run on a thread of its own.
struct Running {
  HttpServer server;
  int port;
  std::thread t;
  Running(Engine& e, HttpOptions o)
      : server(e,
               [&] {
                 o.port = 0;
                 return o;
               }()),
        port(server.bind()) {
    t = std::thread([this] { server.run(); });
  }
  ~Running() {
    server.stop();
    t.join();
  }
};

json body_of(const httplib::Result& r) {
  EXPECT_TRUE(r) << "no reply";
  return r ? json::parse(r->body) : json();
}

TEST_F(HttpTest, TheServerAnswersSeveralClientsStreamsAndRefusesBadRequests) {
  std::unique_ptr<Engine> e = engine();
  HttpOptions o;
  o.max_request_bytes = 4096;
  o.model_name = "tiny";
  Running srv(*e, o);
  httplib::Client cli("127.0.0.1", srv.port);
  cli.set_read_timeout(60, 0);
  auto health = [&] {
    auto r = cli.Get("/health");
    return r && r->status == 200 && body_of(r)["status"] == "ok";
  };
  ASSERT_TRUE(health());
  auto request = [](int seed, bool stream) {
    return json{{"prompt", "the quick brown fox"},
                {"max_tokens", 12},
                {"temperature", 1.0},
                {"seed", seed},
                {"ignore_eos", true},
                {"stream", stream},
                {"logprobs", 1}}
        .dump();
  };
  // Alone, one after the other.
  std::vector<std::string> alone;
  for (int s = 0; s < 4; ++s) {
    auto r = cli.Post("/v1/completions", request(s, false), "application/json");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    const json b = json::parse(r->body);
    EXPECT_EQ(b["model"], "tiny");
    EXPECT_EQ(b["object"], "text_completion");
    EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(b["usage"]["completion_tokens"], 12);
    EXPECT_EQ(b["choices"][0]["logprobs"]["token_logprobs"].size(), 12u);
    alone.push_back(b["choices"][0]["text"]);
  }
  // Together: four clients at once, half of them streaming (server-sent events).
  std::vector<std::string> together(4);
  std::vector<int> events(4, 0);
  std::vector<std::thread> ts;
  for (int s = 0; s < 4; ++s)
    ts.emplace_back([&, s] {
      httplib::Client c("127.0.0.1", srv.port);
      c.set_read_timeout(60, 0);
      const bool stream = s % 2 == 1;
      auto r = c.Post("/v1/completions", request(s, stream), "application/json");
      if (!r || r->status != 200) return;
      if (!stream) {
        together[s] = json::parse(r->body)["choices"][0]["text"];
        return;
      }
      EXPECT_NE(r->get_header_value("Content-Type").find("text/event-stream"), std::string::npos);
      std::string text, finish;
      bool done = false;
      size_t at = 0;
      for (size_t nl; (nl = r->body.find("\n\n", at)) != std::string::npos; at = nl + 2) {
        const std::string ev = r->body.substr(at, nl - at);
        EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
        if (ev == "data: [DONE]") {
          done = true;
          continue;
        }
        EXPECT_FALSE(done) << "an event after [DONE]";
        const json j = json::parse(ev.substr(6));
        text += j["choices"][0]["text"].get<std::string>();
        if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
        ++events[s];
      }
      EXPECT_TRUE(done);
      EXPECT_EQ(finish, "length");
      together[s] = text;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(together, alone);
  EXPECT_EQ(events[1], 12);  // one event per token
  // Bad requests: a JSON error naming the problem, and the server goes on.
  struct Bad {
    std::string path, body;
    int status;
    std::string says;
  };
  for (const Bad& b :
       std::vector<Bad>{{"/v1/completions", "not json", 400, "not JSON"},
                        {"/v1/completions", R"({"prompt":"x","max_tokens":"many"})", 400, "max_tokens"},
                        {"/v1/completions", R"({"prompt":"x","temprature":0.5})", 400, "temprature"},
                        {"/v1/completions", R"({"prompt":[5, 99999999]})", 400, "outside the vocabulary"},
                        {"/v1/completions", R"({"prompt":"x","top_p":2})", 400, "top_p"},
                        {"/v1/completions", R"({"max_tokens":3})", 400, "prompt"},
                        {"/detokenize", R"({"tokens":[1,"a"]})", 400, "tokens"},
                        {"/nowhere", "{}", 404, "no route"},
                        {"/v1/completions", std::string(5000, ' '), 413, "over 4096 bytes"}}) {
    auto r = cli.Post(b.path, b.body, "application/json");
    ASSERT_TRUE(r) << b.path << " " << b.body.substr(0, 40);
    EXPECT_EQ(r->status, b.status) << r->body;
    const json j = json::parse(r->body);
    EXPECT_EQ(j["error"]["code"], b.status);
    EXPECT_NE(j["error"]["message"].get<std::string>().find(b.says), std::string::npos) << r->body;
    EXPECT_TRUE(health());
  }
  // Tokenize and detokenize round trip; the metrics count what was generated.
  auto tk = body_of(cli.Post("/tokenize", R"({"content":"the quick brown fox"})", "application/json"));
  EXPECT_EQ(tk["tokens"].get<std::vector<int32_t>>(), e->encode("the quick brown fox"));
  auto dt = body_of(cli.Post("/detokenize", json{{"tokens", tk["tokens"]}}.dump(), "application/json"));
  EXPECT_EQ(dt["content"], "the quick brown fox");
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("pagegram_generated_tokens_total 96\n"), std::string::npos) << m->body;  // 8 x 12
  EXPECT_NE(m->body.find("pagegram_requests_total 8\n"), std::string::npos) << m->body;
  auto models = body_of(cli.Get("/v1/models"));
  EXPECT_EQ(models["data"][0]["id"], "tiny");
  EXPECT_EQ(models["data"][0]["meta"]["vocab"], e->config().model.vocab);
}

}  // namespace
}  // namespace pg

namespace pg {
namespace {

// Stopping the server ends a request in flight at once: its stream gets an error event and [DONE].
TEST_F(HttpTest, StoppingTheServerEndsTheRequestsInFlight) {
  std::unique_ptr<Engine> e = engine();
  HttpOptions o;
  o.port = 0;
  HttpServer server(*e, o);
  const int port = server.bind();
  std::thread t([&] { server.run(); });
  std::string body;
  std::thread c([&] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(60, 0);
    auto r = cli.Post("/v1/completions",
                      R"({"prompt":"the quick brown fox","max_tokens":1000000,"ignore_eos":true,"stream":true})",
                      "application/json");
    if (r) body = r->body;
  });
  httplib::Client cli("127.0.0.1", port);
  for (int i = 0; i < 2000; ++i) {  // until the completion is decoding
    auto m = cli.Get("/metrics");
    if (m && m->body.find("pagegram_requests_running 1\n") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  server.stop();
  c.join();
  t.join();
  EXPECT_NE(body.find("the server is stopping"), std::string::npos) << body.substr(0, 300);
  EXPECT_NE(body.find("data: [DONE]"), std::string::npos);
}

}  // namespace
}  // namespace pg
