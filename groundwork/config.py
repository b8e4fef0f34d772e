"""Loading YAML config safely and reporting what is wrong with it in one line.

Why a module of its own: inventories and campaigns are written by people, often copied
from an existing Ansible inventory. A mistake must give exactly one line naming the file,
the path inside it (``all.children.brokers.hosts.b1.kafka_node_id``) and what was wanted,
never a traceback. Only ``yaml.safe_load`` is used: a document with
``!!python/...`` tags is refused rather than constructed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml


class ConfigError(ValueError):
    """Bad user input: the CLI prints ``str(err)`` (one line) and exits with code 2."""

    def __init__(self, file: str | os.PathLike[str] | None, path: str, want: str):
        self.file, self.path, self.want = str(file) if file else "", path, want
        where = f"{self.file}: " if self.file else ""
        at = f"{path}: " if path else ""
        super().__init__(f"{where}{at}{want}".replace("\n", " "))


def _mark(err: yaml.MarkedYAMLError) -> str:
    m = err.problem_mark or err.context_mark
    return f"line {m.line + 1} column {m.column + 1}" if m is not None else ""


def load_yaml(file: str | os.PathLike[str], what: str = "file") -> Any:
    """Parse one YAML document with the safe loader, turning every failure into ConfigError."""
    p = Path(file)
    if not p.exists():
        raise ConfigError(p, "", f"{what} not found")
    if not p.is_file():
        raise ConfigError(p, "", f"{what} must be a regular file, not a directory")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ConfigError(p, "", f"{what} is not UTF-8 text") from None
    except OSError as e:
        raise ConfigError(p, "", f"cannot read {what}: {e.strerror}") from None
    try:
        return yaml.safe_load(text)
    except yaml.constructor.ConstructorError as e:
        tagged = (e.problem or "").split("tag '")[-1].rstrip("'") if "tag" in (e.problem or "") else ""
        raise ConfigError(p, _mark(e), f"YAML tag {tagged or '(unknown)'} is not allowed; "
                          "write plain YAML values (no objects constructed from tags)") from None
    except yaml.MarkedYAMLError as e:
        problem = (e.problem or e.context or "invalid YAML").strip()
        raise ConfigError(p, _mark(e), f"YAML syntax error: {problem}") from None
    except yaml.YAMLError as e:
        raise ConfigError(p, "", f"YAML error: {str(e).splitlines()[0]}") from None


def type_name(v: Any) -> str:
    if v is None:
        return "nothing (null)"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a mapping"}.get(type(v), type(v).__name__)


class Validator:
    """Validates the values of one config file: small typed accessors that return the value
    or raise ConfigError naming the file and the dotted path."""

    def __init__(self, file: str | os.PathLike[str] | None):
        self.file = file

    def fail(self, path: str, want: str) -> ConfigError:
        return ConfigError(self.file, path, want)

    def mapping(self, v: Any, path: str, *, allow_none: bool = True) -> dict[str, Any]:
        if v is None and allow_none:
            return {}
        if not isinstance(v, dict):
            raise self.fail(path, f"expected a mapping, got {type_name(v)}")
        for k in v:
            if not isinstance(k, str):
                raise self.fail(path, f"keys must be strings, got {type_name(k)} {k!r}")
        return v

    def keys(self, m: dict[str, Any], path: str, allowed: Iterable[str],
             required: Iterable[str] = ()) -> None:
        allowed = list(allowed)
        for k in m:
            if k not in allowed:
                raise self.fail(join(path, k), f"unknown key; expected one of: {', '.join(allowed)}")
        for k in required:
            if k not in m or m[k] is None:
                raise self.fail(join(path, k), "missing required key")

    def string(self, v: Any, path: str, *, choices: Iterable[str] | None = None) -> str:
        if not isinstance(v, str) or not v.strip():
            raise self.fail(path, f"expected a non-empty string, got {type_name(v)}")
        if choices is not None:
            choices = list(choices)
            if v not in choices:
                raise self.fail(path, f"expected one of {', '.join(choices)}, got {v!r}")
        return v

    def boolean(self, v: Any, path: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(path, f"expected true or false, got {type_name(v)} {v!r}")
        return v

    def integer(self, v: Any, path: str, *, min: int | None = None, max: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(path, f"expected an integer, got {type_name(v)} {v!r}")
        if min is not None and v < min:
            raise self.fail(path, f"expected an integer >= {min}, got {v}")
        if max is not None and v > max:
            raise self.fail(path, f"expected an integer <= {max}, got {v}")
        return v

    def number(self, v: Any, path: str, *, min: float | None = None, positive: bool = False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(path, f"expected a number, got {type_name(v)} {v!r}")
        if positive and v <= 0:
            raise self.fail(path, f"expected a number > 0, got {v}")
        if min is not None and v < min:
            raise self.fail(path, f"expected a number >= {min}, got {v}")
        return float(v)

    def str_list(self, v: Any, path: str, *, min_len: int = 0) -> list[str]:
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list):
            raise self.fail(path, f"expected a list of strings, got {type_name(v)}")
        for i, x in enumerate(v):
            self.string(x, f"{path}[{i}]")
        if len(v) < min_len:
            raise self.fail(path, f"expected at least {min_len} item(s)")
        return list(v)

    def scalar(self, v: Any, path: str) -> str | int | float | bool:
        if isinstance(v, (dict, list)) or v is None:
            raise self.fail(path, f"expected a scalar (string, number or boolean), got {type_name(v)}")
        return v


def join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def parse_override(item: str) -> tuple[list[str], Any]:
    """``dotted.key=value`` → (["dotted", "key"], value parsed as a YAML scalar)."""
    if "=" not in item:
        raise ConfigError(None, "--set", f"expected dotted.key=value, got {item!r}")
    key, _, raw = item.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(None, "--set", f"expected dotted.key=value, got {item!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, (dict, list)) and not raw.strip().startswith(("[", "{")):
        value = raw
    return key.split("."), value


def resolve_path(raw: str, *, relative_to: Path, exists: Callable[[Path], bool] = Path.exists) -> Path:
    """A path in a config file: absolute, else relative to the file's folder, else the cwd."""
    p = Path(os.path.expanduser(raw))
    if p.is_absolute():
        return p
    first = (relative_to / p)
    if exists(first):
        return first.resolve()
    second = Path.cwd() / p
    if exists(second):
        return second.resolve()
    return first.resolve()
