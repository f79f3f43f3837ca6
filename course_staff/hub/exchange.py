"""nbgrader's exchange with the permissions it needs, and no more.

    ROOT/                     root        1777  nbgrader checks that every user can write here; the
                                                sticky bit: no one renames or deletes what another made
    ROOT/rl-for-llms/         instructor  0755
      outbound/               instructor  0755  released labs: everyone reads, only the instructor writes
      inbound/                instructor  3733  submissions: everyone may add one, NO ONE but the
                                                instructor may list them (no r bit); sticky: no student
                                                renames or deletes another's; setgid as nbgrader makes it
      feedback/               instructor  0711  feedback files, each named by a hash of the submitted
                                                notebook: a student can open their own, list none

nbgrader itself makes each submission a folder of mode 0777 (so the instructor may delete it) with
files of mode 0444, named ``<student>+<lab>+<timestamp>+<12 random characters>``: a submission is
private because inbound/ cannot be listed and its name cannot be guessed, not by its own mode.
"""

import os
import pwd
import shutil
from pathlib import Path

from course_staff.hub import COURSE

# path under the exchange root: (owner: "root" or "instructor", mode)
LAYOUT = {
    ".": ("root", 0o1777),
    COURSE: ("instructor", 0o755),
    f"{COURSE}/outbound": ("instructor", 0o755),
    f"{COURSE}/inbound": ("instructor", 0o3733),
    f"{COURSE}/feedback": ("instructor", 0o711),
}


def make(root, instructor):
    """Create the exchange at ``root`` (absent or empty) with LAYOUT's owners and modes."""
    root = Path(root)
    for rel, (owner, mode) in LAYOUT.items():
        path = root / rel
        path.mkdir(parents=True, exist_ok=True)
        pw = pwd.getpwnam(instructor if owner == "instructor" else "root")
        os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(path, mode)
    return root


def modes(root):
    """{path under root: (owner name, mode)} as the exchange's folders are now (for checks)."""
    out = {}
    for rel in LAYOUT:
        st = (Path(root) / rel).stat()
        out[rel] = (pwd.getpwuid(st.st_uid).pw_name, st.st_mode & 0o7777)
    return out


def remove(root):
    shutil.rmtree(root, ignore_errors=True)
