"""Checks of `sciproxy simulate` and `sciproxy spex` outputs, in plain Python (no FITS library):
the frame's HDUs, types and shapes, its flux, the run's JSON, and that a write that fails leaves
nothing behind.

  check_specex.py frame FRAME NSPEC NWAVE [JSON]   the frame (and spex's --json record)
  check_specex.py model MODEL                       the model image: a 4128 x 4114 IMAGE
  check_specex.py limited DIR EXE ARGS...           EXE ARGS under a 4 KiB file-size limit must
                                                    fail (exit 1, one error line) and leave no
                                                    file in DIR beyond those there before
  check_specex.py interrupt DIR EXE ARGS...         EXE ARGS, sent SIGINT a second after it
                                                    starts, must stop with exit status 130 and
                                                    leave no file in DIR
  check_specex.py clean DIR                         no temporary file (".*.tmp*") left in DIR
"""
import json
import math
import os
import resource
import signal
import struct
import subprocess
import sys
import time

BLOCK = 2880


def hdus(path):
    """[(header dict, data offset, data bytes)] of every HDU of a FITS file."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        header, keys = {}, []
        while True:
            block = data[pos:pos + BLOCK]
            if len(block) < BLOCK:
                raise SystemExit(f"{path}: truncated header at byte {pos}")
            pos += BLOCK
            done = False
            for i in range(0, BLOCK, 80):
                card = block[i:i + 80].decode("ascii")
                key = card[:8].strip()
                if key == "END":
                    done = True
                    break
                if card[8:10] == "= ":
                    value = card[10:].split("/")[0].strip() if "'" not in card[10:] else \
                        card[10:].split("'")[1].rstrip()
                    header[key] = value
                    keys.append(key)
            if done:
                break
        bitpix = abs(int(header["BITPIX"]))
        naxis = int(header["NAXIS"])
        size = 0
        if naxis > 0:
            size = bitpix // 8
            for k in range(1, naxis + 1):
                size *= int(header[f"NAXIS{k}"])
            size = (size + int(header.get("PCOUNT", 0))) * int(header.get("GCOUNT", 1))
        out.append((header, pos, size))
        pos += (size + BLOCK - 1) // BLOCK * BLOCK
    if pos != len(data):
        raise SystemExit(f"{path}: {len(data)} bytes, the HDUs end at {pos}")
    return out


def shape(header):
    return [int(header[f"NAXIS{k}"]) for k in range(int(header["NAXIS"]), 0, -1)]


def check(condition, message):
    if not condition:
        raise SystemExit("FAIL: " + message)


def check_frame(path, nspec, nwave, json_path=None):
    h = hdus(path)
    names = [x[0].get("EXTNAME", "").strip() for x in h]
    check(names == ["FLUX", "IVAR", "MASK", "WAVELENGTH", "RESOLUTION", "CHI2PIX"],
          f"HDUs {names}")
    by = {n: x for n, x in zip(names, h)}
    for name, bitpix in [("FLUX", -32), ("IVAR", -32), ("MASK", 32), ("CHI2PIX", -32)]:
        check(int(by[name][0]["BITPIX"]) == bitpix, f"{name} BITPIX {by[name][0]['BITPIX']}")
        check(shape(by[name][0]) == [nspec, nwave], f"{name} shape {shape(by[name][0])}")
    flux_header = by["FLUX"][0]
    check(flux_header["BUNIT"] == "electron/Angstrom", f"BUNIT {flux_header['BUNIT']!r}")
    check(int(flux_header["NSPEC"]) == nspec and int(flux_header["SPECMIN"]) == 0,
          "SPECMIN, NSPEC")
    check(flux_header["CAMERA"] == "r0", f"CAMERA {flux_header.get('CAMERA')!r}")
    check(int(by["WAVELENGTH"][0]["BITPIX"]) == -64 and shape(by["WAVELENGTH"][0]) == [nwave],
          "WAVELENGTH")
    res = shape(by["RESOLUTION"][0])
    check(len(res) == 3 and res[0] == nspec and res[2] == nwave and res[1] % 2 == 1,
          f"RESOLUTION shape {res}")
    header, offset, size = by["FLUX"]
    with open(path, "rb") as f:
        f.seek(offset)
        flux = struct.unpack(f">{nspec * nwave}f", f.read(size))
    header, offset, size = by["WAVELENGTH"]
    with open(path, "rb") as f:
        f.seek(offset)
        wave = struct.unpack(f">{nwave}d", f.read(size))
    check(all(math.isfinite(x) for x in flux), "FLUX not finite")
    # simulate's continuum is 100 (0.5 + u) photons per 1 A bin, plus lines: the median
    # extracted flux is between 50 and 150 electrons per Angstrom, within the noise.
    median = sorted(flux)[len(flux) // 2]
    check(40 < median < 200, f"median flux {median}")
    check(abs(wave[1] - wave[0] - 1.0) < 1e-9, f"wavelength step {wave[1] - wave[0]}")
    if json_path:
        with open(json_path) as f:
            j = json.load(f)
        check(j["command"] == "spex" and j["nspec"] == nspec, "json command, nspec")
        check(j["wavelengths"]["nwave"] == nwave, "json nwave")
        check(j["npatches"] >= 1 and j["patches_per_s"] > 0 and j["frames_per_hour"] > 0,
              "json rates")
        check("environment" in j and isinstance(j["timers"], list), "json environment, timers")
    print(f"PASS: {path}: {names}, flux median {median:.1f}")


def check_model(path):
    h = hdus(path)
    check(len(h) == 2 and h[1][0].get("EXTNAME") == "IMAGE", "model HDUs")
    # A tile-compressed image: its shape is in ZNAXISn.
    z = h[1][0]
    check(z.get("ZIMAGE") == "T" and int(z["ZBITPIX"]) == -32, "model: a compressed float32 image")
    check([int(z["ZNAXIS2"]), int(z["ZNAXIS1"])] == [4128, 4114], "model shape")
    print(f"PASS: {path}")


def limited(directory, argv):
    before = set(os.listdir(directory))

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    p = subprocess.run(argv, preexec_fn=limit, capture_output=True, text=True, timeout=300)
    after = set(os.listdir(directory))
    check(p.returncode == 1, f"exit status {p.returncode}, stderr {p.stderr!r}")
    lines = p.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("sciproxy: error: "), f"stderr {p.stderr!r}")
    check("could not write" in lines[0], f"the error: {lines[0]}")
    check(after == before, f"files left behind: {sorted(after - before)}")
    print(f"PASS: {lines[0]}")


def interrupt(directory, argv):
    before = set(os.listdir(directory))
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()  # the command's first line: it has started
    check(first.startswith("sciproxy spex:"), f"first line {first!r}")
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    try:
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise SystemExit("FAIL: still running 30 s after SIGINT")
    check(p.returncode == 130, f"exit status {p.returncode}, stderr {err!r}")
    check("interrupted by SIGINT" in err, f"stderr {err!r}")
    after = set(os.listdir(directory))
    check(after == before, f"files left behind: {sorted(after - before)}")
    print(f"PASS: {err.strip()}")


def clean(directory):
    left = [n for n in os.listdir(directory) if ".tmp" in n]
    check(not left, f"temporary files left: {left}")
    print("PASS: no temporary file left")


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "frame":
        check_frame(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                    sys.argv[5] if len(sys.argv) > 5 else None)
    elif kind == "model":
        check_model(sys.argv[2])
    elif kind == "limited":
        limited(sys.argv[2], sys.argv[3:])
    elif kind == "interrupt":
        interrupt(sys.argv[2], sys.argv[3:])
    elif kind == "clean":
        clean(sys.argv[2])
    else:
        raise SystemExit(f"unknown kind {kind}")
