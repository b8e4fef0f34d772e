"""JUnit XML written with the standard library (``xml.etree``).

Why not junitparser: the report is written by every ``faultline run``, so whatever it needs
must be a runtime dependency, and junitparser was only ever used to *write* a few elements.
The schema is the one Jenkins, GitLab and GitHub Actions read (the "JUnit 10" shape
junitparser writes): ``<testsuites>`` → ``<testsuite name tests failures errors skipped time>``
→ ``<properties>`` and ``<testcase name classname time>`` holding at most one ``<failure>`` or
``<error>`` (``message``, ``type``, text body) and an optional ``<system-out>``. The tests
still parse the result with junitparser, which is what keeps this writer honest.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Case:
    name: str
    classname: str
    time: float = 0.0
    failure: tuple[str, str, str] | None = None   # (message, type, text)
    error: tuple[str, str, str] | None = None     # (message, type, text)
    system_out: str | None = None


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: list[tuple[str, str]] = field(default_factory=list)


def _clean(s: str) -> str:
    """XML 1.0 cannot carry most control characters; a stray one must not break CI's parser."""
    return "".join(ch if ch in "\t\n\r" or ord(ch) >= 0x20 else f"\\x{ord(ch):02x}" for ch in str(s))


def to_element(name: str, suites: list[Suite]) -> ET.Element:
    root = ET.Element("testsuites", name=_clean(name))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for s in suites:
        fails = sum(1 for c in s.cases if c.failure)
        errs = sum(1 for c in s.cases if c.error)
        t = sum(c.time for c in s.cases)
        el = ET.SubElement(root, "testsuite", name=_clean(s.name), tests=str(len(s.cases)), failures=str(fails),
                           errors=str(errs), skipped="0", time=f"{t:.3f}")
        if s.properties:
            props = ET.SubElement(el, "properties")
            for k, v in s.properties:
                ET.SubElement(props, "property", name=_clean(k), value=_clean(v))
        for c in s.cases:
            ce = ET.SubElement(el, "testcase", name=_clean(c.name), classname=_clean(c.classname),
                               time=f"{c.time:.3f}")
            for tag, res in (("failure", c.failure), ("error", c.error)):
                if res is not None:
                    msg, typ, text = res
                    r = ET.SubElement(ce, tag, message=_clean(msg), type=_clean(typ))
                    r.text = _clean(text or msg)
                    break
            if c.system_out:
                ET.SubElement(ce, "system-out").text = _clean(c.system_out)
        totals["tests"] += len(s.cases)
        totals["failures"] += fails
        totals["errors"] += errs
        total_time += t
    for k, v in totals.items():
        root.set(k, str(v))
    root.set("time", f"{total_time:.3f}")
    return root


def write(path: str | Path, name: str, suites: list[Suite]) -> Path:
    """Write the XML atomically (a CI job may pick it up while a suite is still running)."""
    path = Path(path)
    root = to_element(name, suites)
    ET.indent(root)
    tmp = path.with_suffix(path.suffix + ".tmp")
    ET.ElementTree(root).write(tmp, encoding="utf-8", xml_declaration=True)
    tmp.replace(path)
    return path
