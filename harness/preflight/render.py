"""The preflight report as the terminal shows it: one rich table (host x check) and one line
per problem with its fix. Shared by ``faultline preflight`` and ``faultline suite`` (which runs
preflight first), so both print the same table."""
from __future__ import annotations

from rich.table import Table
from rich.text import Text

from harness.preflight.model import COLUMNS, FAIL, OK, SKIP, WARN, Report

STYLE = {OK: "green", WARN: "yellow", FAIL: "bold red", SKIP: "dim"}


def table(rep: Report) -> Table:
    t = Table(title=f"preflight {rep.inventory} ({'embedded' if rep.embedded else rep.transport})",
              title_justify="left", show_lines=False, pad_edge=False)
    t.add_column("host", no_wrap=True)
    t.add_column("role", no_wrap=True)
    for c in COLUMNS:
        t.add_column(c, overflow="fold")
    for h in rep.hosts:
        cells = []
        for c in COLUMNS:
            chk = h.checks[c]
            cells.append(Text.assemble((chk.status, STYLE[chk.status]), f" {chk.summary}" if chk.summary != "-" else ""))
        t.add_row(h.name, h.role, *cells)
    return t


def lines(rep: Report) -> list[str]:
    """``FAIL host check: problem; fix: what to do`` for every problem, FAILs first."""
    out = []
    for host, col, i in rep.problems():
        where = f"{host} {col}" if host else col
        out.append(f"{i.status} {where}: {i.problem}" + (f"; fix: {i.fix}" if i.fix else ""))
    return out


def summary(rep: Report) -> str:
    probs = rep.problems()
    fails = [(h, c) for h, c, i in probs if i.status == FAIL]
    warns = sum(1 for _, _, i in probs if i.status == WARN)
    if fails:
        where = ", ".join(dict.fromkeys(f"{h} {c}" if h else c for h, c in fails))
        return f"preflight: {len(fails)} problem(s) stop a run on {rep.inventory}: {where}"
    return f"preflight: a run on {rep.inventory} can work" + (f" ({warns} warning(s))" if warns else "")
