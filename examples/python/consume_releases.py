#!/usr/bin/env python3
"""Read dpstream releases from a Kafka topic, check them and print them.

A small downstream consumer in another language than the operator: it reads
the output topic of `dpstream run` (or `dpstream demo --brokers ...`) with
kafka-python, decodes each message with msgpack, checks it against the
release format (docs/formats.md, "Release messages"), and prints one table row per
value, or with --json one JSON object per release.

    pip install -r requirements.txt
    python3 consume_releases.py --brokers 127.0.0.1:9092 --topic dpstream.releases

Exit status: 0 when every release read is valid (and, with --expect N, at
least N distinct releases were read), 1 when a release is invalid, 2 when
fewer than --expect releases arrived before --timeout.

A release is one aggregate of one group in one window; the values are
already differentially private, so this consumer may store, join and plot
them freely. Re-published releases (after an operator restart) have the
same key and identical bytes: keep the first of each key.
"""

import argparse
import json
import math
import sys
import time

import msgpack
from kafka import KafkaConsumer, TopicPartition

# The release format version this consumer reads (schema.SchemaVersion).
SCHEMA_VERSION = 1

# The series each kind of release carries, in order (schema.Kind).
SERIES_OF = {
    "histogram": ["counts"],
    "count": ["count"],
    "sum": ["sum"],
    "mean": ["sum", "count", "mean"],
    "units": ["units"],
    "variance": ["count", "sum", "sum_sq", "variance", "stddev"],
    "quantiles": ["quantiles", "rank_error"],
}

# Kinds whose releases may end with a "running" series (windows.running):
# the group's running total since the horizon started, over "windows"
# windows (post-processing of the released window values, no noise of its
# own; its interval is a valid, conservative bound on the summed noise).
RUNNING_KINDS = ("count", "sum")

# Kinds whose series carry one labelled value per bucket (histogram) or per
# requested rank (quantiles, labels like "0.5"); every other kind has one
# unlabelled value per series.
LABELLED_KINDS = ("histogram", "quantiles")

# The series a table row shows per kind (default: the last one): the mean
# and variance releases carry their noised inputs too.
SHOWN_SERIES = {"variance": "stddev", "quantiles": "quantiles"}

# Top-level keys every release has (unknown extra keys are allowed: later
# versions may add keys without changing the version).
REQUIRED_KEYS = [
    "schema_version", "release_id", "key", "window_start", "window_end",
    "aggregate", "kind", "group", "series", "epsilon", "delta",
    "spent_epsilon", "spent_delta", "horizon_start", "horizon_end",
    "horizon_epsilon", "horizon_delta", "privacy_unit", "event_level",
    "bounds", "instance", "note",
]

SERIES_KEYS = [
    "name", "mechanism", "scale", "sensitivity", "value_type", "labels",
    "values", "ci_level", "ci_lo", "ci_hi",
]


class InvalidRelease(Exception):
    """A message that is not a valid dpstream release."""


def escape_key_part(part):
    """Escape one key part as schema.ReleaseKey does: '%', '|' and the
    control bytes 0x00-0x1f, 0x7f of its UTF-8 bytes become %XX (upper-case
    hex); every other byte, multi-byte UTF-8 sequences included, is kept."""
    out = bytearray()
    for byte in part.encode("utf-8"):
        if byte in (0x25, 0x7C) or byte < 0x20 or byte == 0x7F:
            out += b"%%%02X" % byte
        else:
            out.append(byte)
    return out.decode("utf-8")


def release_key(release_id, aggregate, group_values):
    """The Kafka message key of a release (schema.ReleaseKey)."""
    parts = [release_id, aggregate] + list(group_values)
    return "|".join(escape_key_part(p) for p in parts)


def finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_release(rel, msg_key):
    """Raise InvalidRelease if rel (a decoded msgpack map) breaks the format."""
    if not isinstance(rel, dict):
        raise InvalidRelease("not a map")
    if rel.get("schema_version") != SCHEMA_VERSION:
        raise InvalidRelease("schema_version %r, this consumer reads %d"
                             % (rel.get("schema_version"), SCHEMA_VERSION))
    missing = [k for k in REQUIRED_KEYS if k not in rel]
    if missing:
        raise InvalidRelease("missing keys: " + ", ".join(missing))
    values = [g["value"] for g in rel["group"]]
    key = release_key(rel["release_id"], rel["aggregate"], values)
    if rel["key"] != key:
        raise InvalidRelease("key %r does not match release_id, aggregate and group (%r)" % (rel["key"], key))
    if msg_key is not None and msg_key != key:
        raise InvalidRelease("message key %r differs from the release key %r" % (msg_key, key))
    if not rel["window_start"] < rel["window_end"]:
        raise InvalidRelease("empty window")
    for name in ("epsilon", "spent_epsilon"):
        if not (finite(rel[name]) and rel[name] > 0):
            raise InvalidRelease(name + " must be finite and > 0")
    for name in ("delta", "spent_delta"):
        if not (finite(rel[name]) and 0 <= rel[name] < 1):
            raise InvalidRelease(name + " must be in [0, 1)")
    want = SERIES_OF.get(rel["kind"])
    if want is None:
        raise InvalidRelease("unknown kind %r" % rel["kind"])
    names = [s.get("name") for s in rel["series"]]
    if rel["kind"] in RUNNING_KINDS and names == want + ["running"]:
        want = want + ["running"]
        run = rel["series"][-1]
        if not (isinstance(run.get("windows"), int) and run["windows"] >= 1):
            raise InvalidRelease("running series: windows must be an integer >= 1")
    if names != want:
        raise InvalidRelease("a %s release has series %s, got %s" % (rel["kind"], want, names))
    for s in rel["series"]:
        missing = [k for k in SERIES_KEYS if k not in s]
        if missing:
            raise InvalidRelease("series %s lacks %s" % (s["name"], ", ".join(missing)))
        vals, lo, hi = s["values"], s["ci_lo"], s["ci_hi"]
        if not vals or len(lo) != len(vals) or len(hi) != len(vals):
            raise InvalidRelease("series %s: %d values, %d lower and %d upper bounds"
                                 % (s["name"], len(vals), len(lo), len(hi)))
        if rel["kind"] in LABELLED_KINDS and len(s["labels"]) != len(vals):
            raise InvalidRelease("series %s: %d labels for %d values" % (s["name"], len(s["labels"]), len(vals)))
        if rel["kind"] not in LABELLED_KINDS and (len(vals) != 1 or s["labels"]):
            raise InvalidRelease("series %s: a %s release has one unlabelled value" % (s["name"], rel["kind"]))
        if s["value_type"] == "int" and not all(isinstance(v, int) for v in vals):
            raise InvalidRelease("series %s: value_type int with a non-integer value" % s["name"])
        if not 0 < s["ci_level"] < 1:
            raise InvalidRelease("series %s: ci_level %r" % (s["name"], s["ci_level"]))
        if not finite(s["scale"]) or s["scale"] < 0:
            raise InvalidRelease("series %s: scale %r" % (s["name"], s["scale"]))
        for v, a, b in zip(vals, lo, hi):
            if not (finite(v) and finite(a) and finite(b) and a <= v <= b):
                raise InvalidRelease("series %s: value %r outside its interval [%r, %r]" % (s["name"], v, a, b))


def consume(args):
    """Yield (message, decoded release or InvalidRelease) until done."""
    consumer = KafkaConsumer(
        bootstrap_servers=args.brokers.split(","),
        client_id="dpstream-python-example",
        group_id=args.group,  # None: no group, no commits (read everything)
        auto_offset_reset="earliest",
        enable_auto_commit=args.group is not None,
        consumer_timeout_ms=int(args.idle * 1000),
    )
    try:
        if args.group is None:
            deadline = time.monotonic() + args.timeout
            parts = None
            while not parts:
                parts = consumer.partitions_for_topic(args.topic)
                if time.monotonic() > deadline:
                    raise SystemExit("topic %s not found on %s" % (args.topic, args.brokers))
                if not parts:
                    time.sleep(0.2)
            consumer.assign([TopicPartition(args.topic, p) for p in sorted(parts)])
            consumer.seek_to_beginning()
        else:
            consumer.subscribe([args.topic])
        deadline = time.monotonic() + args.timeout
        while time.monotonic() < deadline:
            got = False
            for msg in consumer:  # stops after --idle seconds without messages
                got = True
                try:
                    rel = msgpack.unpackb(msg.value, raw=False, strict_map_key=True)
                    check_release(rel, msg.key.decode("utf-8") if msg.key is not None else None)
                    yield msg, rel
                except (InvalidRelease, ValueError, TypeError, KeyError,
                        msgpack.UnpackException) as err:
                    yield msg, InvalidRelease(str(err))
                if time.monotonic() >= deadline:
                    return
            if not got and args.expect is None:
                return  # idle and nothing to wait for
            yield None, None  # idle: let the caller decide whether to stop
    finally:
        consumer.close()


def check_files(paths):
    """Check release messages stored one per file; print one JSON line each."""
    bad = 0
    for path in paths:
        with open(path, "rb") as f:
            data = f.read()
        try:
            rel = msgpack.unpackb(data, raw=False, strict_map_key=True)
            check_release(rel, None)
        except (InvalidRelease, ValueError, TypeError, KeyError, msgpack.UnpackException) as err:
            bad += 1
            print("invalid release in %s: %s" % (path, err), file=sys.stderr)
            continue
        print(json.dumps({"file": path, "kind": rel["kind"], "key": rel["key"],
                          "series": {s["name"]: s["values"] for s in rel["series"]}}, sort_keys=True))
    return 1 if bad else 0


