#!/usr/bin/env python3
"""Fails when the server's top-level modules import each other in a cycle (issue 30: the rooms
depend one way). Reads `crate::<module>` paths and `use crate::{a, b}` lists in every source file
of server/src; an edge a -> b means a file under module a names module b. Prints the strongly
connected components of more than one module, with one file per edge as evidence.

The rooms were untangled one cycle at a time (issue 30) with this check as a ratchet; they now
depend one way, so ALLOWED_IN_CYCLES is 0 and any cycle fails. A module that needs a type of a
module above it takes the type down (the store owns the shapes it stores) or the code up (a
route's handler lives in api/, not in the service it calls).

Usage: scripts/check-module-cycles.py [--graph]   (--graph: print every edge too)
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server", "src")
# Modules inside cycles (never raise it).
ALLOWED_IN_CYCLES = 0
PATH = re.compile(r"\bcrate::([a-z_][a-z0-9_]*)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}", re.S)


def top_module(path):
    rel = os.path.relpath(path, ROOT)
    first = rel.split(os.sep)[0]
    return first[:-3] if first.endswith(".rs") else first


def edges():
    found = {}
    for directory, _, files in os.walk(ROOT):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(directory, name)
            source = top_module(path)
            if source in ("lib", "main"):
                continue
            text = open(path, encoding="utf-8").read()
            # Tests inside a module may reach anywhere: only the module's own code counts.
            text = re.split(r"#\[cfg\(test\)\]\s*mod tests", text)[0]
            text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
            targets = set(PATH.findall(text))
            for group in GROUP.findall(text):
                targets.update(re.findall(r"(?:^|,)\s*([a-z_][a-z0-9_]*)", group))
            for target in targets:
                is_module = os.path.isdir(os.path.join(ROOT, target)) or os.path.exists(os.path.join(ROOT, target + ".rs"))
                if target != source and is_module:
                    found.setdefault((source, target), os.path.relpath(path, ROOT))
    return found


def components(nodes, graph):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                on.discard(w)
                part.append(w)
                if w == v:
                    break
            out.append(sorted(part))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    found = edges()
    graph, nodes = {}, set()
    for (a, b) in found:
        graph.setdefault(a, set()).add(b)
        nodes.update((a, b))
    if "--graph" in sys.argv:
        for (a, b), where in sorted(found.items()):
            print(f"{a} -> {b}   ({where})")
    cycles = [c for c in components(nodes, graph) if len(c) > 1]
    in_cycles = sum(len(c) for c in cycles)
    print(f"server modules: {len(nodes)} modules, {len(found)} edges, {in_cycles} in cycles (allowed {ALLOWED_IN_CYCLES})")
    if in_cycles > ALLOWED_IN_CYCLES or "--verbose" in sys.argv:
        for cycle in cycles:
            print("cycle: " + " <-> ".join(cycle))
            for a in cycle:
                for b in cycle:
                    if (a, b) in found:
                        print(f"  {a} -> {b}   ({found[(a, b)]})")
    if in_cycles > ALLOWED_IN_CYCLES:
        print("a new import cycle between the server's modules: make the new dependency go one way")
        return 1
    if in_cycles < ALLOWED_IN_CYCLES:
        print(f"fewer modules in cycles than allowed: lower ALLOWED_IN_CYCLES to {in_cycles} in {sys.argv[0]}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
