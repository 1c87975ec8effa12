"""pytest configuration for python-paillier's own test suite run against fl_privacy.phe
(run.py copies this file beside the extracted tests).

``phe`` is made to be fl_privacy.phe before any test module imports it, and the run stops
if the real python-paillier could be what the tests use. Every test must pass except those
in EXPECTED_FAILURES: each is fl_privacy's deliberate deviation from phe, documented in
python/README.md, and marked as a strict expected failure (it fails the run if it passes).
A listed test that is not collected also fails the run, so the list stays exact.
"""

import os

import pytest

import fl_privacy.phe

fl_privacy.phe.install_as_phe()

import phe  # noqa: E402  (after the alias, on purpose)
import phe.command_line  # noqa: E402
import phe.encoding  # noqa: E402
import phe.paillier  # noqa: E402
import phe.util  # noqa: E402

assert phe is fl_privacy.phe, "phe is not fl_privacy.phe"
assert phe.paillier.PaillierPublicKey.__module__ == "fl_privacy.paillier"
assert phe.command_line.cli.callback.__module__ == "fl_privacy.phe.command_line"

#: The deviation every expected failure below comes from.
KEY_SIZE = (
    "keys under 2048 bits are refused (generated, imported as public keys, or made by "
    "pheutil genpkey): about 80-bit security or less. Existing 1024-2047-bit keys can only "
    "decrypt, through LegacyPaillierPrivateKey."
)

_CLI_256 = KEY_SIZE + " Here: the test's `pheutil genpkey --keysize 256` fails, and so "
_CLI_256 += "does every step after it (run.py's second run passes these tests at 2048 bits)."

_PUBLISHED = {
    # paillier_test.py
    "paillier_test.py::PaillierGeneric::testCreateKeypairLengths":
        KEY_SIZE + " Here: generate_paillier_keypair(n_length=8), the first of 8 ... 4096.",
    "paillier_test.py::PaillierGeneric::testKeyUniqueness":
        KEY_SIZE + " Here: generate_paillier_keypair(n_length=256).",
    "paillier_test.py::PaillierGeneric::testPrivateKeyEquality":
        KEY_SIZE + " Here: PaillierPublicKey(2537), a 12-bit n.",
    "paillier_test.py::PaillierTestRawEncryption::testEncryptIsRandom":
        KEY_SIZE + " Here: PaillierPublicKey(126869), a 17-bit n.",
    "paillier_test.py::PaillierTestRawEncryption::testEncryptRegression":
        KEY_SIZE + " Here: PaillierPublicKey(126869), a 17-bit n.",
    "paillier_test.py::PaillierTestRawEncryption::testRawEncryptDecryptRegression0":
        KEY_SIZE + " Here: PaillierPublicKey(126869), a 17-bit n.",
    "paillier_test.py::PaillierTestEncryptedNumber::testCantAddWithDifferentKeys":
        KEY_SIZE + " Here: PaillierPublicKey(126869), a 17-bit n.",
    "paillier_test.py::PaillierTestEncryptedNumber::testCantEncryptDecryptIntWithDifferentSizeKey":
        KEY_SIZE + " Here: generate_paillier_keypair(n_length=128).",
}
_PUBLISHED.update(
    ("cli_test.py::" + name, _CLI_256)
    for name in [
        "TestConsoleBasics::test_extract_public_key",
        "TestConsoleBasics::test_generate_keypair_to_file",
        "TestConsoleBasics::test_generate_keypair_to_stdout",
        "TestConsoleEncryption::test_decrypt_float",
        "TestConsoleEncryption::test_decrypt_positive_integers",
        "TestConsoleEncryption::test_decrypt_signed_integers",
        "TestConsoleEncryption::test_encrypt_float",
        "TestConsoleEncryption::test_encrypt_positive_integers",
        "TestConsoleEncryption::test_encrypt_signed_integers",
        "TestConsoleEncryption::test_encrypt_to_stdout",
        "TestConsoleAddition::test_add_floats",
        "TestConsoleAddition::test_add_int",
        "TestConsoleAddition::test_add_large_floats",
        "TestConsoleAddition::test_add_large_ints",
        "TestConsoleAddition::test_add_signed_int",
        "TestConsoleAddition::test_addenc_floats",
        "TestConsoleAddition::test_addenc_int",
        "TestConsoleAddition::test_addenc_large_floats",
        "TestConsoleAddition::test_addenc_large_ints",
        "TestConsoleAddition::test_addenc_signed_int",
        "TestConsoleMultiplication::test_multiply_floats",
        "TestConsoleMultiplication::test_multiply_ints",
        "TestConsoleMultiplication::test_multiply_random_ints",
        "TestFuzz::test_add_random_floats",
        "TestFuzz::test_add_random_ints",
        "TestFuzz::test_addenc_random_floats",
        "TestFuzz::test_addenc_random_ints",
        "TestFuzz::test_multiply_random_ints",
    ]
)

#: Test node id -> why it fails, per run variant of run.py.
EXPECTED_FAILURES = {
    "published": _PUBLISHED,
    # cli_test.py with its 256-bit keys raised to 2048 bits: everything passes.
    "cli-2048": {},
}


def _expected():
    variant = os.environ.get("FL_PHE_SUITE_VARIANT", "published")
    if variant not in EXPECTED_FAILURES:
        raise pytest.UsageError("unknown FL_PHE_SUITE_VARIANT %r" % variant)
    return EXPECTED_FAILURES[variant]


def pytest_collection_modifyitems(config, items):
    expected = _expected()
    collected = set()
    for item in items:
        reason = expected.get(item.nodeid)
        if reason is not None:
            # The failure must be the refusal itself: a ValueError from fl_privacy (a
            # generated or imported key under 2048 bits), or in pheutil's tests the
            # AssertionError on the failed command's exit status.
            raises = AssertionError if item.nodeid.startswith("cli_test.py") else ValueError
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True, raises=raises))
            collected.add(item.nodeid)
    missing = sorted(set(expected) - collected)
    if missing:
        raise pytest.UsageError(
            "expected failures that were not collected (update conftest.py): %s"
            % ", ".join(missing)
        )


def pytest_terminal_summary(terminalreporter):
    stats = terminalreporter.stats
    passed = len(stats.get("passed", []))
    xfailed = len(stats.get("xfailed", []))
    failed = len(stats.get("failed", [])) + len(stats.get("error", []))
    xpassed = len(stats.get("xpassed", []))
    terminalreporter.write_line(
        "python-paillier 1.5.0's tests against fl_privacy.phe (%s): %d passed, %d expected "
        "failures (documented deviations), %d unexpected failures, %d unexpected passes"
        % (os.environ.get("FL_PHE_SUITE_VARIANT", "published"), passed, xfailed, failed, xpassed)
    )
