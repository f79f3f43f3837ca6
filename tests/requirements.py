"""The one way a test skips: the machine lacks a program the test needs (a browser, PostgreSQL, root to
create the hub's Unix users, fork() for runs side by side, glibc's malloc). Each need has a COURSE_REQUIRE_* flag; CI sets them all (.ci/run), and
where one is set the missing program fails the test instead. No variable makes a test skip, and
tests/test_skips.py checks that no test skips any other way."""

import os

import pytest

FLAGS = {"browser": "COURSE_REQUIRE_BROWSER", "postgres": "COURSE_REQUIRE_POSTGRES", "hub": "COURSE_REQUIRE_HUB",
         "fork": "COURSE_REQUIRE_FORK", "glibc": "COURSE_REQUIRE_GLIBC"}


def missing(need, reason):
    """Skip the test for lack of ``need`` (a key of FLAGS), or fail it where its flag is set."""
    flag = FLAGS[need]
    if os.environ.get(flag) == "1":
        pytest.fail(f"{reason} ({flag}=1: this test must run here)", pytrace=False)
    pytest.skip(f"{reason} (set {flag}=1 to make this a failure)")


def root_or_missing(reason):
    """The hub's tests create users and chown files: they need root."""
    if os.geteuid() != 0:
        missing("hub", reason)