def number_format(series):
    """The %-format for a series' values: integers as integers; real values
    with enough decimals that the narrowest interval's width shows about
    three significant digits (a mean of 0.2034 with interval [0.1934,
    0.2134] prints as 0.2034, not 0.2 [0.2, 0.2]), at most 6."""
    if series["value_type"] == "int":
        return "%.0f"
    widths = [hi - lo for lo, hi in zip(series.get("ci_lo") or [], series.get("ci_hi") or [])
              if finite(lo) and finite(hi) and hi > lo]
    if not widths:
        return "%.4g"
    decimals = 2 - math.floor(math.log10(min(widths)))
    return "%%.%df" % max(0, min(6, decimals))


def iso(ms):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--brokers", default="127.0.0.1:9092", help="bootstrap brokers, comma-separated")
    ap.add_argument("--topic", help="the dpstream output topic (required unless --file)")
    ap.add_argument("--group", default=None, help="consumer group id (default: none, read from the start)")
    ap.add_argument("--expect", type=int, default=None, help="stop after this many distinct releases")
    ap.add_argument("--timeout", type=float, default=60, help="give up after this many seconds")
    ap.add_argument("--idle", type=float, default=2, help="without --expect, stop after this many idle seconds")
    ap.add_argument("--json", action="store_true", help="print one JSON object per release")
    ap.add_argument("--file", nargs="+", default=None,
                    help="check release messages stored in files (e.g. schema/testdata/*.msgpack) instead of reading Kafka")
    args = ap.parse_args(argv)
    if args.file:
        return check_files(args.file)
    if not args.topic:
        ap.error("--topic is required (or --file)")

    seen = set()
    invalid = 0
    if not args.json:
        print("%-20s %-22s %-10s %-10s %12s  %-27s %s" % (
            "WINDOW START", "GROUP", "AGGREGATE", "BUCKET", "VALUE", "CI", "MECHANISM (SCALE)"))
    for msg, rel in consume(args):
        if msg is None:
            if args.expect is not None and len(seen) >= args.expect:
                break
            continue
        where = "%s/%d@%d" % (msg.topic, msg.partition, msg.offset)
        if isinstance(rel, InvalidRelease):
            invalid += 1
            print("invalid release at %s: %s" % (where, rel), file=sys.stderr)
            continue
        if rel["key"] in seen:
            continue  # a re-published release: identical bytes by design
        seen.add(rel["key"])
        if args.json:
            out = {k: rel[k] for k in ("key", "release_id", "window_start", "window_end", "aggregate",
                                       "kind", "epsilon", "delta", "privacy_unit")}
            out["group"] = {g["name"]: g["value"] for g in rel["group"]}
            out["series"] = [{k: s[k] for k in ("name", "mechanism", "scale", "labels", "values",
                                                "ci_level", "ci_lo", "ci_hi", "windows") if k in s}
                             for s in rel["series"]]
            print(json.dumps(out, sort_keys=True), flush=True)
        else:
            group = ",".join("%s=%s" % (g["name"], g["value"]) for g in rel["group"]) or "-"
            # The mean and variance releases carry their noised inputs
            # too; show the derived value.
            shown = SHOWN_SERIES.get(rel["kind"])
            plain = [s for s in rel["series"] if s["name"] != "running"]
            series = next((s for s in plain if s["name"] == shown), plain[-1])
            num = number_format(series)
            mech = series["mechanism"]
            if mech != "derived":
                mech += " (%g)" % series["scale"]
            for i, v in enumerate(series["values"]):
                bucket = series["labels"][i] if series["labels"] else ""
                ci = "[" + num % series["ci_lo"][i] + ", " + num % series["ci_hi"][i] + "]"
                print("%-20s %-22s %-10s %-10s %12s  %-27s %s" % (
                    iso(rel["window_start"]), group, rel["aggregate"], bucket, num % v, ci, mech))
            for run in (s for s in rel["series"] if s["name"] == "running"):
                # The running total since the horizon started.
                ci = "[" + num % run["ci_lo"][0] + ", " + num % run["ci_hi"][0] + "]"
                print("%-20s %-22s %-10s %-10s %12s  %-27s %s" % (
                    iso(rel["window_start"]), group, rel["aggregate"], "running", num % run["values"][0], ci,
                    "derived (%d windows)" % run["windows"]))
        if args.expect is not None and len(seen) >= args.expect:
            break
    print("%d releases read, %d invalid" % (len(seen), invalid), file=sys.stderr)
    if invalid:
        return 1
    if args.expect is not None and len(seen) < args.expect:
        print("expected %d releases" % args.expect, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
