"""Reading mmusim's ftrace-text event trace (base/trace.cpp).

  # tracer: nop                                            <- header lines start with '#'
  <comm>-<pid> [<cpu>] ..... <sec>.<nsec>: <event>: key=value key="a value" ...

An Event keeps its line number, task, cpu, time in ns, name and its fields (an ordered tuple of
(key, value) strings, values unquoted).
"""

import re

_LINE = re.compile(
    r"^\s*(?P<comm>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+(?P<flags>\S+)\s+"
    r"(?P<sec>\d+)\.(?P<frac>\d+):\s+(?P<event>[A-Za-z0-9_]+):(?P<rest>.*)$")
_FIELD = re.compile(r'\s+(?P<key>[A-Za-z0-9_]+)=(?:"(?P<q>[^"\n]*)"|(?P<v>[^\s"=]+))')


class TraceParseError(Exception):
    def __init__(self, path, lineno, line, why):
        self.path, self.lineno, self.line, self.why = path, lineno, line, why
        shown = line if len(line) <= 160 else line[:157] + "..."
        super().__init__(f"{path}:{lineno}: {why}: {shown!r}")


class Event:
    __slots__ = ("lineno", "comm", "pid", "cpu", "time_ns", "name", "fields")

    def __init__(self, lineno, comm, pid, cpu, time_ns, name, fields):
        self.lineno = lineno
        self.comm = comm
        self.pid = pid
        self.cpu = cpu
        self.time_ns = time_ns
        self.name = name
        self.fields = fields

    def field(self, key, default=None):
        for k, v in self.fields:
            if k == key:
                return v
        return default

    def key(self, with_time=False, ignore_fields=()):
        f = self.fields if not ignore_fields else tuple(
            (k, v) for k, v in self.fields if k not in ignore_fields)
        base = (self.comm, self.pid, self.cpu, self.name, f)
        return base + (self.time_ns,) if with_time else base

    def format(self):
        sec, ns = divmod(self.time_ns, 1_000_000_000)
        fields = " ".join(f'{k}="{v}"' if (v == "" or " " in v) else f"{k}={v}"
                          for k, v in self.fields)
        return f"{self.comm}-{self.pid} [{self.cpu:03d}] {sec}.{ns:09d}: {self.name}: {fields}"


def parse_fields(rest):
    """key=value pairs of the rest of an event line; None if something is left that is not one."""
    fields = []
    pos = 0
    while pos < len(rest):
        m = _FIELD.match(rest, pos)
        if not m:
            if rest[pos:].strip() == "":
                break
            return None
        v = m.group("q") if m.group("q") is not None else m.group("v")
        fields.append((m.group("key"), v))
        pos = m.end()
    return tuple(fields)


def parse_line(line):
    """An Event (lineno 0) or None if the line is not an event line."""
    m = _LINE.match(line)
    if not m:
        return None
    fields = parse_fields(m.group("rest"))
    if fields is None:
        return None
    frac = m.group("frac")
    ns = int((frac + "000000000")[:9])
    return Event(0, m.group("comm"), int(m.group("pid")), int(m.group("cpu")),
                 int(m.group("sec")) * 1_000_000_000 + ns, m.group("event"), fields)


def read_trace(path):
    """All events of a trace file. Raises OSError if it cannot be read and TraceParseError naming
    the line that is not a header, blank or event line (a last line without its newline is
    reported as truncated)."""
    events = []
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        lineno = data[:e.start].count(b"\n") + 1
        raise TraceParseError(path, lineno, data.split(b"\n")[lineno - 1].decode("utf-8", "replace"),
                              "not UTF-8 text")
    if text.lstrip().startswith(("{", "[")):
        raise TraceParseError(path, 1, text.split("\n", 1)[0],
                              "this is JSON (a --trace-format perfetto trace?); tracediff reads "
                              "the ftrace text format")
    lines = text.split("\n")
    truncated_last = not text.endswith("\n") and text != ""
    if text.endswith("\n"):
        lines.pop()
    for n, line in enumerate(lines, 1):
        if line.startswith("#") or line.strip() == "":
            continue
        if truncated_last and n == len(lines):
            raise TraceParseError(path, n, line, "truncated line (no newline at the end of the file)")
        ev = parse_line(line)
        if ev is None:
            raise TraceParseError(path, n, line, "cannot parse as an event line "
                                  "'<comm>-<pid> [<cpu>] <flags> <sec>.<nsec>: <event>: key=value ...'")
        ev.lineno = n
        events.append(ev)
    return events
