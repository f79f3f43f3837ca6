"""The hub's exchange gets exactly the owners and modes that course_staff/hub/exchange.py lists."""

import stat

from course_staff.hub import COURSE, exchange
from tests import requirements


def test_the_exchange_is_laid_out_as_listed(tmp_path):
    requirements.root_or_missing("the exchange's owners are other users: chown needs root")
    root = exchange.make(tmp_path / "exchange", "root")
    laid = exchange.modes(root)
    assert laid == {rel: ("root", mode) for rel, (_, mode) in exchange.LAYOUT.items()}, laid
    inbound = laid[f"{COURSE}/inbound"][1]
    assert not inbound & stat.S_IROTH and inbound & stat.S_IWOTH and inbound & stat.S_ISVTX, \
        "students must add to inbound/ but never list it, nor rename another's submission"
    assert laid["."][1] & stat.S_ISVTX, "the exchange's root needs the sticky bit"


def test_the_layout_gives_no_one_but_the_instructor_a_read_of_inbound():
    for rel, (owner, mode) in exchange.LAYOUT.items():
        if rel.endswith(("inbound", "feedback")):
            assert owner == "instructor" and not mode & (stat.S_IRGRP | stat.S_IROTH), (rel, oct(mode))
