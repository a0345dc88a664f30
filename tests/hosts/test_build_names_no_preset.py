"""``build.py`` names no preset: what differs between hosts lives in each preset's own hooks.

A branch on a preset's name in the build (``if name != "cloudflare"``) is a host's knowledge
outside its module: a new host, or a third party's, could not have it. The build reads only the
``Preset`` fields, so every host is a module under ``agent_unit_cli/presets/``.
"""

from __future__ import annotations

import re
from pathlib import Path

import agent_unit_cli.build
from agent_unit_cli.presets import PRESETS

BUILD = Path(agent_unit_cli.build.__file__)


def named_presets(text: str) -> list[str]:
    """The presets ``text`` names: each by its name or module's name as a word, and ``server``
    (also the key of your own app) only where it is a preset: ``--preset server``, ``== "server"``."""
    found = []
    for name in PRESETS:
        if name == "server":
            pattern = r"""(--preset|preset\s*[!=]=|name\s*[!=]=)\s*["']?server\b"""
        else:
            spellings = {name, name.replace("-", "_")}
            pattern = r"\b(" + "|".join(re.escape(spelling) for spelling in spellings) + r")\b"
        if re.search(pattern, text, flags=re.IGNORECASE):
            found.append(name)
    return found


def test_build_py_names_no_preset() -> None:
    assert named_presets(BUILD.read_text()) == []


def test_the_check_finds_a_preset_named_in_code_or_text() -> None:
    assert named_presets('if scheme == "d1" and name != "cloudflare":') == ["cloudflare"]
    assert named_presets("build it with --preset server, docker, aws-lambda or vercel") == [
        "server",
        "aws-lambda",
        "docker",
        "vercel",
    ]
    assert named_presets("# Netlify runs no Python") == ["netlify"]
    assert named_presets('"server": self.server, lambda message: None') == []


def test_build_py_names_no_store_scheme_that_a_preset_owns() -> None:
    """A store only one host reaches (Cloudflare's ``d1``) is known to the build through that
    preset's ``own_stores``, not from a list in ``build.py``."""
    text = BUILD.read_text()
    owned = sorted({scheme for preset in PRESETS.values() for scheme in preset.own_stores})
    assert owned  # the check would pass vacuously without one
    assert [scheme for scheme in owned if re.search(rf"""["']{re.escape(scheme)}(://)?["']""", text)] == []
