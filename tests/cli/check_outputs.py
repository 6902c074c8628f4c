#!/usr/bin/env python3
"""tests/cli/check_outputs.py: checks the files the CLI tests wrote (JSON shape, PNG signature)."""
import json
import sys


def main(kind, paths):
    if kind == "png":
        for path in paths:
            with open(path, "rb") as f:
                if f.read(8) != b"\x89PNG\r\n\x1a\n":
                    sys.exit(f"{path}: not a PNG file")
        return
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if kind == "bench":
            assert doc["kind"] == "sciproxy-bench", doc.get("kind")
            assert doc["results"], "no results"
            assert "environment" in doc and "git_commit" in doc["environment"]
            for r in doc["results"]:
                assert r["gmacs"] > 0 and r["median_s"] > 0, r
        elif kind == "parstack":
            assert doc["kernel"] == "parstack"
            assert doc["verification"]["pass"] is True, doc["verification"]
            assert doc["bench"]["repetitions"] >= 1
            assert "environment" in doc
        elif kind == "scalar":
            assert doc["kernel"] in ("scalar", "scalar_gradient"), doc["kernel"]
            assert doc["verification"]["pass"] is True, doc["verification"]
            assert doc["performance"]["gpoints_per_s"] > 0, doc["performance"]
            assert doc["step_ratio"] >= 1 and doc["bench"]["repetitions"] >= 1
            assert "environment" in doc
        elif kind == "demo":
            assert doc["kind"] == "sciproxy-demo" and doc["pass"] is True
            assert len(doc["summary"]) >= 8, len(doc["summary"])
        elif kind == "info":
            assert "reference" in doc["backends"] and doc["openmp_threads"] >= 1
        else:
            sys.exit(f"unknown kind {kind}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
