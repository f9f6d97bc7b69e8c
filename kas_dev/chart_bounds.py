"""Write the scheduler's configuration bounds into the Helm chart (one source of truth).

    python -m kas_dev.chart_bounds           # rewrite values.schema.json and the bounds file
    python -m kas_dev.chart_bounds --check   # exit 1 naming what is out of step

The bounds come from scheduler/config/bounds.py: the JSON Schema keywords of each bounded
value are replaced (the others, e.g. descriptions, kept), and
files/config-bounds.json holds what the templates check beyond the schema.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scheduler.config.bounds import chart_bounds, schema_bounds

CHART = Path(__file__).resolve().parent.parent / "charts" / "kube-async-scheduler"
SCHEMA = CHART / "values.schema.json"
BOUNDS = CHART / "files" / "config-bounds.json"
# the keywords that bound a value: all of them come from the scheduler
BOUNDING = ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
            "minLength", "maxLength", "pattern")  # fmt: skip


def _node(schema: dict[str, Any], pointer: str) -> dict[str, Any]:
    """The schema of the value at `pointer` ("/config/profiles/items/schedulerName")."""
    node = schema
    for part in pointer.strip("/").split("/"):
        node = node[part] if part in ("items", "then") else node["properties"][part]
    return node


def _dump(doc: Any) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def generated() -> dict[Path, str]:
    """The two files as they must be."""
    schema = json.loads(SCHEMA.read_text())
    for pointer, keywords in schema_bounds().items():
        node = _node(schema, pointer)
        for key in BOUNDING:
            node.pop(key, None)
        # bounding keywords first, as the hand-written entries have them
        rest = dict(node)
        node.clear()
        node.update(keywords)
        node.update(rest)
    return {SCHEMA: _dump(schema), BOUNDS: _dump(chart_bounds())}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kas_dev.chart_bounds")
    parser.add_argument("--check", action="store_true", help="only report files out of step")
    args = parser.parse_args(argv)
    stale = [p for p, text in generated().items() if not p.exists() or p.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path} is out of step with scheduler/config/bounds.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in generated().items():
        path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
