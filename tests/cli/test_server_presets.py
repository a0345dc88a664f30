"""The server preset API: ``server`` names your app or a server preset; a third party publishes one
through the ``agent_unit.servers`` entry-point group and tests it with ``agent_unit.testing.servers``.

The third party here is a real installed distribution (a ``dist-info`` with its entry points on
``sys.path``), found by ``importlib.metadata`` as pip's install would be.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_unit.errors import ConfigError
from agent_unit.testing.servers import assert_server_preset
from agent_unit_cli.config import load_config
from agent_unit_cli.presets import PRESETS
from agent_unit_cli.server_presets import find_server_preset, generate, server_presets

PLUGIN = '''from pathlib import Path


class Hello:
    """Serves "hello from {preset}" from a module it writes."""

    name = "hello-server"

    def entry(self, root, gen_dir, preset, options):
        if preset.serverless and not options.get("shared"):
            raise ValueError(f"hello-server keeps its greetings in memory: {preset.name} does not keep them")
        greeting = options.get("greeting", "hello")
        (gen_dir / "hello_app.py").write_text(
            "async def app(scope, receive, send):\\n"
            "    await send({'type': 'http.response.start', 'status': 200, 'headers': []})\\n"
            f"    await send({{'type': 'http.response.body', 'body': {greeting!r}.encode()}})\\n"
        )
        return "hello_app:app"

    def allowed_origins(self, options):
        return options.get("pages", [])


server = Hello()
'''


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A distribution with an ``agent_unit.servers`` entry point, installed on ``sys.path``."""
    site = tmp_path / "site"
    (site / "hello_server").mkdir(parents=True)
    (site / "hello_server" / "__init__.py").write_text(PLUGIN)
    info = site / "hello_server-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: hello-server\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text("[agent_unit.servers]\nhello-server = hello_server:server\n")
    monkeypatch.syspath_prepend(str(site))
    return site


def configured(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    (root / "agent-unit.toml").write_text(text)
    return root


def test_an_installed_server_preset_is_found_by_name_beside_the_built_in_ones(installed: Path) -> None:
    assert {"google-adk", "hello-server"} <= set(server_presets())
    assert find_server_preset("hello-server").name == "hello-server"


def test_assert_server_preset_imports_the_app_the_entry_writes(installed: Path, tmp_path: Path) -> None:
    app = assert_server_preset(find_server_preset("hello-server"), tmp_path, PRESETS["server"], {"greeting": "hi"})
    assert app.__module__ == "hello_app"


def test_a_server_presets_refusal_reaches_the_user_as_its_own_message(installed: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="aws-lambda does not keep them"):
        assert_server_preset(find_server_preset("hello-server"), tmp_path, PRESETS["aws-lambda"])


def test_the_server_table_passes_its_other_keys_to_the_preset_as_options(installed: Path, tmp_path: Path) -> None:
    root = configured(tmp_path, '[server]\npreset = "hello-server"\ngreeting = "good day"\n')
    config, _ = load_config(root)
    assert config.server_preset == "hello-server" and config.server_options == {"greeting": "good day"}
    made = generate("hello-server", config.server_options, root, PRESETS["server"])
    assert made.reference == "hello_app:app" and "'good day'" in (made.folder / "hello_app.py").read_text()
    assert made.allowed_origins == ()  # it names no page its app lets call: the configured ones alone


def test_a_page_a_server_preset_names_is_let_through_and_one_that_is_no_origin_fails_the_build(
    installed: Path, tmp_path: Path
) -> None:
    made = generate("hello-server", {"pages": ["https://app.example.com"]}, tmp_path, PRESETS["server"])
    assert made.allowed_origins == ("https://app.example.com",)
    with pytest.raises(ValueError, match=r"hello-server' returned allowed_origins: 'app\.example\.com' is not an"):
        generate("hello-server", {"pages": ["app.example.com"]}, tmp_path, PRESETS["server"])


def test_the_pages_adks_cors_lets_call_get_past_the_origin_check_in_front_of_it(tmp_path: Path) -> None:
    (tmp_path / "agents").mkdir()
    options = {"allow_origins": ["https://App.example.com/", "regex:https://.*\\.example\\.com", "*"]}
    made = generate("google-adk", options, tmp_path, PRESETS["server"])
    assert made.allowed_origins == ("https://app.example.com",)  # a pattern or "*" names no one page


def test_an_unknown_server_preset_is_refused_naming_the_known_ones(installed: Path) -> None:
    with pytest.raises(ValueError, match="use one of google-adk, hello-server"):
        find_server_preset("no-such")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('server = "Not An App"', "write 'module:app' for your own ASGI app"),
        ('server = "google-adk"\nbudget = "5m"', "server = 'google-adk' serves the framework's own app"),
        ('storage = "redis://x"\n[server]\npreset = "google-adk"', "storage: the app opens its own store"),
        ("[server]\nweb = true", "server.preset: Field required"),
    ],
)
def test_a_server_mistake_in_the_configuration_is_one_error(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(configured(tmp_path, text))
    assert expected in str(caught.value)


def test_module_app_and_a_preset_name_are_both_a_server(tmp_path: Path) -> None:
    assert load_config(configured(tmp_path, 'server = "web.main:app"'))[0].server_app == "web.main:app"
    config, _ = load_config(configured(tmp_path, 'server = "google-adk"'))
    assert config.server_preset == "google-adk" and config.server_app is None
