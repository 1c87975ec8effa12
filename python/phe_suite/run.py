"""Run python-paillier's own test suite against fl_privacy.phe.

    python python/phe_suite/run.py [phe-1.5.0.tar.gz]

Without an argument, pip downloads phe's source distribution (pinned by version and hash
in requirements-phe-sdist.txt) into a temporary directory. The tests (phe/tests/*_test.py)
are extracted from it — nothing of phe is vendored in this repository — and run twice with
pytest, ``phe`` being fl_privacy.phe (``install_as_phe``, see conftest.py):

1. the suite as published: every test passes, except those listed with their reasons in
   conftest.py's EXPECTED_FAILURES (fl_privacy's deliberate deviations, python/README.md),
   which are strict expected failures: a listed test that passes, a new failure, or a
   listed test that no longer exists fails the run;
2. pheutil's tests (cli_test.py) with their 256-bit keys raised to 2048 bits, which must
   all pass: the command line works except for the key size it refuses.

Needs pytest, click and numpy (python/requirements-test.txt) and fl_privacy installed.
Exits with pytest's status (0 when both runs pass).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
TESTS = "phe-1.5.0/phe/tests/"


def download(into):
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
         "--require-hashes", "-r", str(HERE / "requirements-phe-sdist.txt"), "-d", str(into)],
        check=True,
    )
    (sdist,) = pathlib.Path(into).glob("phe-*.tar.gz")
    return sdist


def extract_tests(sdist, into):
    """phe/tests/*_test.py from the sdist into `into` (a flat directory: no phe package
    beside them, so that `import phe` can only mean fl_privacy.phe)."""
    names = []
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            name = member.name
            if name.startswith(TESTS) and name.endswith("_test.py") and member.isfile():
                data = archive.extractfile(member).read()
                target = pathlib.Path(into) / pathlib.PurePosixPath(name).name
                target.write_bytes(data)
                names.append(target.name)
    if not names:
        raise SystemExit("no tests found under %s in %s" % (TESTS, sdist))
    shutil.copy(HERE / "conftest.py", pathlib.Path(into) / "conftest.py")
    return sorted(names)


def pytest(directory, variant):
    env = dict(os.environ, FL_PHE_SUITE_VARIANT=variant)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE",
         "--rootdir", str(directory), str(directory)],
        env=env,
    ).returncode


def main(argv):
    with tempfile.TemporaryDirectory(prefix="phe-suite-") as tmp:
        tmp = pathlib.Path(tmp)
        sdist = pathlib.Path(argv[1]) if len(argv) > 1 else download(tmp / "sdist")
        published = tmp / "published"
        published.mkdir()
        names = extract_tests(sdist, published)
        print("phe's test suite from %s: %s" % (sdist.name, ", ".join(names)), flush=True)
        status = pytest(published, "published")

        raised = tmp / "cli-2048"
        raised.mkdir()
        cli = (published / "cli_test.py").read_text()
        count = cli.count("'--keysize', '256'")
        if count == 0:
            raise SystemExit("cli_test.py no longer generates 256-bit keys: update run.py")
        (raised / "cli_test.py").write_text(
            cli.replace("'--keysize', '256'", "'--keysize', '2048'"))
        shutil.copy(HERE / "conftest.py", raised / "conftest.py")
        print("pheutil's tests with their %d 256-bit keys raised to 2048 bits:" % count,
              flush=True)
        status_raised = pytest(raised, "cli-2048")
    return status or status_raised


if __name__ == "__main__":
    sys.exit(main(sys.argv))
