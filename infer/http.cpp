// Implementation of infer/http.h: cpp-httplib for the protocol, nlohmann-json for the bodies.
#include "infer/http.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/text.h"
#include "infer/completion.h"

namespace pg {

using json = nlohmann::ordered_json;  // keys in the order written: "id" first, top logprobs most probable first

namespace {

// Text out of the model may hold bytes that are not UTF-8 (a byte piece alone): they are replaced, not refused.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_error(httplib::Response& res, int status, const std::string& message) {
  const char* type = status == 404   ? "not_found_error"
                     : status == 405 ? "method_not_allowed"
                     : status == 413 ? "request_too_large"
                     : status >= 500 ? "server_error"
                                     : "invalid_request_error";
  res.status = status;
  res.set_content(dump({{"error", {{"message", message}, {"type", type}, {"code", status}}}}) + "\n",
                  "application/json");
}

json parse_body(const httplib::Request& req) {
  try {
    json b = json::parse(req.body);
    if (!b.is_object()) throw UserError("the request body must be a JSON object");
    return b;
  } catch (const json::parse_error& e) {
    throw UserError(str("the request body is not JSON (at byte ", e.byte, ")"));
  }
}

// Typed fields of a request body, each error naming its key.
struct Fields {
  const json& b;
  bool has(const char* k) const { return b.contains(k) && !b.at(k).is_null(); }
  int64_t integer(const char* k, int64_t def) const {
    if (!has(k)) return def;
    const json& v = b.at(k);
    if (!v.is_number_integer()) throw UserError(str("'", k, "': expected an integer, got ", dump(v)));
    return v.get<int64_t>();
  }
  double number(const char* k, double def) const {
    if (!has(k)) return def;
    const json& v = b.at(k);
    if (!v.is_number()) throw UserError(str("'", k, "': expected a number, got ", dump(v)));
    return v.get<double>();
  }
  bool boolean(const char* k, bool def) const {
    if (!has(k)) return def;
    const json& v = b.at(k);
    if (!v.is_boolean()) throw UserError(str("'", k, "': expected true or false, got ", dump(v)));
    return v.get<bool>();
  }
  // Keys a request may hold; others are refused (a misspelt option must not be silently ignored).
  void only(std::initializer_list<const char*> keys) const {
    for (auto it = b.begin(); it != b.end(); ++it) {
      bool ok = false;
      for (const char* k : keys) ok = ok || it.key() == k;
      if (!ok) {
        std::string list;
        for (const char* k : keys) list += str(list.empty() ? "" : ", ", k);
        throw UserError(str("unknown key '", it.key(), "' (expected: ", list, ")"));
      }
    }
  }
};

std::vector<int32_t> token_list(const json& v, const char* key) {
  std::vector<int32_t> ids;
  for (const json& t : v) {
    if (!t.is_number_integer()) throw UserError(str("'", key, "': expected token ids, got ", dump(t)));
    const int64_t x = t.get<int64_t>();
    if (x < 0 || x > INT32_MAX) throw UserError(str("'", key, "': token id ", x, " out of range"));
    ids.push_back(static_cast<int32_t>(x));
  }
  return ids;
}

struct CompletionRequest {
  CompletionParams p;
  bool stream = false;
};

CompletionRequest parse_completion(const json& b, const Engine& e, uint64_t default_seed) {
  const Fields f{b};
  f.only({"prompt",
          "max_tokens",
          "temperature",
          "top_k",
          "top_p",
          "min_p",
          "repetition_penalty",
          "repeat_last_n",
          "seed",
          "stop",
          "stream",
          "logprobs",
          "ignore_eos",
          "model",
          "user",
          "n",
          "echo",
          "best_of",
          "presence_penalty",
          "frequency_penalty",
          "stream_options"});
  CompletionRequest r;
  if (!f.has("prompt")) throw UserError("'prompt': missing (a string, or a list of token ids)");
  const json& pr = b.at("prompt");
  if (pr.is_string()) {
    r.p.prompt = e.encode(pr.get<std::string>());
  } else if (pr.is_array() && pr.size() == 1 && pr[0].is_string()) {
    r.p.prompt = e.encode(pr[0].get<std::string>());
  } else if (pr.is_array() && (pr.empty() || pr[0].is_number_integer())) {
    r.p.prompt = token_list(pr, "prompt");
  } else {
    throw UserError(
        "'prompt': expected a string, a list of one string, or a list of token ids (one prompt per "
        "request)");
  }
  r.p.max_tokens = f.integer("max_tokens", 16);
  SamplingOptions& s = r.p.sampling;
  s.temperature = f.number("temperature", 1.0);
  s.top_k = f.integer("top_k", 0);
  s.top_p = f.number("top_p", 1.0);
  s.min_p = f.number("min_p", 0.0);
  s.repetition_penalty = f.number("repetition_penalty", 1.0);
  s.repeat_last_n = f.integer("repeat_last_n", 64);
  s.seed = f.has("seed") ? static_cast<uint64_t>(f.integer("seed", 0)) : default_seed;
  s.logprobs = f.integer("logprobs", -1);
  if (f.has("stop")) {
    const json& st = b.at("stop");
    if (st.is_string()) {
      r.p.stop = {st.get<std::string>()};
    } else if (st.is_array()) {
      for (const json& x : st) {
        if (!x.is_string()) throw UserError(str("'stop': expected strings, got ", dump(x)));
        r.p.stop.push_back(x.get<std::string>());
      }
    } else {
      throw UserError("'stop': expected a string or a list of strings");
    }
  }
  r.stream = f.boolean("stream", false);
  r.p.ignore_eos = f.boolean("ignore_eos", false);
  // OpenAI's keys that this server takes only at their neutral value
  if (f.integer("n", 1) != 1 || f.integer("best_of", 1) != 1) throw UserError("'n', 'best_of': only 1 is served");
  if (f.boolean("echo", false)) throw UserError("'echo': not served (the reply holds the completion only)");
  if (f.number("presence_penalty", 0) != 0 || f.number("frequency_penalty", 0) != 0)
    throw UserError("'presence_penalty', 'frequency_penalty': not served (hint: repetition_penalty)");
  return r;
}

}  // namespace

