// `pagegram serve --http PORT`: an HTTP server over one engine (docs/serving.md, "HTTP API").
//
//   POST /v1/completions   OpenAI-style completion; "stream": true answers with server-sent events
//   POST /tokenize         {"content": text}      -> {"tokens": [ids]}
//   POST /detokenize       {"tokens": [ids]}      -> {"content": text}
//   GET  /health           {"status": "ok"}
//   GET  /metrics          Prometheus text: requests, tokens, tokens/s, table reads and bytes per token, cache hits
//   GET  /v1/models        the one model served
//
// Concurrent requests are decoded together (Completions: continuous batching over the engine's sessions). A bad
// request gets a JSON error {"error": {"message", "type", "code"}} with status 400 (404 an unknown path or method, 413
// a body over the bound, refused from its Content-Length without keeping it, 500 a failed table read), and the server
// goes on.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "infer/engine.h"

namespace pg {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (bind() says which)
  int64_t max_active = 64;  // completions decoded together; more wait
  int64_t connections = 0;  // connection threads (0: max_active + 8: every decoding stream holds one)
  int64_t max_request_bytes = int64_t{1} << 20;
  std::string model_name = "pagegram";  // the "model" of replies and /v1/models
  uint64_t seed = 0;  // a request without "seed" samples with (seed + its request number)
};

class HttpServer {
 public:
  HttpServer(Engine& e, HttpOptions o);
  ~HttpServer();
  // Binds the address; returns the port. UserError when the address cannot be bound.
  int bind();
  // Serves until stop() (from another thread or a signal handler's thread).
  void run();
  void stop();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace pg
