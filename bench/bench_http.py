#!/usr/bin/env python3
"""HTTP load on `pagegram serve --http`: N streaming clients at once, time to first token and tokens/s per client.

    bench/bench_http.py --url http://127.0.0.1:8080 --clients 64 --max-tokens 64 --prompt-tokens 64

Each client sends one streaming /v1/completions request (a prompt of random token ids, its own seed, end of document
ignored so every client generates --max-tokens) and reads the server-sent events as they come. Printed: time to first
token (p50 / p90 / max), tokens/s per client after its first token (p50 / min), the aggregate (all tokens over the
wall time from the first request to the last reply), and the server's own decode tokens/s and table reads per token
over the run (from /metrics). bench/bench_http.sh runs it beside `bench generate` on the same model and source.
Standard library only (http.client, threads): nothing to install.
"""
import argparse
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse


def metrics(host, port):
    c = http.client.HTTPConnection(host, port, timeout=60)
    c.request("GET", "/metrics")
    r = c.getresponse()
    body = r.read().decode()
    c.close()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            k, v = line.split()
            out[k] = float(v)
    return out


def client(host, port, body, res, i, start_barrier):
    start_barrier.wait()
    t0 = time.perf_counter()
    first = None
    tokens = 0
    err = None
    try:
        c = http.client.HTTPConnection(host, port, timeout=600)
        c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            err = f"HTTP {r.status}: {r.read()[:200]!r}"
        else:
            while True:
                line = r.readline()
                if not line:
                    break
                line = line.strip()
                if not line.startswith(b"data: "):
                    continue
                data = line[6:]
                if data == b"[DONE]":
                    break
                ev = json.loads(data)
                if "error" in ev:
                    err = ev["error"]["message"]
                    break
                if first is None:
                    first = time.perf_counter()
                tokens += 1  # one event per decode step
        c.close()
    except Exception as e:  # noqa: BLE001 - reported per client
        err = str(e)
    res[i] = {"t0": t0, "first": first, "end": time.perf_counter(), "tokens": tokens, "error": err}


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--prompt-tokens", type=int, default=64)
    ap.add_argument("--vocab", type=int, default=0, help="prompt ids are drawn below this (default: the model's)")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port or 80
    if a.vocab <= 0:
        c = http.client.HTTPConnection(host, port, timeout=60)
        c.request("GET", "/v1/models")
        a.vocab = json.loads(c.getresponse().read())["data"][0]["meta"]["vocab"]
        c.close()
    rng = random.Random(a.seed)
    before = metrics(host, port)
    res = [None] * a.clients
    barrier = threading.Barrier(a.clients)
    threads = []
    for i in range(a.clients):
        body = {"prompt": [rng.randrange(3, a.vocab) for _ in range(a.prompt_tokens)], "max_tokens": a.max_tokens,
                "temperature": 1.0, "seed": a.seed + i, "ignore_eos": True, "stream": True}
        t = threading.Thread(target=client, args=(host, port, body, res, i, barrier))
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    after = metrics(host, port)
    errors = [r["error"] for r in res if r["error"]]
    if errors:
        print(f"bench_http: {len(errors)} of {a.clients} clients failed, e.g. {errors[0]}", file=sys.stderr)
        sys.exit(1)
    ttft = [r["first"] - r["t0"] for r in res]
    per = [(r["tokens"] - 1) / (r["end"] - r["first"]) for r in res if r["tokens"] > 1 and r["end"] > r["first"]]
    total = sum(r["tokens"] for r in res)
    wall = max(r["end"] for r in res) - min(r["t0"] for r in res)
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    dec = d.get("pagegram_generated_tokens_total", 0) / max(d.get("pagegram_decode_seconds_total", 0), 1e-9)
    pos = d.get("pagegram_table_positions_total", 0)
    reads = d.get("pagegram_table_device_reads_total", 0) / pos if pos else 0.0
    print(f"clients {a.clients}, prompt {a.prompt_tokens} tokens, {a.max_tokens} generated each ({total} tokens)")
    print(f"time to first token s: p50 {pct(ttft, 0.5):.3f}, p90 {pct(ttft, 0.9):.3f}, max {max(ttft):.3f}")
    print(f"tok/s per client after its first token: p50 {pct(per, 0.5):.1f}, min {min(per):.1f}")
    print(f"aggregate: {total / wall:.1f} tok/s over {wall:.2f} s wall (prefill and HTTP included)")
    print(f"server decode: {dec:.1f} tok/s over {d.get('pagegram_decode_seconds_total', 0):.2f} s of decode steps "
          f"({d.get('pagegram_decode_steps_total', 0):.0f} steps), table device reads per token {reads:.2f}")
    print(json.dumps({"clients": a.clients, "ttft_p50": pct(ttft, 0.5), "ttft_max": max(ttft),
                      "client_tok_s_p50": pct(per, 0.5), "aggregate_tok_s": total / wall,
                      "server_decode_tok_s": dec, "reads_per_token": reads}))


if __name__ == "__main__":
    main()
