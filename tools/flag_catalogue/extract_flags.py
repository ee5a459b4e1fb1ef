#!/usr/bin/python3
"""Lists the argparse option strings of Megatron-LM / MindSpeed / MindSpeed-LLM sources and checks them
against mindspeed-cpp's flag catalogue (src/cli/known_flags.cpp).

A maintenance script (not run by the tests, which need neither network nor mirrors): it reads the
Python sources out of local git mirrors with `git show REV:PATH`, finds every
`*.add_argument('--a', '--b', action=..., nargs=...)` call with the standard `ast` module and prints
one line per option string: name, arity (none/one/many, as FlagArity in known_flags.h), source label
and file. With --catalogue it prints only the names the catalogue lacks (exit status 1 if any), so the
"every flag is catalogued" check can be repeated after an upstream update.

Usage (the default spec is what the catalogue was checked against):
  /usr/bin/python3 tools/flag_catalogue/extract_flags.py                 # list every flag
  /usr/bin/python3 tools/flag_catalogue/extract_flags.py --catalogue src/cli/known_flags.cpp
  /usr/bin/python3 tools/flag_catalogue/extract_flags.py --spec megatron=/path/repo@core_v0.12.1:megatron/training/arguments.py

A --spec is LABEL=GIT_DIR@REV:PATH; PATH may name a directory (every *.py below it is read).
"""
import argparse
import ast
import re
import subprocess
import sys

MIRRORS = "/work/.mirror"
MEGATRON = f"{MIRRORS}/NVIDIA+Megatron-LM/repo"
MINDSPEED = f"{MIRRORS}/Ascend+MindSpeed/repo"
MINDSPEED_LLM = f"{MIRRORS}/Ascend+MindSpeed-LLM/repo"

# What the catalogue was checked against. MindSpeed-LLM moved its flags from
# mindspeed_llm/training/arguments.py (last at v2.3.0, the first release on core_v0.12.1) into
# register_args() of its features manager, so both are read.
DEFAULT_SPECS = [
    f"megatron={MEGATRON}@core_v0.12.1:megatron/training/arguments.py",
    f"mindspeed={MINDSPEED}@HEAD:mindspeed/arguments.py",
    f"mindspeed={MINDSPEED}@HEAD:mindspeed/features_manager",
    f"mindspeed-llm={MINDSPEED_LLM}@v2.3.0:mindspeed_llm/training/arguments.py",
    f"mindspeed-llm={MINDSPEED_LLM}@HEAD:mindspeed_llm/features_manager",
]


def git(git_dir, *args):
    return subprocess.run(["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True).stdout


def files_of(git_dir, rev, path):
    """The .py files at PATH (a file or a directory) in REV."""
    listing = git(git_dir, "ls-tree", "-r", "--name-only", rev, "--", path).split()
    return [p for p in listing if p.endswith(".py")]


def arity_of(call):
    action, nargs = None, None
    for kw in call.keywords:
        if kw.arg == "action" and isinstance(kw.value, ast.Constant):
            action = kw.value.value
        if kw.arg == "nargs":
            nargs = kw.value.value if isinstance(kw.value, ast.Constant) else "?expr"
    if action in ("store_true", "store_false", "store_const", "count", "help", "version"):
        return "none"
    if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1) or nargs == "?expr":
        return "many"
    return "one"


def group_titles(tree):
    """(variable, line, title) of every `X = Y.add_argument_group(title=...)`."""
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr == "add_argument_group"):
            continue
        call = node.value
        title = None
        if call.args and isinstance(call.args[0], ast.Constant):
            title = call.args[0].value
        for kw in call.keywords:
            if kw.arg == "title" and isinstance(kw.value, ast.Constant):
                title = kw.value.value
        for target in node.targets:
            if isinstance(target, ast.Name) and isinstance(title, str):
                out.append((target.id, node.lineno, title))
    return out


def flags_of(source, filename):
    """(option string, arity, argparse group title) of every add_argument call."""
    out = []
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as e:
        print(f"warning: {filename}: {e}", file=sys.stderr)
        return out
    groups = group_titles(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(names) != len(node.args):
            print(f"warning: {filename}:{node.lineno}: an option string is not a literal", file=sys.stderr)
        group = ""
        if isinstance(node.func.value, ast.Name):
            var = node.func.value.id
            before = [(line, title) for v, line, title in groups if v == var and line <= node.lineno]
            if before:
                group = max(before)[1]
        if not group:  # a feature's group: title=self.feature_name, else the feature's folder
            m = re.search(r"feature_name\s*=\s*[\"']([^\"']+)", source)
            group = m.group(1) if m else filename.rsplit("/", 2)[-2]
        arity = arity_of(node)
        out += [(n, arity, group) for n in names if n.startswith("--")]
    return out


def collect(specs):
    rows = {}  # name -> (arity, label, group, file); the first spec that names a flag wins
    for spec in specs:
        label, rest = spec.split("=", 1)
        git_dir, rev_path = rest.split("@", 1)
        rev, path = rev_path.split(":", 1)
        for f in files_of(git_dir, rev, path):
            for name, arity, group in flags_of(git(git_dir, "show", f"{rev}:{f}"), f"{rev}:{f}"):
                rows.setdefault(name, (arity, label, group, f"{rev}:{f}"))
    return rows


SOURCE_CONSTANT = {"megatron": "kMegatron", "mindspeed": "kMindSpeed", "mindspeed-llm": "kMindSpeedLlm"}
ARITY_CONSTANT = {"none": "FlagArity::kNone", "one": "FlagArity::kOne", "many": "FlagArity::kMany"}


def cpp_row(name, arity, label, group):
    """A known_flags.cpp row (clang-format's layout may still split it)."""
    return f'    {{"{name}", {ARITY_CONSTANT[arity]}, {SOURCE_CONSTANT.get(label, label)}, "{group.lower()}"}},'


def catalogue_names(path):
    text = open(path, encoding="utf-8").read()
    return set(re.findall(r'\{"(--[^"]+)",\s*FlagArity::', text))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", action="append", help="LABEL=GIT_DIR@REV:PATH (repeatable; default: the catalogue's)")
    ap.add_argument("--catalogue", help="known_flags.cpp: print only the flags it lacks")
    ap.add_argument("--rows", action="store_true", help="print known_flags.cpp rows instead of tab-separated lines")
    args = ap.parse_args()
    rows = collect(args.spec or DEFAULT_SPECS)
    if args.catalogue:
        known = catalogue_names(args.catalogue)
        missing = sorted(n for n in rows if n not in known)
        for n in missing:
            arity, label, group, f = rows[n]
            if args.rows:
                print(cpp_row(n, arity, label, group or "(none)"))
            else:
                print(f"{n}\t{arity}\t{label}\t{group}\t{f}")
        print(f"{len(rows)} flags read, {len(missing)} missing from {args.catalogue}", file=sys.stderr)
        return 1 if missing else 0
    for n in sorted(rows):
        arity, label, group, f = rows[n]
        print(cpp_row(n, arity, label, group or "(none)") if args.rows else f"{n}\t{arity}\t{label}\t{group}\t{f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
