"""Words defined once (issue 29) and the README as a front door (issue 28): the glossary defines every term
the outputs use and cites the papers; the README's first screen defines the core terms and links the
glossary; the README stays short, links only files that exist, and every ``paccp`` command pasted in it or
in the docs exists."""

from __future__ import annotations

import re
import shlex
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


def test_readme_is_a_short_front_door_whose_links_and_pictures_exist() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    for cmd in ("make demo", "make test", "paccp reproduce all"):
        assert cmd in text, cmd
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len([t for t in targets if t.endswith(".png")]) >= 4  # a picture per system and the comparison
    for t in targets:
        if not t.startswith(("http://", "https://")):
            assert (REPO / t).exists(), f"README links {t}, which does not exist"
    assert "DEMO_WALL" not in text and "REPRO_WALL" not in text  # measured figures filled in


# a command line: sudo, VAR=value and nice before it, any path to the paccp executable
_COMMAND = re.compile(r"^(?:sudo\s+)?(?:[A-Z_]+=\S+\s+)*(?:nice -n \d+\s+)?(?:\S*/)?paccp\s+(.*)$")


def _pasted_commands() -> list[tuple[str, list[str]]]:
    """Every ``paccp ...`` line of the README's and the docs' shell blocks, as argument lists."""
    out = []
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    for page in pages:
        if "results" in page.relative_to(REPO).parts:
            continue
        for block in re.findall(r"```sh\n(.*?)```", page.read_text(), flags=re.S):
            for line in block.splitlines():
                line = re.split(r"\s+#|;|&&|\|", line, maxsplit=1)[0].strip()
                m = _COMMAND.match(line)
                if m and not line.startswith("#"):
                    try:
                        args = shlex.split(m.group(1))
                    except ValueError:
                        continue
                    out.append((page.name, args))
    return out


def test_every_pasted_command_exists() -> None:
    """The sub-command path of every pasted ``paccp`` line resolves (``paccp X Y --help`` would work)."""
    import typer

    from paccp.cli import app

    root = typer.main.get_command(app)
    seen = 0
    for page, args in _pasted_commands():
        cmd, path = root, ["paccp"]
        for a in args:
            subs = getattr(cmd, "commands", None)
            if not subs or a.startswith("-") or a in ("|", "&&", ";"):
                break
            assert a in subs, f"{page}: '{' '.join([*path, a])}' is not a command"
            cmd, path = subs[a], [*path, a]
        seen += 1
    assert seen > 50
