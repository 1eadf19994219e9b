"""Writes proto/vectors/*.json as tab-separated lines for the ATS2 test
program (test_ats2.dats), which has no JSON reader of its own. Each field is
rendered as testing.cats renders a decoded frame's: integers in decimal
(exactly, also above 2^53), str as the hex of its UTF-8, bytes and trans_ids
in hex, MCAST_SENT's trans_ids joined by commas.

    frame   NAME HEX TYPE field=value ...
    invalid NAME HEX STATUS
    kv      NAME HEX keyhex=valuehex ...
    kvbad   NAME HEX STATUS
"""

import json
import sys
from pathlib import Path

STR_FIELDS = {"token", "prefix", "pattern", "name", "message"}


def render(key, value):
    if isinstance(value, bool) or not isinstance(value, (int, str, list)):
        raise ValueError(f"unexpected field {key}={value!r}")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return ",".join(value)
    return value.encode().hex() if key in STR_FIELDS else value


def main(folder):
    for path in sorted(Path(folder).glob("*.json")):
        family = json.loads(path.read_text(encoding="utf-8"))
        for v in family["vectors"]:
            if "pairs" in v:
                pairs = [f"{k.encode().hex()}={x.encode().hex()}" for k, x in v["pairs"]]
                print("\t".join(["kv", v["name"], v["hex"], *pairs]))
            else:
                fields = [f"{k}={render(k, x)}" for k, x in v["fields"].items()]
                print("\t".join(["frame", v["name"], v["hex"], v["type"], *fields]))
        for v in family["invalid"]:
            kind = "kvbad" if family["family"] == "kv" else "invalid"
            print("\t".join([kind, v["name"], v["hex"], v["error"]]))


if __name__ == "__main__":
    main(sys.argv[1])
