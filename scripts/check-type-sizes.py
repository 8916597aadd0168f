#!/usr/bin/env python3
"""Fails when a type in Sources/ has more than 12 stored properties or 25 methods (funcs and
inits, its extensions in every file included): a type that big has two jobs (issue #41).

A lint, not a parser: string literals and comments are blanked, braces are counted, and a
member is a `let`/`var`/`func`/`init` directly inside a type's (or its extension's) body.
Static properties do not count (static methods do); a computed property (`var x: T { … }`) does not count as stored.

Types still over the limit are listed in OVER with their current counts: each may shrink but
not grow, and the list must be kept exact (a type back within the limits must leave it).

    python3 scripts/check-type-sizes.py          # check
    python3 scripts/check-type-sizes.py --all    # print every type's counts
"""
import collections
import os
import re
import sys

MAX_STORED = 12
MAX_METHODS = 25

# Type: (stored properties, methods) today. To be split; never to grow.
OVER = {
}

DECL = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|internal|private|fileprivate|package|final|open|nonisolated|indirect)\s+)*"
    r"(struct|class|enum|actor|extension|protocol)\s+([A-Za-z_][\w.]*)")
MODIFIERS = r"(?:(?:@\w+(?:\([^)]*\))?|public|internal|private|fileprivate|package|final|override|nonisolated|mutating|lazy|weak|unowned|(?:private|fileprivate|internal|public|package)\(set\))\s+)*"
STORED = re.compile(r"^" + MODIFIERS + r"(let|var)\s")
METHOD = re.compile(r"^" + MODIFIERS.replace("mutating|", "mutating|convenience|required|") + r"(func\s|init\s*[(<?])")


def blank(line):
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    i = line.find("//")
    return line[:i] if i >= 0 else line


def measure(root):
    stored = collections.Counter()
    methods = collections.Counter()
    for folder, _, files in os.walk(root):
        for name in sorted(files):
            if not name.endswith(".swift"):
                continue
            stack = []  # (type name or None, depth at which its body opened)
            depth, pending, in_block, in_multiline = 0, None, False, False
            for raw in open(os.path.join(folder, name), encoding="utf-8"):
                line = raw
                if '"""' in line:
                    if line.count('"""') % 2 == 1:
                        in_multiline = not in_multiline
                    continue
                if in_multiline:
                    continue
                if in_block:
                    if "*/" not in line:
                        continue
                    in_block, line = False, line.split("*/", 1)[1]
                if "/*" in line and "*/" not in line:
                    in_block, line = True, line.split("/*", 1)[0]
                line = blank(line)
                text = line.strip()
                inside = stack[-1][0] if stack and stack[-1][1] == depth - 1 else None
                m = DECL.match(line)
                if m:
                    if m.group(1) != "protocol":
                        kind, type_name = m.group(1), m.group(2)
                        if kind != "extension":
                            outer = [s[0] for s in stack if s[0]]
                            type_name = ".".join(outer + [type_name])
                        pending = type_name
                elif inside is not None:
                    static = re.search(r"\b(static|class) ", text) is not None
                    member = re.sub(r"\b(static|class) ", "", text)
                    if STORED.match(member):
                        head = member.split("{", 1)
                        computed = len(head) == 2 and "=" not in head[0] and not re.match(r"\s*(willSet|didSet)", head[1])
                        if not computed and not static:
                            stored[inside] += 1
                    elif METHOD.match(member):
                        methods[inside] += 1
                for ch in line:
                    if ch == "{":
                        stack.append((pending, depth))
                        pending = None
                        depth += 1
                    elif ch == "}":
                        depth -= 1
                        if stack:
                            stack.pop()
    return stored, methods


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Sources")
    stored, methods = measure(root)
    names = sorted(set(stored) | set(methods))
    if "--all" in sys.argv:
        for n in sorted(names, key=lambda n: (-stored[n], -methods[n])):
            print(f"{n:50s} stored={stored[n]:3d} methods={methods[n]:3d}")
        return 0
    problems = []
    for n in names:
        s, m = stored[n], methods[n]
        if s <= MAX_STORED and m <= MAX_METHODS:
            if n in OVER:
                problems.append(f"{n}: {s} stored, {m} methods, within the limits now: take it out of OVER")
            continue
        if n not in OVER:
            problems.append(f"{n}: {s} stored properties, {m} methods (limits {MAX_STORED} and {MAX_METHODS}): split it")
            continue
        was_s, was_m = OVER[n]
        if s > was_s or m > was_m:
            problems.append(f"{n}: {s} stored, {m} methods, grew past its recorded {was_s}/{was_m}: split it instead")
        elif (s, m) != (was_s, was_m):
            problems.append(f"{n}: {s} stored, {m} methods, smaller than its recorded {was_s}/{was_m}: lower OVER to match")
    for n in OVER:
        if n not in names:
            problems.append(f"{n}: in OVER but no longer found in Sources")
    for p in problems:
        print("check-type-sizes: " + p, file=sys.stderr)
    if not problems:
        print(f"check-type-sizes: ok ({len(names)} types; {len(OVER)} still over the limits, none grew)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
