#!/usr/bin/python3
"""Reads the exposition prometheus_test wrote with Prometheus' own parser
(Debian's python3-prometheus-client) and checks it: every family has HELP
and TYPE, the types, the label values, histogram buckets cumulative and
ending in +Inf == _count, and figures equal to the Stats they came from.
Then it breaks the text in the ways a formatter could and checks that each
break is caught, so a checker that accepts anything cannot pass.

usage: prometheus_parse.py DIR   (DIR holds exposition.txt and expected.json)
"""
import json
import math
import sys

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    sys.exit("prometheus_parse.py: no prometheus_client module for " + sys.executable +
             "; install python3-prometheus-client (./dev deps)")

PREFIX = "synclog_"
COUNTERS = ["appends", "append_bytes", "append_stored_bytes", "syncs", "padding_bytes", "segments_created",
            "segments_recycled", "segments_released", "allocation_stalls",
            "lag_blocked_appends", "failures", "segments_archived", "archive_failures",
            "cdc_segments_linked", "cdc_blocked_appends", "callback_exceptions"]
GAUGES = ["records_per_sync", "max_sync_lag_seconds", "durable_segment", "durable_offset_bytes",
          "disk_bytes", "segment_files", "spare_files", "append_max_seconds",
          "durable_wait_max_seconds", "sync_max_seconds", "allocation_wait_max_seconds",
          "archive_pending_segments", "cdc_bytes"]
HISTOGRAMS = ["append_seconds", "durable_wait_seconds", "sync_seconds",
              "allocation_wait_seconds"]


class Bad(Exception):
    pass


def check(text, expected):
    """Raises Bad (or the parser's ValueError) naming the first problem."""
    want_types = {PREFIX + n: "counter" for n in COUNTERS}
    want_types.update({PREFIX + n: "gauge" for n in GAUGES})
    want_types.update({PREFIX + n: "histogram" for n in HISTOGRAMS})
    families = {}
    for fam in text_string_to_metric_families(text):
        if fam.name in families:
            raise Bad("family %s appears twice" % fam.name)
        families[fam.name] = fam
    if set(families) != set(want_types):
        raise Bad("families differ: missing %s, unexpected %s" %
                  (sorted(set(want_types) - set(families)),
                   sorted(set(families) - set(want_types))))
    for name, fam in families.items():
        if fam.type != want_types[name]:
            raise Bad("%s has type %s, want %s" % (name, fam.type, want_types[name]))
        if not fam.documentation:
            raise Bad("%s has no HELP" % name)
        logs = sorted(s.labels.get("log") for s in fam.samples)
        if set(logs) != set(expected):
            raise Bad("%s: log label values %r, want %r" % (name, set(logs), set(expected)))
        for s in fam.samples:
            if s.labels.get("role") not in ("primary", "replica"):
                raise Bad("%s: role label %r" % (s.name, s.labels.get("role")))
    for name in HISTOGRAMS:
        check_histogram(families[PREFIX + name], expected)
    # The figures themselves, per log.
    by_sample = {}
    for fam in families.values():
        for s in fam.samples:
            if "le" not in s.labels:
                by_sample[(s.name, s.labels["log"])] = s.value
    for log, figures in expected.items():
        for key, value in figures.items():
            got = by_sample.get((PREFIX + key, log))
            if got != value:
                raise Bad("%s{log=%r} is %r, want %r" % (PREFIX + key, log, got, value))
    if expected and all(f["appends_total"] == 0 for f in expected.values()):
        raise Bad("no appends: the test exercised nothing")


def check_histogram(fam, expected):
    per_log = {}
    for s in fam.samples:
        per_log.setdefault(s.labels["log"], []).append(s)
    for log, samples in per_log.items():
        buckets = [(float(s.labels["le"]), s.value) for s in samples
                   if s.name == fam.name + "_bucket"]
        count = [s.value for s in samples if s.name == fam.name + "_count"]
        total = [s.value for s in samples if s.name == fam.name + "_sum"]
        if len(count) != 1 or len(total) != 1:
            raise Bad("%s{log=%r}: want one _count and one _sum" % (fam.name, log))
        if len(buckets) < 2 or buckets[-1][0] != math.inf:
            raise Bad("%s{log=%r}: the last bucket is not le=\"+Inf\"" % (fam.name, log))
        for (le0, v0), (le1, v1) in zip(buckets, buckets[1:]):
            if not le0 < le1:
                raise Bad("%s{log=%r}: bucket bounds not ascending (%g, %g)" %
                          (fam.name, log, le0, le1))
            if v1 < v0:
                raise Bad("%s{log=%r}: bucket le=%g holds %g < %g below it" %
                          (fam.name, log, le1, v1, v0))
        if buckets[-1][1] != count[0]:
            raise Bad("%s{log=%r}: +Inf bucket %g != _count %g" %
                      (fam.name, log, buckets[-1][1], count[0]))
        if total[0] < 0 or (count[0] == 0) != (total[0] == 0):
            raise Bad("%s{log=%r}: _sum %g with _count %g" % (fam.name, log, total[0], count[0]))


def breaks(text):
    """(what, broken text): each must fail check()."""
    lines = text.split("\n")
    type_line = next(i for i, l in enumerate(lines) if l.startswith("# TYPE " + PREFIX + "sync_seconds "))
    help_line = next(i for i, l in enumerate(lines) if l.startswith("# HELP " + PREFIX + "disk_bytes "))
    inf = next(i for i, l in enumerate(lines) if "append_seconds_bucket" in l and "+Inf" in l)
    first_bucket = next(i for i, l in enumerate(lines) if "append_seconds_bucket" in l)
    yield "a TYPE line missing", "\n".join(lines[:type_line] + lines[type_line + 1:])
    yield "a HELP line missing", "\n".join(lines[:help_line] + lines[help_line + 1:])
    yield "the +Inf bucket missing", "\n".join(lines[:inf] + lines[inf + 1:])
    bumped = lines[:]
    name, value = bumped[first_bucket].rsplit(" ", 1)
    bumped[first_bucket] = name + " " + str(int(float(value)) + 10**9)
    yield "a bucket above the next", "\n".join(bumped)
    yield "a summary instead of a histogram", text.replace(
        "# TYPE " + PREFIX + "append_seconds histogram", "# TYPE " + PREFIX + "append_seconds summary")
    yield "an unescaped quote in a label", text.replace('\\"eu', '"eu', 1)
    yield "a label value changed", text.replace('log="orders"', 'log="orderz"', 1)
    changed = lines[:]
    files = next(i for i, l in enumerate(lines) if l.startswith(PREFIX + "segment_files{"))
    name, value = changed[files].rsplit(" ", 1)
    changed[files] = name + " " + str(int(value) + 1)
    yield "a figure changed", "\n".join(changed)
    yield "a role label changed", text.replace('role="replica"', 'role="standby"', 1)


def main():
    directory = sys.argv[1]
    with open(directory + "/exposition.txt", encoding="utf-8") as f:
        text = f.read()
    with open(directory + "/expected.json", encoding="utf-8") as f:
        expected = json.load(f)
    try:
        check(text, expected)
    except (Bad, ValueError) as e:
        print("FAIL: %s/exposition.txt: %s" % (directory, e))
        return 1
    for what, broken in breaks(text):
        try:
            check(broken, expected)
        except (Bad, ValueError, KeyError):
            continue
        print("FAIL: the checker accepted an exposition with %s" % what)
        return 1
    print("ok: %d lines parsed by prometheus_client; %d broken variants rejected" %
          (text.count("\n"), len(list(breaks(text)))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
