"""The docs stay usable: every relative link resolves, every evidence file has its row in docs/results.md, the README
and the recipe page stay short, and the README's set-up commands are the ones CI runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")


def links(text: str) -> list[str]:
    """Targets of the markdown links outside code blocks and code spans."""
    return LINK.findall(CODE_SPAN.sub("", FENCE.sub("", text)))


def anchors(text: str) -> set[str]:
    """GitHub's heading anchors of a markdown file: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+\s+(.+?)\s*$", FENCE.sub("", text), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


def test_link_parser_skips_code_and_reads_anchors():
    text = "# A title: here\n[a](x.md) `[b](y.md)`\n```\n[c](z.md)\n```\n![img](p.png)\n"
    assert links(text) == ["x.md", "p.png"]
    assert anchors(text) == {"a-title-here"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(doc):
    broken = []
    for target in links(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, fragment = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.is_file():
            broken.append(f"{target}: no file {file}")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text(encoding="utf-8")):
            broken.append(f"{target}: no heading #{fragment} in {file.name}")
    assert not broken, f"{doc.name}: " + "; ".join(broken)


@pytest.mark.parametrize(("name", "limit"), [("README.md", 200), ("docs/RECIPE.md", 250)])
def test_page_stays_short(name, limit):
    lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
    assert len(lines) <= limit, f"{name} has {len(lines)} lines, at most {limit}"


def test_readme_lines_stay_readable():
    long = [i + 1 for i, line in enumerate((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
            if len(line) > 200]
    assert not long, f"README.md lines over 200 characters: {long}"


def test_readme_test_command_is_the_one_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert ci.startswith("python -m pip install") and f"\n{ci}\n" in readme
    assert '\npython -m pip install "torch==2.13.0" -e . && train\n' in readme


def test_every_evidence_file_is_listed_in_the_results_page():
    listed = set(links((ROOT / "docs" / "results.md").read_text(encoding="utf-8")))
    unlisted = [p.name for p in sorted((ROOT / "docs" / "results").iterdir()) if f"results/{p.name}" not in listed]
    assert not unlisted, f"docs/results/ files without a row in docs/results.md: {unlisted}"
