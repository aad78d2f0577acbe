"""Words defined once (issue 29): the glossary defines every term the outputs use and cites the papers;
the README's first screen defines the core terms, links the glossary and cites no file the repository
does not have."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TERMS = ["BE", "DS", "MRG", "CoS", "rcos", "Wmin", "VBP", "FBP", "theta", "omega", "optimum", "A_l", "FCT"]
PAPERS = [
    "A price-aware congestion control protocol for cloud services",
    "Pricing Intra-Datacenter Networks with Over-Committed Bandwidth Guarantee",
    "Towards Efficient, Work-Conserving, and Fair Bandwidth Guarantee in Cloud Datacenters",
]


def test_glossary_defines_each_term_once_and_cites_the_papers() -> None:
    text = (REPO / "docs" / "glossary.md").read_text()
    for term in TERMS:
        defs = re.findall(rf"^\s*- \*\*{re.escape(term)}\b[^*]*\*\*", text, flags=re.M)
        defs += re.findall(rf"\*\*{re.escape(term)} \(", text)
        assert defs, f"{term} is not defined in docs/glossary.md"
    for title in PAPERS:
        assert title in " ".join(text.split()), title


def test_readme_first_screen_defines_terms_and_links_the_glossary() -> None:
    text = (REPO / "README.md").read_text()
    first = "\n".join(text.splitlines()[:40])
    for term in ("BE", "DS", "MRG", "CoS", "VBP", "FBP", "rcos", "Wmin"):
        assert f"**{term}**" in first, term
    assert "docs/glossary.md" in first and PAPERS[0] in " ".join(first.split())
    assert "SPEC section" not in text and "SPEC sections" not in text
