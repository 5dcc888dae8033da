#!/usr/bin/python3
"""test_libkvtier_exports — libkvtier.so exports exactly the functions of kvtier.h.

Rule checked: STYLE.md rule 17, "a library exports its API only" (the issue: an
engine that loads another nanopb or etcd client into its process must not clash
with ours). The expected set is every function kvtier.h declares (non-static, at
file scope) plus any object it declares; the actual set is the defined
dynamic symbols of the built .so (nm -D --defined-only). Any symbol in one set and
not the other fails the test, named. The header is run through the C
preprocessor (C mode, so no extern "C"), and only the lines from kvtier.h itself
are parsed, not the standard headers it includes.

Usage: test_libkvtier_exports.py LIB HEADER NM CC
"""
import re
import subprocess
import sys


def header_text(cc, header):
    """kvtier.h after the preprocessor, its own lines only (by the line markers)."""
    out = subprocess.run([cc, "-E", "-x", "c", "-std=c11", header], check=True,
                         capture_output=True, text=True).stdout
    keep, mine = [], False
    for line in out.splitlines():
        m = re.match(r'#\s*\d+\s+"([^"]*)"', line)
        if m:
            mine = m.group(1).endswith("kvtier.h")
        elif mine:
            keep.append(line)
    return "\n".join(keep)


def strip_attributes(s):
    """Removes __attribute__((...)) so it is not taken for a function name."""
    while True:
        i = s.find("__attribute__")
        if i < 0:
            return s
        j, depth = s.index("(", i), 0
        for k in range(j, len(s)):
            depth += {"(": 1, ")": -1}.get(s[k], 0)
            if depth == 0:
                break
        s = s[:i] + s[k + 1:]


def statements(text):
    """File-scope declarations, with brace bodies (struct, enum, inline function)
    collapsed to {}; a function body ends its statement as a ; would."""
    flat, depth = [], 0
    for ch in text:
        if ch == "{":
            if depth == 0:
                flat.append("{")
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                head = "".join(flat).rpartition("{")[0]
                flat.append("};" if head.rstrip().endswith(")") else "}")
        elif depth == 0:
            flat.append(ch)
    for stmt in "".join(flat).split(";"):
        yield strip_attributes(" ".join(stmt.split()))


def declared(text):
    """Names of the functions and objects kvtier.h declares with external linkage."""
    ident = r"([A-Za-z_]\w*)"
    names = set()
    for stmt in statements(text):
        if not stmt or re.match(r"(typedef|static)\b", stmt):
            continue
        head, brace, tail = stmt.rpartition("{}")
        decl = stmt if not brace else head if head.rstrip().endswith(")") else tail
        if not decl.strip() or re.fullmatch(r"(struct|union|enum) \w+", decl.strip()):
            continue  # a type, no declarator
        fptr = re.search(r"\(\s*\*\s*" + ident + r"\s*\)", decl)  # (*name)(...): an object
        func = re.search(r"\b" + ident + r"\s*\((?!\s*\*)", decl)
        obj = re.search(r"\b" + ident + r"\s*(\[[^\]]*\]\s*)*(=.*)?$", decl)
        match = fptr or func or obj
        if match:
            names.add(match.group(1))
    return names


def exported(nm, lib):
    out = subprocess.run([nm, "-D", "--defined-only", "--format=posix", lib], check=True,
                         capture_output=True, text=True).stdout
    return {line.split()[0].split("@")[0] for line in out.splitlines() if line.strip()}


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    lib, header, nm, cc = sys.argv[1:]
    want = declared(header_text(cc, header))
    have = exported(nm, lib)
    if "kvt_connect" not in want:  # the parser broke, not the library
        sys.exit(f"FAIL: kvt_connect not found in {header}; parsed {sorted(want)}")
    extra, missing = sorted(have - want), sorted(want - have)
    for name in extra:
        print(f"extra: {lib} exports {name}, which {header} does not declare")
    for name in missing:
        print(f"missing: {header} declares {name}, which {lib} does not export")
    if extra or missing:
        sys.exit(f"FAIL (STYLE.md rule 17): {len(extra)} extra, {len(missing)} missing; "
                 "fix the code or client/libkvtier.map")
    print(f"ok: {lib} exports the {len(want)} functions of {header}, nothing else")


if __name__ == "__main__":
    main()
