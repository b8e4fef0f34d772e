"""The floor every other part of faultline stands on.

Config loading (one-line errors), the run clock, the timeline writer, the heal ledger and the
transports (local, SSH, Docker). Nemeses, workloads and the run loop all use these; this
package imports nothing of faultline above it, so no arrow in the import graph runs back up
from a fault module to the run loop, CLI or report (docs/architecture.md, "Rooms").
"""
