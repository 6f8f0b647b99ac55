#!/usr/bin/python3
"""Check a built corpus against the format of data/corpus/README.md.

  /usr/bin/python3 data/corpus/check_corpus.py ROOT      (ROOT = CACHE/corpus or CACHE/corpus-quick)

Checks: DONE + manifest.json present; every text/<group>.<lang>.txt is valid UTF-8, NFC,
ends with "\\n\\x1e\\n", has no NUL, no empty document, no duplicate document, and matches
the manifest's docs/bytes. Prints one line per file; exit 1 on the first kind of failure.
"""
import hashlib
import json
import os
import re
import sys
import unicodedata

SEP = b"\n\x1e\n"
NAME = re.compile(r"^([a-z0-9_-]+)\.(en|zh|de|ja|ru|code|math)\.txt$")


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check_corpus.py ROOT")
    root = sys.argv[1]
    errors = []
    if not os.path.exists(os.path.join(root, "DONE")):
        errors.append("DONE missing")
    with open(os.path.join(root, "manifest.json")) as f:
        man = json.load(f)
    listed = {s["file"]: s for s in man["sources"]}
    files = sorted(f for f in os.listdir(os.path.join(root, "text")))
    seen = set()
    total_docs = total_bytes = 0
    for fn in files:
        if not NAME.match(fn):
            errors.append("%s: unexpected file name" % fn)
            continue
        with open(os.path.join(root, "text", fn), "rb") as f:
            data = f.read()
        errs = []
        if not data.endswith(SEP):
            errs.append("does not end with \\n\\x1e\\n")
        if b"\x00" in data:
            errs.append("NUL byte")
        try:
            text = data.decode("utf-8")
            if not unicodedata.is_normalized("NFC", text):
                errs.append("not NFC")
        except UnicodeDecodeError as e:
            errs.append("invalid UTF-8 at %d" % e.start)
        docs = data.split(SEP)
        if docs and docs[-1] == b"":
            docs.pop()
        for d in docs:
            if not d.strip():
                errs.append("empty document")
                break
            if b"\x1e" in d:
                errs.append("0x1E inside a document")
                break
            h = hashlib.blake2b(d, digest_size=16).digest()
            if h in seen:
                errs.append("duplicate document")
                break
            seen.add(h)
        m = listed.get(fn)
        if m is None:
            errs.append("not in manifest")
        elif m["docs"] != len(docs) or m["bytes"] != len(data):
            errs.append("manifest says %d docs/%d bytes, file has %d/%d"
                        % (m["docs"], m["bytes"], len(docs), len(data)))
        total_docs += len(docs)
        total_bytes += len(data)
        print("%-26s %8d docs %10d bytes %s" % (fn, len(docs), len(data), "; ".join(errs) or "ok"))
        errors += ["%s: %s" % (fn, e) for e in errs]
    for fn in listed:
        if fn not in files:
            errors.append("%s: in manifest but missing" % fn)
    if man["total_docs"] != total_docs or man["total_bytes"] != total_bytes:
        errors.append("manifest totals differ from files")
    print("total: %d docs, %d bytes" % (total_docs, total_bytes))
    if errors:
        print("FAILED: " + "; ".join(errors[:10]), file=sys.stderr)
        return 1
    print("corpus OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
