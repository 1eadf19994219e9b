"""Draws one trace as a waterfall, an HTML page: the spans a collector
received (JSON, as tests/polyglot/test_otlp.py writes them with
CUMULO_TRACE_DUMP), each a bar on the trace's time line, indented under its
parent. docs/TRACING.md's picture is this page, taken by a headless browser:

    CUMULO_TRACE_DUMP=/tmp/trace.json python -m pytest tests/polyglot/test_otlp.py -k gateway
    python3 docs/tracing/waterfall.py /tmp/trace.json > /tmp/trace.html
    chromium --headless --screenshot=docs/tracing/trace.png --window-size=1100,330 /tmp/trace.html
"""

import html
import json
import sys

COLORS = {"node-a": "#4e79a7", "node-b": "#f28e2b"}


def main(path: str) -> None:
    spans = json.load(open(path))
    by_id = {s["span_id"]: s for s in spans}
    children: dict[str, list] = {}
    for s in spans:
        parent = s["parent_id"] if s["parent_id"] in by_id else ""
        children.setdefault(parent, []).append(s)
    start = min(s["start_ns"] for s in spans)
    total = max(s["end_ns"] for s in spans) - start
    rows = []

    def walk(parent: str, depth: int) -> None:
        for s in sorted(children.get(parent, []), key=lambda s: s["start_ns"]):
            rows.append((depth, s))
            walk(s["span_id"], depth + 1)

    walk("", 0)
    out = ["<!doctype html><meta charset=utf-8><style>",
           "body{font:13px system-ui,sans-serif;margin:16px;color:#222}",
           ".row{display:flex;align-items:center;height:30px;border-bottom:1px solid #eee}",
           ".label{width:430px;white-space:nowrap;overflow:hidden}",
           ".kind{color:#666;font-size:11px;margin-left:6px}",
           ".lane{position:relative;flex:1;height:18px}",
           ".bar{position:absolute;height:18px;border-radius:3px;color:#fff;font-size:11px;",
           "line-height:18px;padding-left:4px;white-space:nowrap}",
           "h1{font-size:15px;margin:0 0 10px}</style>",
           f"<h1>trace {spans[0]['trace_id']} &middot; {len(spans)} spans &middot; {total / 1e6:.2f} ms</h1>"]
    for depth, s in rows:
        left = (s["start_ns"] - start) / total * 100
        width = max((s["end_ns"] - s["start_ns"]) / total * 100, 0.4)
        color = COLORS.get(s["service"], "#59a14f")
        ms = (s["end_ns"] - s["start_ns"]) / 1e6
        out.append(
            f'<div class=row><div class=label style="padding-left:{depth * 18}px">{html.escape(s["name"])}'
            f'<span class=kind>{s["kind"].upper()} &middot; {html.escape(s["service"])}</span></div>'
            f'<div class=lane><div class=bar style="left:{left:.2f}%;width:{width:.2f}%;background:{color}">'
            f"{ms:.2f} ms</div></div></div>")
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1])
