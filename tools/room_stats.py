#!/usr/bin/python3
"""Lines per room (folder) and the largest function of each room, for the house's closing figures.

    tools/room_stats.py [REPO_DIR]

Counts lines of .h/.cpp/.inc files per top-level folder. Functions are found by a brace-depth heuristic: a '{' that
opens depth 1 inside a namespace-or-file scope on a line (or the line before) holding a '(' starts a function, which
ends when its depth closes; class bodies are entered, so member functions defined inside classes count too.
"""
import os
import re
import sys

ROOMS = ["core", "kernels", "data", "memory", "model", "train", "storage", "sweep", "infer", "eval", "cli", "tests", "bench"]
SCOPE = re.compile(r"^\s*(namespace\b|(template\s*<[^>]*>\s*)?(class|struct|union|enum)\b|extern\s+\"C\")")


def functions(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    lines = text.split("\n")
    out, stack = [], []  # stack of ("scope"|"func"|"block", start line, name)
    prev = ""
    for i, line in enumerate(lines):
        for ch in line:
            if ch == "{":
                in_func = any(k == "func" for k, _, _ in stack)
                head = (prev + " " + line.split("{")[0]).strip()
                if in_func:
                    stack.append(("block", i, ""))
                elif SCOPE.match(line) or SCOPE.match(prev) and "(" not in line:
                    stack.append(("scope", i, ""))
                elif "(" in head and not head.rstrip().endswith("="):
                    name = re.findall(r"([~\w:]+)\s*\(", head)
                    stack.append(("func", i, name[0] if name else "?"))
                else:
                    stack.append(("block", i, ""))
            elif ch == "}" and stack:
                kind, start, name = stack.pop()
                if kind == "func" and not any(k == "func" for k, _, _ in stack):
                    out.append((i - start + 1, name, start + 1))
        if line.strip():
            prev = line
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    print("| room | files | lines | largest function (lines) |\n|---|---:|---:|---|")
    total = 0
    for room in ROOMS:
        d = os.path.join(root, room)
        if not os.path.isdir(d):
            continue
        n_lines, n_files, best = 0, 0, (0, "", "", 0)
        for dp, _, fs in os.walk(d):
            for f in fs:
                if not f.endswith((".h", ".cpp", ".inc")):
                    continue
                p = os.path.join(dp, f)
                n_files += 1
                n_lines += sum(1 for _ in open(p, encoding="utf-8", errors="replace"))
                for length, name, line in functions(p):
                    if length > best[0]:
                        best = (length, name, os.path.relpath(p, root), line)
        total += n_lines
        print(f"| `{room}/` | {n_files} | {n_lines:,} | `{best[1]}` {best[2]}:{best[3]} ({best[0]}) |")
    print(f"| total | | {total:,} | |")


if __name__ == "__main__":
    main()
