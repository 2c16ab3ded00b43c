"""The trace event registry (base/trace.hpp kTraceEvents, which --trace-events accepts) names every
event the simulator's sources emit, and the README's event table documents every registered one:
an event added without both would be refused by --trace-events or undocumented."""

import glob
import os
import re
import unittest

SOURCE = os.environ.get("MMUSIM_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))


def read(path):
    with open(path) as f:
        return f.read()


def registered():
    text = read(os.path.join(SOURCE, "base", "trace.hpp"))
    m = re.search(r"kTraceEvents\[\]\s*=\s*\{(.*?)\};", text, re.S)
    return set(re.findall(r'"([a-z_0-9]+)"', m.group(1)))


def emitted():
    """Event names in the sources: trace_event("name", ...) and trace.event(time, cpu, task, "name", ...)."""
    names = {}
    for d in ("kernel_mm", "os", "models", "platforms", "workloads"):
        for path in glob.glob(os.path.join(SOURCE, d, "**", "*.cpp"), recursive=True):
            text = read(path)
            for m in re.finditer(r'\btrace_event\(\s*"([a-z_0-9]+)"', text):
                names.setdefault(m.group(1), path)
            for m in re.finditer(r'(?:\.|->)event\(', text):
                call = text[m.end():text.find(";", m.end())]
                lits = [x for x in re.findall(r'"([^"]*)"', call) if re.fullmatch(r"[a-z_0-9]+", x)]
                if lits:
                    names.setdefault(lits[0], path)
    return names


def documented():
    text = read(os.path.join(SOURCE, "README.md"))
    names = set()
    for line in text.splitlines():
        m = re.match(r"\|\s*(`[a-z_0-9]+`(?:,\s*`[a-z_0-9]+`)*)\s*\|", line)
        if m:
            names.update(re.findall(r"`([a-z_0-9]+)`", m.group(1)))
    return names


class TraceEventsTest(unittest.TestCase):
    def test_every_emitted_event_is_registered(self):
        reg = registered()
        found = emitted()
        # The scan must find the well-known emitters, else it is broken (and would pass vacuously).
        for name in ("page_fault_user", "tlb_fill", "writeback_start", "block_rq_issue"):
            self.assertIn(name, found)
        missing = {n: p for n, p in found.items() if n not in reg}
        self.assertEqual(missing, {}, "emitted but not in kTraceEvents (--trace-events refuses them)")

    def test_every_registered_event_is_documented(self):
        doc = documented()
        self.assertIn("page_fault_user", doc)
        self.assertEqual(sorted(registered() - doc), [], "in kTraceEvents but not in README's event table")


if __name__ == "__main__":
    unittest.main()
