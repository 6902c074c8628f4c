#!/usr/bin/env python3
"""Checks of sciproxy's savepoints (docs/savepoints.md) from Python: the files that
tests/cli/write_savepoints.cpp wrote read with netCDF4 and xarray as documented, a savepoint
written by netCDF4-python verifies against sciproxy's, and the JSON of `sciproxy verify`.

  check_savepoints.py python DIR EXE   DIR/ref.nc through netCDF4 and xarray; a file written
                                       here with netCDF4 compared with it by EXE verify
                                       (exit 77, a skip, without netCDF4 or xarray)
  check_savepoints.py json FILE PASS   the JSON `sciproxy verify --json` wrote, its verdict PASS
                                       (true or false)
"""
import json
import os
import subprocess
import sys

SKIP = 77


def check_python(directory, exe):
    try:
        import netCDF4
        import numpy as np
        import xarray as xr
    except ImportError as error:
        print(f"SKIP: {error}")
        sys.exit(SKIP)
    ref = os.path.join(directory, "ref.nc")

    with netCDF4.Dataset(ref) as ds:
        assert ds.data_model == "NETCDF4", ds.data_model
        assert ds.getncattr("savepoint") == "call-diffusion-exit"
        assert ds.getncattr("savepoint_format") == "sciproxy-savepoint 1"
        assert ds.getncattr("date") == "2021-06-20T12:00:10.000"
        assert ds.getncattr("dtime") == 10.0
        assert ds.getncattr("jstep") == 1 and ds.getncattr("jstep").dtype == np.int64
        linit = ds.getncattr("linit")
        assert linit == 0 and linit.dtype == np.uint8, (linit, linit.dtype)
        assert ds["vn"].dimensions == ("cell", "k") and ds["vn"].dtype == np.float64
        assert ds["mask"].dtype == np.int32
        assert ds["mask"].getncattr("source_layout") == "column_major"

    with xr.open_dataset(ref) as ds:
        assert ds["vn"].dims == ("cell", "k"), ds["vn"].dims
        np.testing.assert_array_equal(ds["vn"].values, np.arange(1.0, 13.0).reshape(4, 3))
        np.testing.assert_array_equal(ds["w"].values, np.zeros(4))
        # Handed over in Fortran order, read as (cell, k) all the same: mask[c, k] = 10 c + k.
        assert ds["mask"].dims == ("cell", "k")
        cells, levels = np.meshgrid(np.arange(4), np.arange(3), indexing="ij")
        np.testing.assert_array_equal(ds["mask"].values, 10 * cells + levels)
        assert ds.attrs["savepoint"] == "call-diffusion-exit"

    # A savepoint written by netCDF4-python in the same form verifies against sciproxy's, and
    # fails where one value is changed.
    def write(path, vn):
        with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
            ds.setncattr("savepoint", "call-diffusion-exit")
            # A variable-length string (NC_STRING), where sciproxy writes text (NC_CHAR).
            ds.setncattr_string("date", "2021-06-20T12:00:10.000")
            ds.setncattr("dtime", 10.0)
            ds.setncattr("jstep", np.int64(1))
            ds.setncattr("linit", np.uint8(0))
            ds.createDimension("cell", 4)
            ds.createDimension("k", 3)
            ds.createVariable("vn", "f8", ("cell", "k"))[:] = vn
            ds.createVariable("w", "f8", ("cell",))[:] = np.zeros(4)
            ds.createVariable("mask", "i4", ("cell", "k"))[:] = 10 * cells + levels

    vn = np.arange(1.0, 13.0).reshape(4, 3)
    same = os.path.join(directory, "from_python.nc")
    write(same, vn)
    run = subprocess.run([exe, "verify", same, ref], capture_output=True, text=True)
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)
    assert "Note:" not in run.stdout, run.stdout  # the same name and metadata, read alike
    assert "PASS: 3 fields within tolerance" in run.stdout, run.stdout
    vn[3, 2] += 1e-3
    changed = os.path.join(directory, "from_python_changed.nc")
    write(changed, vn)
    run = subprocess.run([exe, "verify", changed, ref], capture_output=True, text=True)
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr)
    assert "(cell=3, k=2)" in run.stdout, run.stdout
    print("PASS")


def check_json(path, expected_pass):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc["kind"] == "sciproxy-verify", doc.get("kind")
    assert doc["pass"] is (expected_pass == "true"), doc["pass"]
    assert doc["a"]["savepoint"] == "call-diffusion-exit"
    assert doc["a"]["metadata"]["linit"] is False and doc["a"]["metadata"]["dtime"] == 10.0
    fields = {f["name"]: f for f in doc["fields"]}
    assert sorted(fields) == ["mask", "vn", "w"], sorted(fields)
    vn = fields["vn"]
    assert vn["dims"] == ["cell", "k"] and vn["shape"] == [4, 3], vn
    assert vn["max_abs"] == 0.5 and vn["max_rel"] == 0.0625, vn
    assert vn["worst_index"] == [2, 1], vn
    assert vn["furthest_index"] == (None if expected_pass == "true" else [2, 1]), vn
    assert fields["w"]["worst_index"] is None and fields["w"]["max_abs"] == 0
    assert doc["fields_failed"] == (0 if expected_pass == "true" else 1), doc["fields_failed"]
    print("PASS")


def main(argv):
    if len(argv) == 4 and argv[1] == "python":
        check_python(argv[2], argv[3])
    elif len(argv) == 4 and argv[1] == "json":
        check_json(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
