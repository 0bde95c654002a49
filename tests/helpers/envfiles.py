"""Reading back what ``relaxrepro env`` writes, as an installer would: the pins of a requirements file, of a
conda ``environment.yml`` (a minimal YAML reading of the shape env writes: mappings, lists, double-quoted
scalars) and of a Dockerfile (its instructions, continuation lines joined, the ``pip install`` words)."""

from __future__ import annotations

import json
import shlex
from typing import Any, Dict, List, Tuple


def requirement_pins(text: str) -> List[str]:
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _scalar(text: str) -> Any:
    text = text.strip()
    if text.startswith('"'):
        return json.loads(text)  # a YAML double-quoted scalar without escapes beyond JSON's
    assert not text.startswith(("'", "{", "[", "&", "*", "!", "|", ">")), text  # not a shape env writes
    return text


def read_yaml(text: str) -> Dict[str, Any]:
    """Block mappings and block lists of scalars (a list item may be a one-key mapping opening a list)."""
    lines: List[Tuple[int, str]] = []
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        assert "\t" not in raw, raw
        lines.append((len(raw) - len(raw.lstrip(" ")), raw.strip()))

    def block(i: int, indent: int) -> Tuple[Any, int]:
        if lines[i][1].startswith("- "):
            items: List[Any] = []
            while i < len(lines) and lines[i][0] == indent and lines[i][1].startswith("- "):
                body = lines[i][1][2:]
                if body.endswith(":") and i + 1 < len(lines) and lines[i + 1][0] > indent:
                    value, i = block(i + 1, lines[i + 1][0])
                    items.append({body[:-1]: value})
                else:
                    items.append(_scalar(body))
                    i += 1
            return items, i
        mapping: Dict[str, Any] = {}
        while i < len(lines) and lines[i][0] == indent:
            key, sep, rest = lines[i][1].partition(":")
            assert sep, lines[i]
            if rest.strip():
                mapping[key] = _scalar(rest)
                i += 1
            else:
                value, i = block(i + 1, lines[i + 1][0])
                mapping[key] = value
        return mapping, i

    doc, end = block(0, lines[0][0])
    assert end == len(lines), "unread YAML from line %d" % end
    return doc


def conda_pins(text: str) -> Tuple[Dict[str, Any], List[str]]:
    """(the environment.yml document, its pip pins)."""
    doc = read_yaml(text)
    pips = [d["pip"] for d in doc["dependencies"] if isinstance(d, dict) and "pip" in d]
    return doc, (pips[0] if pips else [])


def dockerfile_instructions(text: str) -> List[Tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, continuation lines joined, comments left out."""
    out: List[Tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        if not pending and (not raw.strip() or raw.lstrip().startswith("#")):
            continue
        if raw.endswith("\\"):
            pending += raw[:-1] + " "
            continue
        line = (pending + raw).strip()
        pending = ""
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line ends the file"
    return out


def dockerfile_pins(text: str) -> Tuple[str, List[str]]:
    """(the FROM image, the requirements of its pip install)."""
    instructions = dockerfile_instructions(text)
    froms = [a for i, a in instructions if i == "FROM"]
    pins: List[str] = []
    for instruction, args in instructions:
        words = shlex.split(args) if instruction == "RUN" else []
        if words[:4] == ["python", "-m", "pip", "install"]:
            pins += [w for w in words[4:] if not w.startswith("-")]
    assert len(froms) == 1, froms
    return froms[0], pins