struct HttpServer::Impl {
  Engine& e;
  HttpOptions o;
  Completions comp;
  httplib::Server svr;
  std::vector<std::string> pieces;
  std::atomic<int64_t> next_request{0};
  std::atomic<int64_t> http_errors{0};
  std::atomic<int64_t> streaming{0};  // event streams not yet finished (stop() lets them write their last events)
  int port = -1;

  Impl(Engine& engine, HttpOptions opt) : e(engine), o(std::move(opt)), comp(engine, o.max_active) {
    if (e.tokenizer()) pieces = e.tokenizer()->pieces();
    routes();
  }

  std::string piece(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < pieces.size() ? pieces[static_cast<size_t>(id)] : str(id);
  }

  json logprobs_json(const std::vector<TokenLogprobs>& lps) const {
    json tokens = json::array(), lp = json::array(), top = json::array();
    for (const TokenLogprobs& t : lps) {
      tokens.push_back(piece(t.token));
      lp.push_back(t.logprob);
      json alt = json::object();
      for (const auto& [id, l] : t.top) alt[piece(id)] = l;
      top.push_back(alt);
    }
    return {{"tokens", tokens}, {"token_logprobs", lp}, {"top_logprobs", top}};
  }

  json envelope(const std::string& id, int64_t created) const {
    return {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", o.model_name}};
  }

  static json usage(const CompletionChunk& c) {
    return {{"prompt_tokens", c.prompt_tokens},
            {"completion_tokens", c.completion_tokens},
            {"total_tokens", c.prompt_tokens + c.completion_tokens}};
  }

  void completions(const httplib::Request& req, httplib::Response& res) {
    const int64_t n = next_request++;
    CompletionRequest r = parse_completion(parse_body(req), e, o.seed + static_cast<uint64_t>(n));
    const bool want_logprobs = r.p.sampling.logprobs >= 0;
    const uint64_t seed = r.p.sampling.seed;
    if (r.stream) ++streaming;  // before the job can run: stop() waits for its stream from here on
    std::shared_ptr<Completions::Job> job;
    try {
      job = comp.submit(std::move(r.p));
    } catch (...) {
      if (r.stream) --streaming;
      throw;
    }
    const std::string id = str("cmpl-", n);
    const int64_t created =
        std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
    if (!r.stream) {
      std::string text;
      std::vector<TokenLogprobs> lps;
      CompletionChunk c, last;
      while (comp.next(*job, c)) {
        text += c.text;
        lps.insert(lps.end(), c.logprobs.begin(), c.logprobs.end());
        last = std::move(c);
      }
      if (last.finish == "error") return send_error(res, 500, last.error);
      json out = envelope(id, created);
      out["choices"] = json::array({{{"index", 0},
                                     {"text", text},
                                     {"finish_reason", last.finish},
                                     {"logprobs", want_logprobs ? logprobs_json(lps) : json(nullptr)}}});
      out["usage"] = usage(last);
      out["seed"] = seed;
      res.set_content(dump(out) + "\n", "application/json");
      return;
    }
    // Server-sent events: one event per decode step, the last with its finish reason and the usage, then [DONE].
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, job, id, created, want_logprobs, seed](size_t, httplib::DataSink& sink) {
          CompletionChunk c;
          if (!comp.next(*job, c)) {
            const std::string done = "data: [DONE]\n\n";
            sink.write(done.data(), done.size());
            sink.done();
            return true;
          }
          json ev;
          if (c.finish == "error") {
            ev = {{"error", {{"message", c.error}, {"type", "server_error"}, {"code", 500}}}};
          } else {
            ev = envelope(id, created);
            ev["choices"] = json::array({{{"index", 0},
                                          {"text", c.text},
                                          {"finish_reason", c.finish.empty() ? json(nullptr) : json(c.finish)},
                                          {"logprobs", want_logprobs ? logprobs_json(c.logprobs) : json(nullptr)}}});
            if (!c.finish.empty()) {
              ev["usage"] = usage(c);
              ev["seed"] = seed;
            }
          }
          const std::string line = "data: " + dump(ev) + "\n\n";
          if (!sink.write(line.data(), line.size())) {
            comp.cancel(*job);  // the client went away
            return false;
          }
          return true;
        },
        [this, job](bool success) {
          if (!success) comp.cancel(*job);
          --streaming;
        });
  }

  std::string metrics() const {
    const CompletionsStats s = comp.stats();
    std::ostringstream m;
    auto put = [&](const char* name, const char* type, const char* help, double v) {
      m << "# HELP pagegram_" << name << " " << help << "\n# TYPE pagegram_" << name << " " << type << "\npagegram_"
        << name << " " << v << "\n";
    };
    const EngineStats& es = s.engine;
    put("requests_total", "counter", "Completion requests accepted.", static_cast<double>(s.requests));
    put("requests_running", "gauge", "Completions decoding now.", static_cast<double>(s.running));
    put("requests_waiting", "gauge", "Completions waiting for a place.", static_cast<double>(s.waiting));
    put("requests_errors_total", "counter", "Completions ended by an error.", static_cast<double>(s.errors));
    put("requests_cancelled_total", "counter", "Completions whose client went away.", static_cast<double>(s.cancelled));
    put("http_errors_total", "counter", "Requests answered with an error status.", static_cast<double>(http_errors));
    put("prompt_tokens_total", "counter", "Prompt tokens run (prefill).", static_cast<double>(es.prefill_tokens));
    put("generated_tokens_total", "counter", "Tokens generated.", static_cast<double>(es.decode_tokens));
    put("decode_steps_total", "counter", "Batched decode steps.", static_cast<double>(s.steps));
    put("prefill_seconds_total", "counter", "Time in prefill.", es.prefill_seconds);
    put("decode_seconds_total", "counter", "Time in decode steps.", es.decode_seconds);
    put("decode_tokens_per_second", "gauge", "Generated tokens per second of decode time.",
        es.decode_seconds > 0 ? static_cast<double>(es.decode_tokens) / es.decode_seconds : 0);
    put("memory_wait_seconds_total", "counter", "Time the forward waited for table fetches.", es.memory_wait_seconds);
    put("fetch_seconds_total", "counter", "Time of the table fetches (plan, reads, decoding the rows).",
        es.fetch_seconds);
    if (s.has_table) {
      const TableReadStats& t = s.table;
      put("table_positions_total", "counter", "Token positions looked up in the table.",
          static_cast<double>(t.positions));
      put("table_block_accesses_total", "counter", "Distinct 4 KiB blocks wanted, summed over positions.",
          static_cast<double>(t.block_accesses));
      put("table_device_reads_total", "counter", "4 KiB blocks read from the device.",
          static_cast<double>(t.device_reads));
      put("table_cache_hits_total", "counter", "Blocks wanted that did not need a device read.",
          static_cast<double>(std::max<int64_t>(0, t.block_accesses - t.device_reads)));
      put("table_device_bytes_total", "counter", "Bytes the device read for table fetches (-1: unknown).",
          static_cast<double>(t.device_bytes));
      put("table_reads_per_token", "gauge", "Device block reads per token position.", t.reads_per_position());
      put("table_bytes_per_token", "gauge", "Device bytes per token position.", t.bytes_per_position());
      put("table_io_seconds_total", "counter", "Time spent reading the table.", t.io_seconds);
    }
    return m.str();
  }

  // A handler's UserError is the client's fault (400); anything else is ours (500).
  template <class F>
  httplib::Server::Handler guarded(F f) {
    return [this, f](const httplib::Request& req, httplib::Response& res) {
      try {
        f(req, res);
      } catch (const UserError& err) {
        send_error(res, 400, err.what());
      } catch (const std::exception& err) {
        send_error(res, 500, err.what());
      }
    };
  }

  void routes() {
    svr.set_payload_max_length(static_cast<size_t>(o.max_request_bytes));
    const size_t threads = static_cast<size_t>(o.connections > 0 ? o.connections : o.max_active + 8);
    svr.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    svr.Post("/v1/completions", guarded([this](const auto& req, auto& res) { completions(req, res); }));
    svr.Post("/tokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
               const json b = parse_body(req);
               Fields{b}.only({"content"});
               if (!b.contains("content") || !b.at("content").is_string())
                 throw UserError("'content': expected the text to tokenize");
               const std::vector<int32_t> ids = e.encode(b.at("content").get<std::string>());
               res.set_content(dump({{"tokens", ids}}) + "\n", "application/json");
             }));
    svr.Post("/detokenize", guarded([this](const httplib::Request& req, httplib::Response& res) {
               const json b = parse_body(req);
               Fields{b}.only({"tokens"});
               if (!b.contains("tokens") || !b.at("tokens").is_array())
                 throw UserError("'tokens': expected a list of ids");
               const std::vector<int32_t> ids = token_list(b.at("tokens"), "tokens");
               const int64_t V = e.config().model.vocab;
               for (int32_t t : ids)
                 if (t >= V) throw UserError(str("'tokens': id ", t, " outside the vocabulary 0..", V - 1));
               res.set_content(dump({{"content", e.decode(ids)}}) + "\n", "application/json");
             }));
    svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("{\"status\":\"ok\"}\n", "application/json");
    });
    svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics(), "text/plain; version=0.0.4");
    });
    svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      const ExperimentConfig& c = e.config();
      const json meta = {
          {"vocab", c.model.vocab},           {"context", c.model.context},
          {"d_model", c.model.d_model},       {"layers", c.model.layers},
          {"memory_layout", c.memory.layout}, {"table", e.source() ? e.source()->describe() : std::string("ram")}};
      const json model = {{"id", o.model_name}, {"object", "model"}, {"owned_by", "pagegram"}, {"meta", meta}};
      res.set_content(dump({{"object", "list"}, {"data", json::array({model})}}) + "\n", "application/json");
    });
    // Statuses httplib sets by itself (404 no route, 413 too large, 400 unreadable request) get a JSON body too.
    svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      ++http_errors;
      if (!res.body.empty()) return;
      const char* routes = " (hint: GET /health, /metrics, /v1/models; POST /v1/completions, /tokenize, /detokenize)";
      if (res.status == 413) send_error(res, 413, str("request body over ", o.max_request_bytes, " bytes"));
      else if (res.status == 404 || res.status == 400)
        send_error(res, 404, str("no route ", req.method, " ", req.path, routes));
      else send_error(res, res.status, str("HTTP status ", res.status));
    });
  }
};

HttpServer::HttpServer(Engine& e, HttpOptions o) : impl_(std::make_unique<Impl>(e, std::move(o))) {}
HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
  Impl& m = *impl_;
  if (m.o.port < 0 || m.o.port > 65535) throw UserError(str("--http ", m.o.port, ": expected a port 0..65535"));
  m.port = m.o.port == 0 ? m.svr.bind_to_any_port(m.o.host) : (m.svr.bind_to_port(m.o.host, m.o.port) ? m.o.port : -1);
  if (m.port < 0)
    throw UserError(str("--http ", m.o.port, ": cannot listen on ", m.o.host, ":", m.o.port,
                        " (hint: the port is in use, or --host is not an address of this machine)"));
  return m.port;
}

void HttpServer::run() {
  if (impl_->port < 0) bind();
  impl_->svr.listen_after_bind();
}

void HttpServer::stop() {
  if (!impl_) return;
  // The requests in flight end at once with an error; their event streams get to write it (httplib stops writing a
  // stream once the listener is closed), for at most 2 s; then the listener closes.
  impl_->comp.stop();
  for (int i = 0; i < 2000 && impl_->streaming > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl_->svr.stop();
}

}  // namespace pg
