#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU: validates every CUDA kernel in one go.
#   1 setup      scripts/setup.sh (installs what is missing; failure is recorded, the rest goes on)
#   2 configure  cmake --preset cuda
#   3 build      cmake --build --preset cuda
#   4 test       ctest -L gpu (every test labelled gpu)
#   5 memcheck   compute-sanitizer --tool memcheck on each gpu test executable
#   6 racecheck  compute-sanitizer --tool racecheck on each gpu test executable
#   7 bench      sciproxy bench <kind> --device cuda --json, for every kind `sciproxy bench` offers
#   8 demo       sciproxy demo --json (every kernel on cpu and every GPU, verified)
# Writes gpu-check/gpu-check.json (each step's status, seconds, command and log, the environment,
# the bench and demo JSON embedded), gpu-check/summary.txt, gpu-check/logs/ and
# gpu-check/logs.tar.gz. Every step runs even when an earlier one failed (those that need the
# build are skipped when it failed); the exit status is 1 when anything failed or was skipped.
#
#   scripts/gpu-check.sh [--dry-run] [--steps LIST] [--out DIR] [--build-dir DIR] [--bundle FILE]
#     --dry-run       print the steps and their commands, run nothing (works without a GPU)
#     --bundle FILE   a build made elsewhere by scripts/gpu-bundle.sh, for a GPU machine without
#                     sciproxy's build dependencies or a package archive: unpacked into the build
#                     folder; the steps are then test, memcheck, racecheck, bench and demo, the
#                     test step runs each gpu test executable itself, and the bundle's libraries
#                     fill in what the machine's own lack (LD_LIBRARY_PATH, the machine's first)
#     --steps LIST    comma-separated subset, e.g. build,test (default: all eight); the build
#                     folder of an earlier run is reused, so a session with short commands can
#                     run configure,build first and test,memcheck,racecheck,bench,demo next
#     --out DIR       where the results go (default: gpu-check)
#     --build-dir DIR the cuda preset's build folder (default: build/cuda)
# Environment: GPU_CHECK_BENCH_ARGS (extra arguments for every bench, e.g. "--reps 3"),
# GPU_CHECK_SANITIZER_TIMEOUT (seconds per executable and tool, default 1800; on an H100 racecheck
# needs more than 80 s for test_wave_cuda, test_wave_born_cuda and test_specex_cuda),
# GPU_CHECK_SANITIZER_FILTER (a GoogleTest filter for the sanitizer runs, e.g. '*3D*'), GPU_CHECK_DEBS
# (a folder of .deb files unpacked into / before setup: the Debian build dependencies, downloaded
# elsewhere with `apt-get download`, for a machine that cannot reach a package archive).
# A failed setup is a warning (a machine without network cannot install, yet may have all it
# needs); the configure step says what is missing if it has not.
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root" || exit 2

all_steps=(setup configure build test memcheck racecheck bench demo)
steps_arg=""
out="gpu-check"
build="build/cuda"
dry_run=0
bundle=""
while (($#)); do
  case "$1" in
    --dry-run) dry_run=1 ;;
    --steps) steps_arg="${2:?--steps needs a list}"; shift ;;
    --steps=*) steps_arg="${1#*=}" ;;
    --out) out="${2:?--out needs a folder}"; shift ;;
    --out=*) out="${1#*=}" ;;
    --build-dir) build="${2:?--build-dir needs a folder}"; shift ;;
    --build-dir=*) build="${1#*=}" ;;
    --bundle) bundle="${2:?--bundle needs a file}"; shift ;;
    --bundle=*) bundle="${1#*=}" ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: error: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
selected=("${all_steps[@]}")
[ -n "$bundle" ] && selected=(test memcheck racecheck bench demo)
if [ -n "$steps_arg" ]; then
  IFS=',' read -r -a selected <<<"$steps_arg"
  for s in "${selected[@]}"; do
    case " ${all_steps[*]} " in
      *" $s "*) ;;
      *) echo "gpu-check: error: unknown step '$s' (steps: ${all_steps[*]})" >&2; exit 2 ;;
    esac
  done
