#!/usr/bin/python3
"""Assembly stage: part files -> ROOT/text/<group>.<lang>.txt + ROOT/manifest.json.

  /usr/bin/python3 assemble.py --root ROOT [--quick] [--stage-seconds download=S,unpack=S,extract=S]

Reads ROOT/parts/<source>/<group>.<lang>.txt in the order of sources.py, removes exact
duplicate documents across the whole corpus (first occurrence wins), and writes every
output file under a temporary name that is renamed when complete. manifest.json is
written last. Standard library only.
"""
import argparse
import datetime
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sources as S  # noqa: E402

RS = "\x1e"
SEP = b"\n\x1e\n"
NAME = re.compile(r"^([a-z0-9_-]+)\.(en|zh|de|ja|ru|code|math)\.txt$")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--stage-seconds", default="")
    a = ap.parse_args()
    root = a.root
    t0 = time.time()
    text_dir = os.path.join(root, "text")
    os.makedirs(text_dir, exist_ok=True)
    for f in os.listdir(text_dir):            # leftovers of a killed run
        if ".tmp" in f:
            os.remove(os.path.join(text_dir, f))

    seen = set()
    outs = {}          # "group.lang" -> dict(fh, docs, bytes, packages, sources)
    dups = 0
    missing = []
    for src in S.sources(a.quick):
        pdir = os.path.join(root, "parts", src["name"])
        done = os.path.join(pdir, "DONE")
        if not os.path.exists(done):
            missing.append(src["name"])
            continue
        with open(done) as f:
            info = json.load(f)
        for fn in sorted(info["files"]):
            group, lang = fn.split(".")
            with open(os.path.join(pdir, fn + ".txt"), "rb") as f:
                data = f.read()
            docs = data.split(SEP)
            if docs and docs[-1] == b"":
                docs.pop()
            o = outs.get(fn)
            if o is None:
                tmp = os.path.join(text_dir, "%s.txt.tmp.%d" % (fn, os.getpid()))
                o = outs[fn] = dict(fh=open(tmp, "wb"), tmp=tmp, docs=0, bytes=0, group=group,
                                    lang=lang, packages=[], sources=[],
                                    digest=hashlib.blake2b(digest_size=16))
            o["sources"].append(src["name"])
            for p in info["packages"]:
                if p not in o["packages"]:
                    o["packages"].append(p)
            buf = []
            for d in docs:
                if not d.strip() or b"\x00" in d or b"\x1e" in d:
                    continue
                h = hashlib.blake2b(d, digest_size=16).digest()
                if h in seen:
                    dups += 1
                    continue
                seen.add(h)
                buf.append(d)
                buf.append(SEP)
                o["docs"] += 1
                o["bytes"] += len(d) + len(SEP)
            chunk = b"".join(buf)
            o["fh"].write(chunk)
            o["digest"].update(chunk)

    for o in outs.values():
        o["fh"].close()
        if o["docs"] == 0:
            os.remove(o["tmp"])
    live = sorted(fn for fn in outs if outs[fn]["docs"])
    content = hashlib.blake2b(digest_size=16)
    for fn in live:
        content.update(("%s %s %d %d\n" % (fn, outs[fn]["digest"].hexdigest(), outs[fn]["docs"],
                                           outs[fn]["bytes"])).encode())
    content_hash = content.hexdigest()
    # Same text as the manifest on disk describes: keep both untouched, so that everything
    # keyed on the manifest's bytes (tokenizers, token stores) stays valid.
    mpath = os.path.join(root, "manifest.json")
    try:
        with open(mpath) as f:
            old = json.load(f)
    except (OSError, ValueError):
        old = None
    if (old and old.get("content_hash") == content_hash
            and all(os.path.exists(os.path.join(text_dir, fn + ".txt")) for fn in live)):
        for fn in live:
            os.remove(outs[fn]["tmp"])
        print("[assemble %.0fs] text unchanged (%d files, %d docs, %.1f MB); manifest.json of %s kept"
              % (time.time() - t0, len(live), old["total_docs"], old["total_bytes"] / 1e6,
                 old.get("created")), file=sys.stderr)
        return 0

    manifest_sources = []
    by_lang, by_group = {}, {}
    final = set()
    for fn in live:
        o = outs[fn]
        name = fn + ".txt"
        os.replace(o["tmp"], os.path.join(text_dir, name))
        final.add(name)
        manifest_sources.append(dict(file=name, group=o["group"], lang=o["lang"],
                                     packages=o["packages"], sources=o["sources"],
                                     docs=o["docs"], bytes=o["bytes"]))
        by_lang[o["lang"]] = by_lang.get(o["lang"], 0) + o["bytes"]
        by_group[o["group"]] = by_group.get(o["group"], 0) + o["bytes"]
    for f in os.listdir(text_dir):            # files of an older recipe
        if NAME.match(f) and f not in final:
            os.remove(os.path.join(text_dir, f))

    stages = {}
    for kv in a.stage_seconds.split(","):
        if "=" in kv:
            k, v = kv.split("=", 1)
            stages[k] = float(v)
    stages["assemble"] = round(time.time() - t0, 1)
    manifest = {
        "version": 1,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "quick": bool(a.quick),
        "format": "UTF-8 NFC text; each document followed by the line \\x1e (bytes 0a 1e 0a)",
        "sources": manifest_sources,
        "bytes_by_lang": dict(sorted(by_lang.items(), key=lambda kv: -kv[1])),
        "bytes_by_group": dict(sorted(by_group.items(), key=lambda kv: -kv[1])),
        "total_bytes": sum(by_lang.values()),
        "total_docs": sum(s["docs"] for s in manifest_sources),
        "duplicates_removed": dups,
        "content_hash": content_hash,
        "missing_sources": missing,
        "stage_seconds": stages,
    }
    tmp = mpath + ".tmp"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, mpath)
    print("[assemble %.0fs] %d files, %d docs, %.1f MB (%d duplicates removed)%s" % (
        time.time() - t0, len(manifest_sources), manifest["total_docs"],
        manifest["total_bytes"] / 1e6, dups,
        ("; missing optional sources: " + ",".join(missing)) if missing else ""),
        file=sys.stderr)
    print("[assemble] by lang: " + ", ".join("%s %.1f MB" % (k, v / 1e6)
                                             for k, v in manifest["bytes_by_lang"].items()),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
