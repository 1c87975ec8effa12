"""``fl-privacy-flwr-run``: ``flwr run`` that exits non-zero when the run fails.

Flower's ``flwr run --stream`` exits 0 once the log stream ends, whether the run finished,
failed or was stopped (the ServerApp's exception is only in the streamed log). This
command runs ``flwr run ARGS... --stream``, passes its output through, then asks the
SuperLink for the run's final status (``flwr ls --run-id N --format json``) and

* exits 0 when the status is ``finished:completed``;
* otherwise prints one line — ``fl-privacy-flwr-run: run N finished:failed: <the
  ServerApp's error>`` (for SignDS, :class:`~fl_privacy.flower.RoundFailed`'s line: no
  report accepted in round r, or no client running SignDSMod) — and exits 1;
* exits with ``flwr run``'s own status when that is not 0 (the run did not start).

Usage: ``fl-privacy-flwr-run APP [CONNECTION] [any flwr run option...]``, e.g.
``fl-privacy-flwr-run . local --run-config "epsilon=10.0"``; ``python -m
fl_privacy.flower.run`` is the same. ``FLWR`` names the flwr executable (default: the one
beside this Python, else on the PATH).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time

__all__ = ["final_status", "main"]

_STARTED = re.compile(r"Successfully started run (\d+)")
#: A line of the ServerApp's traceback that names what stopped it (last one wins).
_ERROR = re.compile(r"(?:^|\s)((?:[\w.]+\.)?(?:RoundFailed|[A-Z]\w*Error|[A-Z]\w*Exception): .+)$")


def _flwr():
    found = os.environ.get("FLWR")
    if found:
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "flwr")
    return beside if os.path.exists(beside) else (shutil.which("flwr") or "flwr")


def _positionals(args):
    """The positional arguments of ``flwr run``'s (the app, the connection)."""
    positional = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a.startswith("-"):
            skip = "=" not in a and a not in ("--stream",)
            continue
        positional.append(a)
    return positional[:2]


def final_status(run_id, location=(), flwr=None):
    """``(status, details)`` of a run as ``flwr ls LOCATION --run-id N --format json``
    gives it (status e.g. ``finished:completed``, ``finished:failed``). ``location``: the
    connection (Flower >= 1.2x), or the app and the federation (older releases, whose ls
    takes both): the first form that answers is used."""
    location = list(location)
    forms = [location[1:], location]
    for form in forms:
        status = _ls(run_id, form, flwr or _flwr())
        if status[0] != "unknown":
            return status
    return status


def _ls(run_id, location, flwr):
    argv = [flwr, "ls"] + list(location) + ["--run-id", str(run_id), "--format", "json"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        lines = (done.stderr or done.stdout).strip().splitlines()
        return "unknown", "flwr ls gave no status: %s" % (lines[-1] if lines else "no output")
    runs = data.get("runs", []) if isinstance(data, dict) else data
    for run in runs if isinstance(runs, list) else []:
        if str(run.get("run-id")) == str(run_id):
            return str(run.get("status", "unknown")), str(run.get("status-details", ""))
    return "unknown", "flwr ls does not list run %s" % run_id


def main(argv=None):
    """Runs ``flwr run`` with ``argv`` and returns the exit status (see the module docs)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if args else 2
    if "--stream" not in args:
        args.append("--stream")
    flwr = _flwr()
    proc = subprocess.Popen([flwr, "run"] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, bufsize=1)
    run_id, error = None, None
    for line in proc.stdout:
        sys.stdout.write(line)
        sys.stdout.flush()
        text = re.sub(r"\x1b\[[0-9;]*m", "", line.rstrip("\n"))
        started = _STARTED.search(text)
        if started and run_id is None:
            run_id = int(started.group(1))
        failed = _ERROR.search(text)
        if failed:
            error = failed.group(1).strip()
    code = proc.wait()
    if code != 0:
        print("fl-privacy-flwr-run: flwr run exited with status %d" % code, flush=True)
        return code
    if run_id is None:
        print("fl-privacy-flwr-run: flwr run printed no run id", flush=True)
        return 1
    status, details = final_status(run_id, _positionals(args), flwr)
    deadline = time.monotonic() + 30
    while not status.startswith("finished") and time.monotonic() < deadline:
        time.sleep(1)  # the stream can end a moment before the status is recorded
        status, details = final_status(run_id, _positionals(args), flwr)
    if status == "finished:completed":
        return 0
    reason = error or details or "no error line in the run's log"
    print("fl-privacy-flwr-run: run %d %s: %s" % (run_id, status, reason), flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