fi
wanted() { case " ${selected[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
if [ -n "$bundle" ]; then
  for s in setup configure build; do
    wanted $s && { echo "gpu-check: error: --bundle brings a build: the step '$s' does not apply" >&2; exit 2; }
  done
  [ -f "$bundle" ] || { echo "gpu-check: error: --bundle: no file '$bundle'" >&2; exit 2; }
fi

cli="$build/apps/sciproxy"
sanitizer_timeout="${GPU_CHECK_SANITIZER_TIMEOUT:-1800}"
bench_args="${GPU_CHECK_BENCH_ARGS:-}"
if [ -d /usr/local/cuda/bin ] && ! command -v nvcc >/dev/null 2>&1; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

if ((dry_run)); then
  echo "gpu-check: dry run; the steps, in order (results in $out/):"
  [ -n "$bundle" ] && echo "  (bundle)   tar -xJf $bundle -C $build; each gpu test executable is run by itself"
  wanted setup && echo "  setup      ./scripts/setup.sh"
  wanted configure && echo "  configure  cmake --preset cuda -B $build"
  wanted build && echo "  build      cmake --build $build -j $(nproc)"
  wanted test && echo "  test       ctest --test-dir $build -L gpu --output-on-failure"
  for tool in memcheck racecheck; do
    wanted $tool && echo "  $tool  compute-sanitizer --tool $tool --error-exitcode 1 EXE, for each EXE of" \
      "ctest --test-dir $build -L gpu --show-only=json-v1"
  done
  wanted bench && echo "  bench      $cli bench KIND --device cuda --json $out/bench-KIND.json $bench_args," \
    "for each KIND listed by '$cli bench --help'"
  wanted demo && echo "  demo       $cli demo --json $out/demo.json"
  if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    echo "gpu-check: a GPU is present: $(nvidia-smi -L | head -n 1)"
  else
    echo "gpu-check: no GPU here; a real run would stop at once"
  fi
  exit 0
fi

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  echo "gpu-check: error: no NVIDIA GPU found (nvidia-smi lists none); run this on a machine with a GPU (--dry-run prints the steps)" >&2
  exit 2
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "gpu-check: error: python3 is needed to read ctest's test list and write the JSON" >&2
  exit 2
fi

# A bundle: unpacked into the build folder; its libraries fill in what this machine lacks, CUDA's
# come from the toolkit here, and the tests read their data from this checkout.
if [ -n "$bundle" ]; then
  mkdir -p "$build"
  tar -xJf "$bundle" -C "$build" || { echo "gpu-check: error: cannot unpack $bundle" >&2; exit 2; }
  cuda_libs=""
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && cuda_libs="$cuda_libs:$d"
  done
  export LD_LIBRARY_PATH="/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu:$PWD/$build/lib$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export SCIPROXY_TEST_DATA_DIR="$PWD/tests/data"
  bundle_commit=$(awk '$1 == "commit" {print $2; exit}' "$build/MANIFEST")
  if [ "$bundle_commit" != "$(git rev-parse HEAD 2>/dev/null)" ]; then
    echo "gpu-check: warning: the bundle was built from $bundle_commit, this checkout is $(git rev-parse HEAD 2>/dev/null)"
  fi
  missing=$(for exe in "$build"/tests/test_*_cuda "$build/apps/sciproxy"; do ldd "$exe" | grep 'not found'; done | sort -u)
  if [ -n "$missing" ]; then
    echo "gpu-check: error: libraries the bundle's programs need are missing here:" >&2
    echo "$missing" >&2
    exit 2
  fi
fi

mkdir -p "$out/logs"
rm -f "$out"/logs/*.log "$out"/bench-*.json "$out/demo.json" "$out/steps.tsv"
steps_tsv="$out/steps.tsv"
failed=0

# record NAME STATUS SECONDS EXIT_CODE LOG COMMAND...
record() {
  local name="$1" status="$2" seconds="$3" code="$4" log="$5"
  shift 5
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$seconds" "$code" "$log" "$*" >>"$steps_tsv"
  printf 'gpu-check: %-28s %-7s %8ss\n' "$name" "$status" "$seconds"
  if [ "$status" != passed ]; then failed=1; fi
}
# run NAME LOG COMMAND...: runs it with output to LOG (and the terminal), records the outcome.
run() {
  local name="$1" log="$2"
  shift 2
  echo "gpu-check: === $name: $*"
  local start end code
  start=$(date +%s.%N)
  "$@" 2>&1 | tee "$log"
  code=${PIPESTATUS[0]}
  end=$(date +%s.%N)
  local seconds
  seconds=$(python3 -c "print(f'{$end - $start:.1f}')")
  if ((code == 0)); then
    record "$name" passed "$seconds" "$code" "$log" "$@"
  else
    record "$name" failed "$seconds" "$code" "$log" "$@"
  fi
  return "$code"
}
skip() { record "$1" skipped 0 -1 "" "$2"; }

built_ok=1
if [ -n "${GPU_CHECK_DEBS:-}" ]; then
  for deb in "$GPU_CHECK_DEBS"/*.deb; do
    [ -e "$deb" ] && dpkg -x "$deb" /
  done
  ldconfig 2>/dev/null || true
fi
if wanted setup; then
  if ! run setup "$out/logs/setup.log" ./scripts/setup.sh; then
    sed -i '$ s/\tfailed\t/\twarning\t/' "$steps_tsv"
    failed=0
    echo "gpu-check: setup failed (recorded as a warning); going on with what is installed"
  fi
fi
if wanted configure; then
  run configure "$out/logs/configure.log" cmake --preset cuda -B "$build" || built_ok=0
fi
if wanted build; then
  if ((built_ok)); then
    run build "$out/logs/build.log" cmake --build "$build" -j "$(nproc)" || built_ok=0
  else
    skip build "configure failed"
  fi
fi
if [ -n "$bundle" ]; then
  [ -x "$cli" ] || { built_ok=0; echo "gpu-check: the bundle has no $cli" >&2; }
elif ((built_ok)) && [ ! -f "$build/CTestTestfile.cmake" ]; then
  built_ok=0
  echo "gpu-check: $build is not built (run the configure and build steps)" >&2
fi
# A gpu test skips for other reasons too (a host-only function, a cpu-only setting); these are
# the skips of a GPU not found, which on this machine are failures.
no_gpu_skip='no CUDA device found|no usable CUDA device|built without CUDA'

if wanted test; then
  if ((built_ok)) && [ -n "$bundle" ]; then
    for exe in "$build"/tests/test_*_cuda; do
      name=$(basename "$exe")
      if run "test: $name" "$out/logs/test-$name.log" "$exe"; then
        if grep -q -E "$no_gpu_skip" "$out/logs/test-$name.log"; then
          record "test: $name found the GPU" failed 0 1 "$out/logs/test-$name.log" "grep -E '$no_gpu_skip'"
        fi
      fi
    done
  elif ((built_ok)); then
    if run test "$out/logs/test.log" ctest --test-dir "$build" -L gpu --no-tests=error --output-on-failure --timeout 1800; then
      if grep -q -E "$no_gpu_skip" "$out/logs/test.log"; then
        record "test: every test found the GPU" failed 0 1 "$out/logs/test.log" "grep -E '$no_gpu_skip'"
      fi
    fi
  else
    skip test "no build"
  fi
fi

# The gpu test executables, from ctest's own list (gtest_discover_tests runs one executable per
# test case with a filter; the sanitizers run each executable once, over all its cases).
gpu_executables=()
if ((built_ok)) && [ -n "$bundle" ] && { wanted memcheck || wanted racecheck; }; then
  gpu_executables=("$build"/tests/test_*_cuda)
elif ((built_ok)) && { wanted memcheck || wanted racecheck; }; then
  mapfile -t gpu_executables < <(ctest --test-dir "$build" -L gpu --show-only=json-v1 2>/dev/null |
    python3 -c '
import json, sys
seen = []
for test in json.load(sys.stdin).get("tests", []):
    command = test.get("command") or []
    if command and command[0] not in seen:
        seen.append(command[0])
print("\n".join(seen))')
  if ((${#gpu_executables[@]} == 0)); then
    record "sanitizer: find gpu tests" failed 0 1 "" "ctest -L gpu --show-only=json-v1"
  fi
fi
for tool in memcheck racecheck; do
  wanted $tool || continue
  if ((!built_ok)); then
    skip "$tool" "no build"
    continue
  fi
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    record "$tool" failed 0 127 "" "compute-sanitizer not found (CUDA toolkit's bin on PATH?)"
    continue
  fi
  for exe in "${gpu_executables[@]}"; do
    run "$tool: $(basename "$exe")" "$out/logs/$tool-$(basename "$exe").log" \
      timeout "$sanitizer_timeout" compute-sanitizer --tool "$tool" --error-exitcode 1 \
      --print-limit 50 "$exe" ${GPU_CHECK_SANITIZER_FILTER:+--gtest_filter="$GPU_CHECK_SANITIZER_FILTER"}
  done
done

if wanted bench; then
  if ((built_ok)) && [ -x "$cli" ]; then
    # The kinds `sciproxy bench` offers: the Subcommands section of its help.
    mapfile -t kinds < <("$cli" bench --help 2>/dev/null |
      awk '/^Subcommands:/ {on = 1; next} on && /^[^ ]/ {on = 0} on && NF {print $1}')
    if ((${#kinds[@]} == 0)); then
      record "bench: list kinds" failed 0 1 "" "$cli bench --help"
    fi
    for kind in "${kinds[@]}"; do
      # shellcheck disable=SC2086  # GPU_CHECK_BENCH_ARGS is a list of words
      if run "bench: $kind" "$out/logs/bench-$kind.log" \
           "$cli" bench "$kind" --device cuda --json "$out/bench-$kind.json" $bench_args; then
        # Absent devices are skipped by the CLI: a sweep with no cuda point is a failure here.
        if ! grep -q '"cuda' "$out/bench-$kind.json" 2>/dev/null; then
          record "bench: $kind has cuda results" failed 0 1 "$out/bench-$kind.json" "grep cuda"
        fi
      fi
    done
  else
    skip bench "no build (or no $cli)"
  fi
fi
if wanted demo; then
  if ((built_ok)) && [ -x "$cli" ]; then
    run demo "$out/logs/demo.log" "$cli" demo --json "$out/demo.json"
  else
    skip demo "no build (or no $cli)"
  fi
fi

# The combined JSON and the summary.
python3 - "$out" "$steps_tsv" "$build" "$bundle" <<'PY'
import datetime, glob, json, os, platform, subprocess, sys
out, steps_tsv, build, bundle = sys.argv[1:5]

def capture(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as e:  # a missing tool is a fact worth recording, not a reason to stop
        return f"unavailable: {e}"

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:
        return {"error": f"could not read {path}: {e}"}

steps = []
if os.path.exists(steps_tsv):
    with open(steps_tsv) as f:
        for line in f:
            name, status, seconds, code, log, command = line.rstrip("\n").split("\t", 5)
            steps.append({"name": name, "status": status, "seconds": float(seconds),
                          "exit_code": int(code), "log": log or None, "command": command})
report = {
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "passed": all(s["status"] in ("passed", "warning") for s in steps) and bool(steps),
    "environment": {
        "host": platform.node(),
        "gpus": capture("nvidia-smi", "--query-gpu=name,driver_version,memory.total,compute_cap",
                        "--format=csv,noheader").splitlines(),
        "nvcc": capture("nvcc", "--version").splitlines()[-1:],
        "git_commit": capture("git", "rev-parse", "HEAD"),
        "build_dir": build,
        # The bundle's own record (a build folder may hold one from an earlier --bundle run).
        "bundle": open(os.path.join(build, "MANIFEST")).read().splitlines()[:5] if bundle else None,
    },
    "steps": steps,
    "bench": {os.path.basename(p)[len("bench-"):-len(".json")]: load(p)
              for p in sorted(glob.glob(os.path.join(out, "bench-*.json")))},
    "demo": load(os.path.join(out, "demo.json")) if os.path.exists(os.path.join(out, "demo.json")) else None,
}
with open(os.path.join(out, "gpu-check.json"), "w") as f:
    json.dump(report, f, indent=1)

lines = [f"sciproxy gpu-check, {report['date']}, commit {report['environment']['git_commit'][:12]}",
         "GPU: " + "; ".join(report["environment"]["gpus"] or ["none listed"]), ""]
lines.append(f"{'step':<40} {'status':<8} {'seconds':>9}")
for s in steps:
    lines.append(f"{s['name']:<40} {s['status']:<8} {s['seconds']:>9.1f}")
bad = [s for s in steps if s["status"] not in ("passed", "warning")]
lines += ["", "RESULT: " + ("PASS" if report["passed"] else f"FAIL ({len(bad)} of {len(steps)} steps)")]
for s in [s for s in steps if s["status"] != "passed"]:
    lines += ["", f"--- {s['name']}: {s['status']} ({s['command']})"]
    if s["log"] and os.path.exists(s["log"]) and s["log"].endswith(".log"):
        with open(s["log"], errors="replace") as f:
            lines += ["    " + l.rstrip() for l in f.readlines()[-15:]]
with open(os.path.join(out, "summary.txt"), "w") as f:
    f.write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
tar -czf "$out/logs.tar.gz" -C "$out" logs 2>/dev/null || true
echo "gpu-check: wrote $out/gpu-check.json and $out/summary.txt"
exit "$failed"
