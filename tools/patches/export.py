"""``export``: one pull-request description per patch, written to build/patches/pr/NNNN.md."""

from __future__ import annotations

import re
from pathlib import Path

from .series import REPO, Patch, load_series

OUT_DIR = REPO / "build" / "patches" / "pr"


def _links(text: str) -> list[str]:
    return re.findall(r"https://\S+", text)


def render(patch: Patch) -> str:
    files = "\n".join(f"- `{f.path}`" for f in patch.files)
    related = patch.sections["Related"]
    rebuild = (
        "\n> **Needs a source build**: this changes C++ and cannot be shipped by repacking the wheel.\n"
        if patch.needs_rebuild
        else ""
    )
    links = "\n".join(f"- {url}" for url in _links(related)) or "- (none)"
    return f"""# {patch.subject}
{rebuild}
## Summary

{patch.sections["What breaks"]}

## Fix

{patch.sections["Fix"]}

Files changed:
{files}

## Test plan

{patch.sections["Test plan"]}

## Related issues and pull requests

{related}

Links:
{links}

---
Patch `{patch.file.name}` of the series in `patches/` (finding {patch.finding}), against torch 2.13.0.
"""


def export(out_dir: Path = OUT_DIR) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for patch in load_series():
        path = out_dir / f"{patch.number}.md"
        path.write_text(render(patch))
        written.append(path)
    return written


def run() -> int:
    for path in export():
        print(f"export: wrote {path.relative_to(REPO)}")
    return 0
