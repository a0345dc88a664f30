"""``[temporal]`` with a client certificate (mTLS): the engine connects through a TLS endpoint that
verifies its clients, as Temporal Cloud's does, and one without the certificate is refused.

The dev server speaks no TLS, so a TLS terminator stands in front of it here: a real handshake
(HTTP/2 by ALPN, the client's certificate required and checked against a CA made for the test),
then the bytes go through to the dev server unchanged.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from agent_unit.errors import ConfigError, EngineUnavailable
from agent_unit.temporal.settings import temporal_settings

from ..support.temporal import TemporalServer

pytestmark = pytest.mark.slow  # a Temporal dev server


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(
    common: str, issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None, *, ca: bool = False
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, issuer_key = issuer or (_name(common), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256()), key


def _write(folder: Path, name: str, certificate: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    (folder / f"{name}.pem").write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    (folder / f"{name}.key").write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


@pytest.fixture
def certificates(tmp_path: Path) -> Path:
    """A CA, the endpoint's certificate and a client's, both signed by it; and a stranger's, self-signed."""
    ca, ca_key = _certificate("agent-unit test CA", None, ca=True)
    _write(tmp_path, "ca", ca, ca_key)
    for name in ("server", "client"):
        certificate, key = _certificate(name, (ca.subject, ca_key))
        _write(tmp_path, name, certificate, key)
    stranger, stranger_key = _certificate("stranger", None)
    _write(tmp_path, "stranger", stranger, stranger_key)
    return tmp_path


@pytest.fixture
async def endpoint(certificates: Path, temporal_server: TemporalServer) -> AsyncIterator[str]:
    """A TLS endpoint that requires a client certificate from the test CA, in front of the dev server."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    context.load_verify_locations(certificates / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])
    host, port = temporal_server.address.rsplit(":", 1)

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def relay(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(relay, "127.0.0.1", 0, ssl=context)
    yield f"localhost:{server.sockets[0].getsockname()[1]}"
    server.close()


async def test_a_client_certificate_from_files_or_from_the_environment_connects(
    certificates: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from_files = temporal_settings(
        {
            "address": endpoint,
            "tls_cert": str(certificates / "client.pem"),
            "tls_key": str(certificates / "client.key"),
            "tls_ca": str(certificates / "ca.pem"),
        }
    )
    client = await from_files.connect()  # the handshake, then Temporal's system info over it
    assert client.namespace == "default"

    monkeypatch.setenv("TEMPORAL_TLS_CERT", (certificates / "client.pem").read_text())
    monkeypatch.setenv("TEMPORAL_TLS_KEY", (certificates / "client.key").read_text())
    from_environment = temporal_settings(
        {
            "address": endpoint,
            "tls_cert": "${TEMPORAL_TLS_CERT}",
            "tls_key": "${TEMPORAL_TLS_KEY}",
            "tls_ca": str(certificates / "ca.pem"),
        }
    )
    assert (await from_environment.connect()).namespace == "default"


@pytest.mark.parametrize("who", ["nobody", "stranger"])
async def test_without_a_certificate_the_ca_signed_the_endpoint_refuses_the_engine(
    certificates: Path, endpoint: str, who: str
) -> None:
    table = {"address": endpoint, "tls_ca": str(certificates / "ca.pem")}
    if who == "stranger":
        table |= {"tls_cert": str(certificates / "stranger.pem"), "tls_key": str(certificates / "stranger.key")}
    with pytest.raises(EngineUnavailable, match="cannot be reached"):
        await temporal_settings(table).connect()


async def test_a_certificate_without_its_key_or_a_missing_file_is_named() -> None:
    with pytest.raises(ConfigError, match="tls_cert and tls_key go together"):
        temporal_settings({"tls_cert": "client.pem"})
    settings = temporal_settings({"tls_cert": "/nowhere/client.pem", "tls_key": "/nowhere/client.key"})
    with pytest.raises(EngineUnavailable, match=r"\[temporal\] tls_cert: cannot read '/nowhere/client.pem'"):
        await settings.connect()
