#!/usr/bin/env python3
"""Checks the data block of a page that memreport wrote against the reference builder:
check_page_data.py PAGE.html SNAPSHOT [--memreport ./memreport]. Exit 0 when the two
memreport-page/1 documents are equal value for value; else prints the first difference (its
JSON path) and exits 1. The page must have been written from SNAPSHOT alone, without
--redact-paths or --device. Also checks what the block's encoding promises: no '<', '>' or '&'
inside the element."""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_page_fixture  # noqa: E402

BLOCK = re.compile(r'<script type="application/json" id="memreport-data">(.*?)</script>', re.S)


def first_difference(a, b, path="$"):
    if type(a) is not type(b):
        return f"{path}: {json.dumps(a)[:80]} != {json.dumps(b)[:80]}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return f"{path}.{k}: only in the {'page' if k in a else 'reference'}"
            d = first_difference(a[k], b[k], f"{path}.{k}")
            if d:
                return d
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_difference(x, y, f"{path}[{i}]")
            if d:
                return d
        if len(a) != len(b):
            return f"{path}: {len(a)} items in the page, {len(b)} in the reference"
    elif a != b:
        return f"{path}: {json.dumps(a)[:80]} != {json.dumps(b)[:80]}"
    return None


def main():
    page, snapshot = sys.argv[1], sys.argv[2]
    memreport = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--memreport" else \
        "./memreport"
    with open(page, encoding="utf-8") as f:
        m = BLOCK.search(f.read())
    if not m:
        sys.exit(f"{page}: no memreport-data block")
    text = m.group(1)
    if any(c in text for c in "<>&"):
        sys.exit(f"{page}: the block holds a raw '<', '>' or '&'")
    got = json.loads(text)
    want = json.loads(make_page_fixture.to_json(make_page_fixture.build(
        make_page_fixture.load_snapshot(snapshot),
        make_page_fixture.report_json(snapshot, memreport))))
    d = first_difference(got, want)
    if d:
        print(f"{page}: differs from the reference at {d}")
        sys.exit(1)
    print(f"{page}: the data block equals the reference")


if __name__ == "__main__":
    main()
