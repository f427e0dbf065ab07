# usage: python3 benches/scripts/longest_functions.py src   -- the 10 longest Rust functions (brace-matched, unit tests excluded)
import re, sys, pathlib
root = pathlib.Path(sys.argv[1])
out = []
for p in root.rglob("*.rs"):
    lines = p.read_text().split("\n")
    i = 0
    in_test = False
    while i < len(lines):
        l = lines[i]
        if re.match(r"\s*#\[cfg\(test\)\]", l):
            break  # unit tests at the end of a file
        m = re.match(r"\s*(pub(\([a-z]+\))?\s+)?(async\s+)?fn\s+(\w+)", l)
        if m:
            depth = 0; started = False; j = i
            while j < len(lines):
                code = re.sub(r'"(\\.|[^"\\])*"', '""', lines[j])
                code = re.sub(r"'(\\.|[^'\\])'", "''", code)
                code = code.split("//")[0]
                depth += code.count("{") - code.count("}")
                if "{" in code: started = True
                if started and depth <= 0: break
                if not started and lines[j].rstrip().endswith(";"): break
                j += 1
            if started:
                out.append((j - i + 1, f"{p.relative_to(root)}::{m.group(4)}"))
            i = j + 1
            continue
        i += 1
out.sort(reverse=True)
for n, name in out[:10]:
    print(f"{n:4d} {name}")
