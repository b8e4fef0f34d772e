"""A secured embedded Apache Kafka cluster: SASL_SSL (or SSL) listeners from a CA the user gives.

Why the embedded target can be secured: most lab clusters that mirror production listen on
SASL_SSL or SSL only, and faultline's clients must prove on a real Kafka that they reach one
(workloads/security.py, harness/kafka_client.py). The brokers' only listener then is that
protocol, inter-broker traffic too; the controllers keep their own CONTROLLER listener.

- **Certificates**: each node gets a key and a certificate for its own address (subjectAltName
  IP), signed with the CA the user names (``ca_cert``, ``ca_key``), issued by ``openssl`` at start
  (the addresses are only known then); Kafka reads them as PEM stores (``ssl.keystore.type=PEM``,
  KIP-651), so no keytool and no store password.
- **Credentials**: one SASL user (``username``), whose password is read from an environment
  variable (``password_env``) and never written to a file: server.properties says
  ``${env:VAR}`` and Kafka's EnvVarConfigProvider (KIP-887, 3.5+) reads it from the JVM's
  environment; SCRAM credentials are added by the first ``kafka-storage format --add-scram``
  (KIP-900, 3.5+), whose command line is not kept (the inventory's re-format command omits it: a
  disk wipe brings a broker back into a cluster whose metadata already holds them).
- **The clients**: the generated inventory's ``kafka_client`` names the protocol, mechanism, user,
  the same ``password_env`` and the CA, so every client of the run authenticates as that user.
"""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from groundwork.config import ConfigError, Validator, join
from targets.base import InfraError

PROTOCOLS = ("SASL_SSL", "SSL")
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ENV_PROVIDER = {"config.providers": "env",
                "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider"}


@dataclass(frozen=True)
class ListenerSecurity:
    protocol: str
    mechanism: str | None
    username: str | None
    password_env: str | None
    ca_cert: str
    ca_key: str

    @property
    def listener(self) -> str:
        return self.protocol   # the listener's name is its protocol: SASL_SSL://host:9092

    def password(self) -> str:
        v = os.environ.get(self.password_env or "")
        if not v:
            raise ConfigError(None, "apache_kafka.security.password_env",
                              f"the environment variable {self.password_env} is not set (it holds the SASL password)")
        return v

    def jaas(self) -> str:
        """The listener's JAAS line: the broker's own client identity for inter-broker traffic and,
        for PLAIN, the user it accepts - both with the password as ``${env:VAR}``."""
        pw = f'"${{env:{self.password_env}}}"'
        if self.mechanism == "PLAIN":
            return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{self.username}" '
                    f'password={pw} user_{self.username}={pw};')
        return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{self.username}" password={pw};'

    def broker_properties(self, tls_dir: Path) -> dict[str, str]:
        p: dict[str, str] = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(tls_dir / "node.pem"),
                             "ssl.truststore.type": "PEM", "ssl.truststore.location": str(tls_dir / "ca.pem"),
                             "ssl.endpoint.identification.algorithm": "https"}
        if self.protocol == "SASL_SSL":
            mech = str(self.mechanism)
            p.update({**ENV_PROVIDER, "sasl.enabled.mechanisms": mech, "sasl.mechanism.inter.broker.protocol": mech,
                      f"listener.name.{self.listener.lower()}.{mech.lower()}.sasl.jaas.config": self.jaas()})
        return p

    def format_args(self) -> list[str]:
        """``--add-scram`` for the first format of a SCRAM cluster (the password on a command line
        that is run, never stored)."""
        if self.protocol != "SASL_SSL" or not str(self.mechanism).startswith("SCRAM"):
            return []
        return ["--add-scram", f"{self.mechanism}=[name={self.username},password={self.password()}]"]

    def client(self, ca_file: Path) -> dict[str, Any]:
        """The generated inventory's ``kafka_client`` (harness/kafka_client.py): no secret in it."""
        out: dict[str, Any] = {"security.protocol": self.protocol, "ssl.ca.location": str(ca_file)}
        if self.protocol == "SASL_SSL":
            out.update({"sasl.mechanism": self.mechanism, "sasl.username": self.username,
                        "sasl.password_env": self.password_env})
        return out


def parse(c: Validator, value: Any, path: str) -> ListenerSecurity | None:
    """``apache_kafka.security`` of an inventory (one line per mistake)."""
    if value is None:
        return None
    m = c.mapping(value, path, allow_none=False)
    if "password" in m:
        raise c.fail(join(path, "password"), "a secret is never written in an inventory: give password_env")
    c.keys(m, path, ["protocol", "mechanism", "username", "password_env", "ca_cert", "ca_key"],
           required=["protocol", "ca_cert", "ca_key"])
    protocol = c.string(m["protocol"], join(path, "protocol"), choices=list(PROTOCOLS))
    mech = user = env = None
    if protocol == "SASL_SSL":
        mech = c.string(m.get("mechanism"), join(path, "mechanism"), choices=list(MECHANISMS))
        user = c.string(m.get("username"), join(path, "username"))
        env = c.string(m.get("password_env"), join(path, "password_env"))
    files = {}
    for k in ("ca_cert", "ca_key"):
        f = os.path.expanduser(c.string(m[k], join(path, k)))
        if not Path(f).is_file():
            raise c.fail(join(path, k), f"file {f} not found")
        files[k] = str(Path(f).resolve())
    return ListenerSecurity(protocol, mech, user, env, files["ca_cert"], files["ca_key"])


def issue(sec: ListenerSecurity, tls_dir: Path, address: str, name: str) -> None:
    """A key and a certificate for ``address`` signed by the CA, as one PEM keystore
    (``node.pem``: key then certificate) beside the CA's certificate (``ca.pem``)."""
    tls_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(tls_dir, 0o700)
    key, csr, crt, ext = (tls_dir / x for x in ("node.key", "node.csr", "node.crt", "san.cnf"))
    ext.write_text(f"subjectAltName=IP:{address}\n")

    def run(*args: str) -> None:
        p = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            raise InfraError(f"{name}: openssl {args[0]} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")

    run("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(key))
    run("req", "-new", "-key", str(key), "-subj", f"/CN={address}", "-out", str(csr))
    run("x509", "-req", "-in", str(csr), "-CA", sec.ca_cert, "-CAkey", sec.ca_key, "-CAcreateserial",
        "-CAserial", str(tls_dir / "ca.srl"), "-days", "2", "-extfile", str(ext), "-out", str(crt))
    (tls_dir / "node.pem").write_text(key.read_text() + crt.read_text())
    os.chmod(tls_dir / "node.pem", 0o600)
    (tls_dir / "ca.pem").write_text(Path(sec.ca_cert).read_text())
