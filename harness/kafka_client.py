"""The inventory's ``kafka_client``: how faultline's clients authenticate to a secured cluster.

Why in the inventory: the listener's security is a fact about the lab, like its hosts; every
client faultline opens (producers, consumers, the drain, the admin client, the observer, the
controller-quorum sampler, the epochless reader) takes it from here, through one
:class:`~workloads.security.ClientSecurity`, so none of them can be configured differently.

Keys are librdkafka's names (what a lab's Kafka clients already use)::

    kafka_client:
      security.protocol: SASL_SSL            # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
      sasl.mechanism: SCRAM-SHA-512          # PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
      sasl.username: faultline
      sasl.password_env: LAB_KAFKA_PASSWORD  # or sasl.password_file: /path (first line)
      ssl.ca.location: /etc/kafka/ca.pem
      ssl.certificate.location: ...          # mutual TLS (with ssl.key.location,
      ssl.key.location: ...                  #   ssl.key.password_env / _file)
      ssl.endpoint.identification.algorithm: https   # or none

Secrets never appear in a file faultline reads or writes: a literal ``sasl.password`` is refused
in one line; the password is read from the environment variable or file only when a run, a
preflight or a check needs it, and nothing records it (run.json keeps
``ClientSecurity.describe()``: no secret).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwork.config import ConfigError, Validator, join
from workloads.security import MECHANISMS, PLAINTEXT, PROTOCOLS, ClientSecurity

KEYS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password_env", "sasl.password_file",
        "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password_env",
        "ssl.key.password_file", "ssl.endpoint.identification.algorithm")
#: secrets as literals: refused, with the keys that say where to read them
LITERAL_SECRETS = {"sasl.password": "sasl.password_env or sasl.password_file",
                   "ssl.key.password": "ssl.key.password_env or ssl.key.password_file"}


@dataclass(frozen=True)
class Secret:
    """Where a secret is read from: an environment variable or a file (its first line)."""
    env: str | None = None
    file: str | None = None

    def read(self, where: str) -> str:
        if self.env:
            v = os.environ.get(self.env)
            if not v:
                raise ConfigError(None, where, f"the environment variable {self.env} is not set (it holds the secret)")
            return v
        assert self.file
        try:
            text = Path(self.file).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(None, where, f"cannot read the secret file {self.file}: {e.strerror}") from None
        return text.splitlines()[0] if text else ""


@dataclass(frozen=True)
class ClientConfig:
    """``kafka_client`` as validated; :meth:`resolve` reads its secrets."""
    protocol: str = "PLAINTEXT"
    mechanism: str | None = None
    username: str | None = None
    password: Secret | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    key_password: Secret | None = None
    verify_hostname: bool = True
    path: str = "all.vars.kafka_client"

    def resolve(self) -> ClientSecurity:
        """The settings with their secrets, for the clients (ConfigError, one line, when a secret
        cannot be read)."""
        if self.protocol == "PLAINTEXT":
            return PLAINTEXT
        return ClientSecurity(
            protocol=self.protocol, mechanism=self.mechanism, username=self.username,
            password=self.password.read(join(self.path, "sasl.password")) if self.password else None,
            ca_file=self.ca_file, cert_file=self.cert_file, key_file=self.key_file,
            key_password=self.key_password.read(join(self.path, "ssl.key.password")) if self.key_password else None,
            verify_hostname=self.verify_hostname)


def parse(c: Validator, value: Any, path: str = "all.vars.kafka_client") -> ClientConfig:
    """Validate an inventory's ``kafka_client`` (one line naming the key at fault)."""
    if value is None:
        return ClientConfig(path=path)
    m = c.mapping(value, path, allow_none=False)
    for k, instead in LITERAL_SECRETS.items():
        if k in m:
            raise c.fail(join(path, k), f"a secret is never written in an inventory: give {instead}")
    c.keys(m, path, list(KEYS))
    protocol = c.string(m.get("security.protocol", "PLAINTEXT"), join(path, "security.protocol"), choices=list(PROTOCOLS))
    sasl, tls = protocol.startswith("SASL_"), protocol.endswith("SSL")

    def opt(key: str) -> str | None:
        return c.string(m[key], join(path, key)) if m.get(key) is not None else None

    def secret(prefix: str, required: bool) -> Secret | None:
        env, file = opt(f"{prefix}_env"), opt(f"{prefix}_file")
        if env and file:
            raise c.fail(join(path, f"{prefix}_file"), f"give {prefix}_env or {prefix}_file, not both")
        if not env and not file:
            if required:
                raise c.fail(join(path, f"{prefix}_env"), f"missing: {protocol} needs a password "
                             f"({prefix}_env: VARIABLE or {prefix}_file: PATH)")
            return None
        return Secret(env=env, file=file)

    mechanism = username = None
    password = None
    if sasl:
        mechanism = c.string(m.get("sasl.mechanism"), join(path, "sasl.mechanism"), choices=list(MECHANISMS))
        username = c.string(m.get("sasl.username"), join(path, "sasl.username"))
        password = secret("sasl.password", True)
    else:
        stray = [k for k in m if k.startswith("sasl.")]
        if stray:
            raise c.fail(join(path, stray[0]), f"security.protocol {protocol} uses no SASL; remove it or use SASL_SSL")
    if not tls:
        stray = [k for k in m if k.startswith("ssl.")]
        if stray:
            raise c.fail(join(path, stray[0]), f"security.protocol {protocol} uses no TLS; remove it or use SSL/SASL_SSL")
    for key in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location"):
        v = opt(key)
        if v and not Path(os.path.expanduser(v)).is_file():
            raise c.fail(join(path, key), f"file {v} not found")
    if bool(opt("ssl.certificate.location")) != bool(opt("ssl.key.location")):
        raise c.fail(join(path, "ssl.key.location"), "mutual TLS needs both ssl.certificate.location and ssl.key.location")
    algo = c.string(m.get("ssl.endpoint.identification.algorithm", "https"),
                    join(path, "ssl.endpoint.identification.algorithm"), choices=["https", "none"])
    return ClientConfig(protocol=protocol, mechanism=mechanism, username=username, password=password,
                        ca_file=_expand(opt("ssl.ca.location")), cert_file=_expand(opt("ssl.certificate.location")),
                        key_file=_expand(opt("ssl.key.location")),
                        key_password=secret("ssl.key.password", False) if tls else None,
                        verify_hostname=algo == "https", path=path)


def _expand(p: str | None) -> str | None:
    return os.path.expanduser(p) if p else None
