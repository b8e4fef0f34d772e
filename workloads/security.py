"""How every Kafka client faultline opens reaches a secured cluster: TLS and SASL, in one place.

Why one object for all of them: a lab that mirrors production listens on SASL_SSL or SSL only,
and faultline opens two kinds of client - librdkafka's (producers, consumers, the drain, the
admin client) and its own protocol connections through kio (the observer, the controller-quorum
sampler, the epochless reader), which need the leader epochs and ELR librdkafka does not expose.
:class:`ClientSecurity` is the one description of how to authenticate; it gives librdkafka its
settings (:meth:`librdkafka`) and gives a kio connection its TLS socket and SASL exchange
(:meth:`wrap`, :meth:`authenticate`), so both kinds behave the same against the same listener.

Secrets: the password is held here only in memory, resolved by the harness from an environment
variable or a file the inventory names (never a literal in any file faultline writes), and is
left out of ``repr`` and :meth:`describe` (what run.json and the report record). Child processes
receive it through the pipe multiprocessing pickles their settings into.

SASL over kio follows Kafka's own client (KIP-152): SaslHandshake v1 names the mechanism, then
SaslAuthenticate v2 frames carry the mechanism's bytes - PLAIN's one message (RFC 4616) or SCRAM's
client-first/client-final exchange (RFC 5802/7677, computed by the ``scramp`` library).
"""
from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from typing import Any, Callable

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


class AuthenticationFailed(Exception):
    """The broker refused our credentials or our TLS handshake (one line, no secret in it)."""


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: str | None = None              # PEM bundle that signed the brokers' certificates
    cert_file: str | None = None            # client certificate (mutual TLS), PEM
    key_file: str | None = None             # its private key, PEM
    key_password: str | None = field(default=None, repr=False)
    verify_hostname: bool = True            # ssl.endpoint.identification.algorithm=https

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def describe(self) -> dict[str, Any]:
        """What may be recorded (run.json, the report): everything but the secrets."""
        out: dict[str, Any] = {"security.protocol": self.protocol}
        if self.sasl:
            out.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username})
        if self.tls:
            out.update({"ssl.ca.location": self.ca_file, "ssl.certificate.location": self.cert_file,
                        "ssl.endpoint.identification.algorithm": "https" if self.verify_hostname else "none"})
        return {k: v for k, v in out.items() if v is not None}

    def librdkafka(self) -> dict[str, Any]:
        """confluent-kafka settings for this listener (merged into every librdkafka client's)."""
        conf: dict[str, Any] = {"security.protocol": self.protocol}
        if self.sasl:
            conf.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                         "sasl.password": self.password})
        if self.tls:
            if self.ca_file:
                conf["ssl.ca.location"] = self.ca_file
            if self.cert_file:
                conf["ssl.certificate.location"] = self.cert_file
            if self.key_file:
                conf["ssl.key.location"] = self.key_file
            if self.key_password:
                conf["ssl.key.password"] = self.key_password
            conf["ssl.endpoint.identification.algorithm"] = "https" if self.verify_hostname else "none"
        return {k: v for k, v in conf.items() if v is not None}

    # -- kio connections ---------------------------------------------------------------------
    def wrap(self, sock: socket.socket, host: str) -> socket.socket:
        """The TCP socket as the listener wants it: TLS (verifying the broker's certificate and,
        unless switched off, its name) for SSL and SASL_SSL, else as it is."""
        if not self.tls:
            return sock
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.check_hostname = self.verify_hostname
        if self.cert_file:
            ctx.load_cert_chain(self.cert_file, self.key_file, password=self.key_password)
        try:
            return ctx.wrap_socket(sock, server_hostname=host)
        except ssl.SSLError as e:
            sock.close()
            raise AuthenticationFailed(f"{host}: TLS handshake failed: {e.reason or e}") from None

    def authenticate(self, exchange: Callable[[Any, type], Any]) -> None:
        """SASL over an open connection; ``exchange(request, response_type)`` sends one kio request
        and returns its response. Raises :class:`AuthenticationFailed` on a refusal."""
        if not self.sasl:
            return
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
        from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

        hs = exchange(SaslHandshakeRequest(mechanism=str(self.mechanism)), SaslHandshakeResponse)
        if int(hs.error_code) != 0:
            raise AuthenticationFailed(f"the broker does not offer SASL mechanism {self.mechanism} "
                                       f"(it offers {', '.join(hs.mechanisms) or 'none'})")

        def step(data: bytes) -> bytes:
            r = exchange(SaslAuthenticateRequest(auth_bytes=data), SaslAuthenticateResponse)
            if int(r.error_code) != 0:
                raise AuthenticationFailed(f"SASL {self.mechanism} authentication as {self.username!r} failed: "
                                           f"{r.error_message or 'error ' + str(int(r.error_code))}")
            return bytes(r.auth_bytes)

        if self.mechanism == "PLAIN":
            step(b"\0" + str(self.username).encode() + b"\0" + str(self.password).encode())
            return
        from scramp import ScramClient, ScramException
        client = ScramClient([str(self.mechanism)], str(self.username), str(self.password))
        try:
            server_first = step(client.get_client_first().encode())
            client.set_server_first(server_first.decode())
            server_final = step(client.get_client_final().encode())
            client.set_server_final(server_final.decode())
        except ScramException as e:
            raise AuthenticationFailed(f"SASL {self.mechanism} exchange with the broker failed: {e}") from None


PLAINTEXT = ClientSecurity()
